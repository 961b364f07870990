-- 005: the forge, PostgreSQL dialect of ../005-forge.sql (forge_links,
-- forge_deliveries, forge_cursors, forge_stats): the same tables,
-- columns, keys.

CREATE TABLE forge_links (
	task_id          BIGINT  PRIMARY KEY REFERENCES tasks (id),
	repo             TEXT    NOT NULL,
	issue_number     BIGINT,
	issue_url        TEXT,
	pr_number        BIGINT,
	pr_url           TEXT,
	pr_branch        TEXT,
	pr_head_sha      TEXT,
	pr_state         TEXT,
	checks           TEXT,
	review           TEXT,
	reacted          TEXT,
	commented        TEXT,
	reaction_rounds  INTEGER NOT NULL DEFAULT 0,
	created_at       BIGINT  NOT NULL,
	updated_at       BIGINT  NOT NULL,
	version          BIGINT  NOT NULL DEFAULT 1,
	UNIQUE (repo, issue_number)
);
CREATE UNIQUE INDEX forge_links_pr ON forge_links (repo, pr_number);

CREATE TABLE forge_deliveries (
	delivery_id  TEXT    PRIMARY KEY,
	event        TEXT,
	received_at  BIGINT  NOT NULL
);

CREATE TABLE forge_cursors (
	url         TEXT    PRIMARY KEY,
	etag        TEXT,
	cursor      TEXT,
	updated_at  BIGINT  NOT NULL
);

CREATE TABLE forge_stats (
	id                 INTEGER PRIMARY KEY CHECK (id = 1),
	calls              BIGINT  NOT NULL DEFAULT 0,
	not_modified       BIGINT  NOT NULL DEFAULT 0,
	rate_waits         BIGINT  NOT NULL DEFAULT 0,
	rate_wait_seconds  BIGINT  NOT NULL DEFAULT 0,
	syncs              BIGINT  NOT NULL DEFAULT 0,
	webhooks           BIGINT  NOT NULL DEFAULT 0
);
