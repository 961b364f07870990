-- Time a run has spent inside its stages (see ../002-active-time.sql).
ALTER TABLE runs ADD COLUMN active_ms BIGINT NOT NULL DEFAULT 0;
