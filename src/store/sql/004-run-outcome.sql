-- 004: what a run record gained with pipelines as data (issue 7).
--
-- outcome: how the run ended (completed, max_iterations_reached,
-- plan_rejected, code_rejected, implementation_failed, gate_rejected,
-- or blocked, failed, aborted as the status says); NULL while it lives.
-- progress: a stage's state between calls, a JSON object as text,
-- written by every pipeline family that keeps one (bugfix: iterations,
-- review versions, phased steps; loop: its iteration; assist: its
-- escalations; research: its claims and rounds); NULL when the pipeline
-- keeps none.
-- config_snapshot: the merged config as JSON text when the run was made
-- (secrets redacted), whose hash config_hash is: a run keeps to it when
-- the config changes under it, unless it is resumed with the new one.
-- NULL for runs made before this migration.
ALTER TABLE runs ADD COLUMN outcome TEXT;
ALTER TABLE runs ADD COLUMN progress TEXT;
ALTER TABLE runs ADD COLUMN config_snapshot TEXT;
