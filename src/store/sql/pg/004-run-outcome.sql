-- 004: a run's outcome, progress and config snapshot (see
-- ../004-run-outcome.sql).
ALTER TABLE runs ADD COLUMN outcome TEXT;
ALTER TABLE runs ADD COLUMN progress TEXT;
ALTER TABLE runs ADD COLUMN config_snapshot TEXT;
