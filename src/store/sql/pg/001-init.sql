-- 001: the first schema, PostgreSQL dialect of ../001-init.sql: the same
-- tables, columns and indexes (see that file for what they are for),
-- plus what ordering events needs on a server with concurrent writers.
--
-- Times are BIGINT milliseconds since the epoch, 0 meaning "not yet".

-- runs.seq has no default: run_create takes MAX + 1 under a transaction
-- lock, so run numbers stay gapless as on SQLite (a sequence would skip
-- the number of every creation that rolled back).
CREATE TABLE runs (
	seq              BIGINT  PRIMARY KEY,
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
	review_loops     BIGINT  NOT NULL DEFAULT 0,
	max_review_loops BIGINT  NOT NULL DEFAULT 0,
	pause_requested  BIGINT  NOT NULL DEFAULT 0,
	abort_requested  BIGINT  NOT NULL DEFAULT 0,
	attempt          BIGINT  NOT NULL DEFAULT 0,
	agent_pid        BIGINT  NOT NULL DEFAULT 0,
	steer_seq        BIGINT  NOT NULL DEFAULT 0,
	tokens_in        BIGINT  NOT NULL DEFAULT 0,
	tokens_out       BIGINT  NOT NULL DEFAULT 0,
	cost_usd         DOUBLE PRECISION NOT NULL DEFAULT 0,
	created_at       BIGINT  NOT NULL,
	started_at       BIGINT  NOT NULL DEFAULT 0,
	phase_started_at BIGINT  NOT NULL DEFAULT 0,
	updated_at       BIGINT  NOT NULL,
	ended_at         BIGINT  NOT NULL DEFAULT 0,
	version          BIGINT  NOT NULL
);

CREATE INDEX runs_status_seq ON runs (status, seq);

-- The journal, and why it needs more than a sequence here.
--
-- Followers (the live stream, the notify cursor, `baton events
-- --follow`, SSE resume) read "events after seq N" and move N to the
-- last seq they saw, so they rely on a seq never appearing below a seq
-- already handed out. On SQLite one writer at a time makes that true.
-- Here a seq is drawn from events_seq when the row is inserted but the
-- row becomes visible when its transaction commits: seq 11 can commit
-- while seq 10 is still running, and a follower that saw 11 would skip
-- 10 forever.
--
-- So every event records a horizon: an xid above that of every
-- transaction that drew a seq before it. Every appending transaction
-- takes its xid before drawing its seq (baton_event_add), so a smaller
-- seq belongs to a transaction whose xid is below the horizon. Once a
-- reader's snapshot has xmin >= horizon, every such transaction has
-- ended and what it committed is visible.
--
-- Readers therefore stop before the first event that follows a hole (a
-- missing seq) while its horizon is above their xmin: the hole may
-- still fill. When it is not, the hole is for good (a rollback) and is
-- skipped. Readers compute this in the same statement (one snapshot) as
-- the rows they return; events_horizon keeps it to the recent events.
-- A transaction left open anywhere on the server delays followers past
-- a hole (never otherwise) until it ends.
CREATE SEQUENCE events_seq;
CREATE TABLE events (
	seq         BIGINT  PRIMARY KEY,
	run_id      TEXT    REFERENCES runs (id),
	ts          BIGINT  NOT NULL,
	type        TEXT    NOT NULL,
	from_status TEXT,
	to_status   TEXT,
	data        TEXT,
	horizon     xid8    NOT NULL
);

CREATE INDEX events_run_seq ON events (run_id, seq);
CREATE INDEX events_horizon ON events (horizon);

-- Written to, and rolled back, by baton_event_add: see there.
CREATE UNLOGGED TABLE event_clock (tick INTEGER);

-- The only way events are appended. The horizon cannot be the xmax of
-- a snapshot taken after nextval: xmax is one past the newest xid that
-- ENDED, and a transaction that took its xid later and drew a smaller
-- seq may still be running. So, after nextval, a subtransaction writes
-- to event_clock (which draws a new xid, larger than every xid drawn
-- before) and is rolled back (which ends that xid): the xmax of a
-- snapshot taken after that is above it. VOLATILE under READ COMMITTED:
-- each statement takes a fresh snapshot. The NOTIFY is sent at commit
-- (one per transaction).
CREATE FUNCTION baton_event_add(p_run_id TEXT, p_ts BIGINT, p_type TEXT,
				p_from TEXT, p_to TEXT, p_data TEXT)
RETURNS BIGINT LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	s BIGINT;
	h xid8;
BEGIN
	PERFORM pg_current_xact_id();
	s := nextval('events_seq');
	BEGIN
		INSERT INTO event_clock VALUES (1);
		RAISE SQLSTATE 'BT001';
	EXCEPTION WHEN SQLSTATE 'BT001' THEN
		NULL;
	END;
	h := pg_snapshot_xmax(pg_current_snapshot());
	INSERT INTO events (seq, run_id, ts, type, from_status, to_status,
			    data, horizon)
	VALUES (s, p_run_id, p_ts, p_type, p_from, p_to, p_data, h);
	PERFORM pg_notify('baton_events', '');
	RETURN s;
END
$$;

-- ord stands in for SQLite's rowid: the order the outputs were written
-- in, which output_list follows.
CREATE TABLE stage_outputs (
	ord        BIGINT  GENERATED ALWAYS AS IDENTITY UNIQUE,
	run_id     TEXT    NOT NULL REFERENCES runs (id),
	stage      TEXT    NOT NULL,
	artifact   TEXT    NOT NULL,
	version    BIGINT  NOT NULL,
	decision   TEXT,
	content    TEXT,
	created_at BIGINT  NOT NULL,
	PRIMARY KEY (run_id, stage, artifact, version)
);
