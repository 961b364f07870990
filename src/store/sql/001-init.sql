-- 001: the first schema. Runs, their events and the versioned outputs of
-- their stages.
--
-- Migrations are numbered NNN-name.sql, embedded into the binary and
-- applied in order, each in its own transaction (so a file must not say
-- BEGIN or COMMIT); schema_migrations records which have been applied.
-- Never edit a migration that has shipped: add the next number.
--
-- Times are INTEGER milliseconds since the epoch, 0 meaning "not yet".

-- One row per run. seq is the rowid, so run ids get small deterministic
-- numbers ("r7-..."); version guards every update (WHERE version = ?).
CREATE TABLE runs (
	seq              INTEGER PRIMARY KEY,
	id               TEXT    NOT NULL UNIQUE,
	task             TEXT    NOT NULL,
	pipeline         TEXT,
	status           TEXT    NOT NULL,
	stage            TEXT,
	phase            TEXT,
	paused_at_status TEXT,
	gate_status      TEXT,
	gate_back        TEXT,
	reason           TEXT,
	worktree         TEXT,
	branch           TEXT,
	base_ref         TEXT,
	base_commit      TEXT,
	checkpoint       TEXT,
	config_hash      TEXT,
	review_loops     INTEGER NOT NULL DEFAULT 0,
	max_review_loops INTEGER NOT NULL DEFAULT 0,
	pause_requested  INTEGER NOT NULL DEFAULT 0,
	abort_requested  INTEGER NOT NULL DEFAULT 0,
	attempt          INTEGER NOT NULL DEFAULT 0,
	agent_pid        INTEGER NOT NULL DEFAULT 0,
	steer_seq        INTEGER NOT NULL DEFAULT 0,
	tokens_in        INTEGER NOT NULL DEFAULT 0,
	tokens_out       INTEGER NOT NULL DEFAULT 0,
	cost_usd         REAL    NOT NULL DEFAULT 0,
	created_at       INTEGER NOT NULL,
	started_at       INTEGER NOT NULL DEFAULT 0,
	phase_started_at INTEGER NOT NULL DEFAULT 0,
	updated_at       INTEGER NOT NULL,
	ended_at         INTEGER NOT NULL DEFAULT 0,
	version          INTEGER NOT NULL
);

-- "baton status" lists runs of one status newest first: this index
-- answers it without a scan or a sort however many runs there are.
CREATE INDEX runs_status_seq ON runs (status, seq);

-- The journal. AUTOINCREMENT keeps seq strictly increasing and never
-- reused, so "events after seq N" is a safe cursor for followers.
CREATE TABLE events (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	run_id      TEXT    REFERENCES runs (id),
	ts          INTEGER NOT NULL,
	type        TEXT    NOT NULL,
	from_status TEXT,
	to_status   TEXT,
	data        TEXT
);

CREATE INDEX events_run_seq ON events (run_id, seq);

-- What each stage produced. A re-run adds version N+1 and never
-- overwrites N.
CREATE TABLE stage_outputs (
	run_id     TEXT    NOT NULL REFERENCES runs (id),
	stage      TEXT    NOT NULL,
	artifact   TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	decision   TEXT,
	content    TEXT,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (run_id, stage, artifact, version)
);
