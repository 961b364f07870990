-- 006: every host sees every run (issue 21). The files of a run folder
-- (artifacts, reports, agent transcripts, hook and check logs) are kept
-- in the store as well, so that `baton show` and the API of any host
-- answer for a run another host drove; and each worker records how far
-- its host's clock is from the database's.

-- One row per file of a run folder, by its path there (name:
-- "plan.md", "reports/001.md", "calls/0007-execute-claude-0.stdout";
-- a transcript's name says its stage and attempt). Written again when
-- the file changes; the run folder keeps the local copy. content holds
-- at most the configured cap (store.file_cap_bytes) of the file's first
-- bytes; truncated is 1 when the file was larger, and then size, sha256
-- (of the whole file, hex), host and path say where the whole of it is.
CREATE TABLE run_files (
	run_id      TEXT    NOT NULL REFERENCES runs (id),
	name        TEXT    NOT NULL,
	size        INTEGER NOT NULL,
	sha256      TEXT    NOT NULL,
	truncated   INTEGER NOT NULL DEFAULT 0,
	content     BLOB    NOT NULL,
	host        TEXT    NOT NULL,
	path        TEXT    NOT NULL,
	updated_at  INTEGER NOT NULL,
	PRIMARY KEY (run_id, name)
);

-- The worker's host clock minus the database's, in ms, as measured at
-- its last heartbeat (always 0 on SQLite: one host, one clock).
ALTER TABLE workers ADD COLUMN clock_skew_ms INTEGER NOT NULL DEFAULT 0;
