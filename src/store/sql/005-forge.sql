-- 005: the forge (issue 19): which task came from which GitHub issue and
-- which pull request carries it, the webhook deliveries already acted
-- on, the ETags and cursors of polled listings, and the client's
-- counters.

-- One row per issue made a task (or per task given a PR). The unique
-- (repo, issue_number) is what makes intake exactly once whatever the
-- number of syncs or hosts: the second insert of a racing pair fails on
-- it and that sync takes the existing task. issue_number is NULL for a
-- task that has a PR but came from no issue (NULLs never collide, so
-- any number of such tasks may exist), and pr_number is NULL until the
-- PR is opened. pr_state is open, closed or merged; pr_head_sha is the
-- last head baton pushed or saw, so that a push by a person is noticed;
-- pr_branch is the PR's head branch on forge.remote. checks (success,
-- failure, pending) and review (approved, changes_requested) are what
-- the last sync read. reacted is the signature of the failure or review
-- the last fix round answered, so that one failure makes one round;
-- commented is the last run comment posted ("started:RUN",
-- "ended:RUN"), so that a comment is posted once. reaction_rounds counts
-- the fix rounds made from CI failures and reviews
-- (forge.reactions.max_rounds). version guards updates as a task's
-- does: UPDATE ... WHERE task_id = ? AND version = ?.
CREATE TABLE forge_links (
	task_id          INTEGER PRIMARY KEY REFERENCES tasks (id),
	repo             TEXT    NOT NULL,
	issue_number     INTEGER,
	issue_url        TEXT,
	pr_number        INTEGER,
	pr_url           TEXT,
	pr_branch        TEXT,
	pr_head_sha      TEXT,
	pr_state         TEXT,
	checks           TEXT,
	review           TEXT,
	reacted          TEXT,
	commented        TEXT,
	reaction_rounds  INTEGER NOT NULL DEFAULT 0,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	version          INTEGER NOT NULL DEFAULT 1,
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

-- The forge client's counters for /metrics (struct forge_stats): one
-- row, id 1, that every sync adds to (the sync runs in a process of its
-- own, so the counts cannot live in the server's memory).
CREATE TABLE forge_stats (
	id                 INTEGER PRIMARY KEY CHECK (id = 1),
	calls              INTEGER NOT NULL DEFAULT 0,
	not_modified       INTEGER NOT NULL DEFAULT 0,
	rate_waits         INTEGER NOT NULL DEFAULT 0,
	rate_wait_seconds  INTEGER NOT NULL DEFAULT 0,
	syncs              INTEGER NOT NULL DEFAULT 0,
	webhooks           INTEGER NOT NULL DEFAULT 0
);
