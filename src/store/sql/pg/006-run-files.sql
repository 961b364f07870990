-- 006: run files and clock skew, PostgreSQL dialect of ../006-run-files.sql:
-- the same table, columns, keys; content is BYTEA (a transcript need not
-- be UTF-8).

CREATE TABLE run_files (
	run_id      TEXT    NOT NULL REFERENCES runs (id),
	name        TEXT    NOT NULL,
	size        BIGINT  NOT NULL,
	sha256      TEXT    NOT NULL,
	truncated   INTEGER NOT NULL DEFAULT 0,
	content     BYTEA   NOT NULL,
	host        TEXT    NOT NULL,
	path        TEXT    NOT NULL,
	updated_at  BIGINT  NOT NULL,
	PRIMARY KEY (run_id, name)
);

ALTER TABLE workers ADD COLUMN clock_skew_ms BIGINT NOT NULL DEFAULT 0;
