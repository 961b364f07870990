-- 012: the repository's memory (issue 26, sql/012-memory.sql): the same
-- table and columns.
CREATE TABLE memory (
	seq         BIGSERIAL PRIMARY KEY, -- insertion order
	id          TEXT    NOT NULL UNIQUE,
	run_id      TEXT,
	kind        TEXT    NOT NULL,
	body        TEXT    NOT NULL,
	created_at  BIGINT  NOT NULL,
	updated_at  BIGINT  NOT NULL
);
