-- 003: the runtime. Tasks queued for workers, their dependencies, the
-- leases that say who works on what, the workers themselves, the merge
-- queue and the planner's task graphs (DESIGN.md sections 1 and 4).

-- One row per task. status is queued, running, done, failed, blocked or
-- cancelled; block_reason says why a blocked task waits (awaiting_judge,
-- awaiting_approval, paused, quota_wait, needs_rework,
-- dependency_failed). version guards every update, as for runs.
--
-- The lease: while a worker works on a task, lease_holder names it,
-- lease_expires_at says until when, and lease_token is the fencing
-- token, a number that only grows (counters.lease_token) and that every
-- write of the holder must still match.
CREATE TABLE tasks (
	id                INTEGER PRIMARY KEY,
	title             TEXT    NOT NULL,
	body              TEXT,
	kind              TEXT    NOT NULL DEFAULT 'code',
	pipeline          TEXT,
	status            TEXT    NOT NULL,
	block_reason      TEXT,
	reason            TEXT,
	priority          INTEGER NOT NULL DEFAULT 0,
	area              TEXT,
	allowed_paths     TEXT,
	verify            TEXT,
	base_ref          TEXT,
	origin            TEXT    NOT NULL DEFAULT 'user',
	parent_id         INTEGER REFERENCES tasks (id),
	depth             INTEGER NOT NULL DEFAULT 0,
	plan_id           INTEGER,
	attempts          INTEGER NOT NULL DEFAULT 0,
	max_attempts      INTEGER NOT NULL DEFAULT 3,
	run_id            TEXT,
	not_before        INTEGER NOT NULL DEFAULT 0,
	failure_sig       TEXT,
	failure_count     INTEGER NOT NULL DEFAULT 0,
	lease_holder      TEXT,
	lease_token       INTEGER NOT NULL DEFAULT 0,
	lease_expires_at  INTEGER NOT NULL DEFAULT 0,
	judged_at         INTEGER NOT NULL DEFAULT 0,
	judgement_version INTEGER NOT NULL DEFAULT 0,
	judged_by         TEXT,
	created_at        INTEGER NOT NULL,
	updated_at        INTEGER NOT NULL,
	started_at        INTEGER NOT NULL DEFAULT 0,
	ended_at          INTEGER NOT NULL DEFAULT 0,
	version           INTEGER NOT NULL
);

-- The claim looks for the best queued task: this index hands it over in
-- priority order without sorting the backlog.
CREATE INDEX tasks_claim ON tasks (status, priority DESC, id);

-- task_id waits until depends_on is done.
CREATE TABLE task_deps (
	task_id    INTEGER NOT NULL REFERENCES tasks (id),
	depends_on INTEGER NOT NULL REFERENCES tasks (id),
	PRIMARY KEY (task_id, depends_on)
);
CREATE INDEX task_deps_on ON task_deps (depends_on);

-- Monotonic counters; lease_token is the fencing token source.
CREATE TABLE counters (
	name  TEXT PRIMARY KEY,
	value INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('lease_token', 0);

-- Workers that are or were alive, for the sweeps and `baton doctor`.
CREATE TABLE workers (
	id           TEXT    PRIMARY KEY,
	host         TEXT    NOT NULL,
	pid          INTEGER NOT NULL,
	task_id      INTEGER,
	started_at   INTEGER NOT NULL,
	heartbeat_at INTEGER NOT NULL,
	stopped_at   INTEGER NOT NULL DEFAULT 0
);

-- Branches waiting to land on the base: pending, processing (claimed
-- until claim_expires_at), merged or failed.
CREATE TABLE merge_queue (
	id               INTEGER PRIMARY KEY,
	run_id           TEXT    NOT NULL UNIQUE REFERENCES runs (id),
	task_id          INTEGER,
	branch           TEXT    NOT NULL,
	base_ref         TEXT,
	status           TEXT    NOT NULL,
	attempts         INTEGER NOT NULL DEFAULT 0,
	not_before       INTEGER NOT NULL DEFAULT 0,
	claimed_by       TEXT,
	claim_expires_at INTEGER NOT NULL DEFAULT 0,
	merged_commit    TEXT,
	reason           TEXT,
	created_at       INTEGER NOT NULL,
	updated_at       INTEGER NOT NULL,
	version          INTEGER NOT NULL
);
CREATE INDEX merge_queue_status ON merge_queue (status, id);

-- The planner's task graphs: each `baton plan` of one source writes the
-- next version.
CREATE TABLE plans (
	id         INTEGER PRIMARY KEY,
	source     TEXT    NOT NULL,
	version    INTEGER NOT NULL,
	content    TEXT    NOT NULL,
	created_at INTEGER NOT NULL,
	UNIQUE (source, version)
);

-- A run belongs to the task it attempts (0: a foreground `baton run`);
-- an event may be about a task rather than a run.
ALTER TABLE runs ADD COLUMN task_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE events ADD COLUMN task_id INTEGER;
CREATE INDEX events_task_seq ON events (task_id, seq);
