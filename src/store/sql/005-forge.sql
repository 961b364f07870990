-- 005: the forge (issue 19): which task came from which GitHub issue and
-- which pull request carries it, the webhook deliveries already acted
-- on, and the ETags and cursors of polled listings.

-- One row per issue made a task (or per task given a PR). The unique
-- (repo, issue_number) is what makes intake exactly once whatever the
-- number of syncs or hosts: the second insert of a racing pair fails on
-- it and that sync takes the existing task. issue_number is NULL for a
-- task that has a PR but came from no issue. pr_state is open, closed or
-- merged; pr_head_sha is the last head baton pushed or saw, so that a
-- push by a person is noticed. reaction_rounds counts the fix rounds
-- made from CI failures and reviews (forge.reactions.max_rounds).
CREATE TABLE forge_links (
	task_id          INTEGER PRIMARY KEY REFERENCES tasks (id),
	repo             TEXT    NOT NULL,
	issue_number     INTEGER,
	issue_url        TEXT,
	pr_number        INTEGER,
	pr_url           TEXT,
	pr_head_sha      TEXT,
	pr_state         TEXT,
	reaction_rounds  INTEGER NOT NULL DEFAULT 0,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	UNIQUE (repo, issue_number)
);
CREATE UNIQUE INDEX forge_links_pr ON forge_links (repo, pr_number);

-- A webhook delivery (X-GitHub-Delivery) is acted on once: a redelivery
-- finds its id here.
CREATE TABLE forge_deliveries (
	delivery_id  TEXT    PRIMARY KEY,
	event        TEXT,
	received_at  INTEGER NOT NULL
);

-- Per polled listing URL: the ETag of its last 200 answer (sent back as
-- If-None-Match, so an unchanged listing costs one 304) and a cursor
-- (e.g. the newest updated_at seen).
CREATE TABLE forge_cursors (
	url         TEXT    PRIMARY KEY,
	etag        TEXT,
	cursor      TEXT,
	updated_at  INTEGER NOT NULL
);
