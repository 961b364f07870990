-- Time a run has spent inside its stages (agents and checks), the clock
-- budget.max_wall_minutes counts: waiting at a gate or paused does not.
ALTER TABLE runs ADD COLUMN active_ms INTEGER NOT NULL DEFAULT 0;
