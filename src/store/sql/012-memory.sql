-- 012: the repository's memory (issue 26, OpenViber; docs/operations.md
-- "Memory"): what runs decided and how they ended, and notes people
-- add, read back into later runs' prompts. One row per entry; body is
-- the entry's text, kept as written (it is untrusted text: prompts
-- delimit it). The files under .baton/memory/ mirror these rows.
CREATE TABLE memory (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT, -- insertion order
	id          TEXT    NOT NULL UNIQUE,
	run_id      TEXT,
	kind        TEXT    NOT NULL,
	body        TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);
