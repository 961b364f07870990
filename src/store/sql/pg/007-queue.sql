-- 007: the queue without serialised commits (issue 21).
--
-- baton_event_add of 003 without its pg_notify: a NOTIFY inside a
-- transaction makes PostgreSQL hold one cluster-wide lock from the
-- transaction's pre-commit until its commit record is flushed, so every
-- writer of an event committed alone, with an fsync of its own. The
-- notification is now sent by the writer after its COMMIT (pg__commit
-- in postgres.c). The ordering rule is the one of 001 (see there).
CREATE OR REPLACE FUNCTION baton_event_add(p_run_id TEXT, p_task_id BIGINT,
				p_ts BIGINT, p_type TEXT, p_from TEXT,
				p_to TEXT, p_data TEXT)
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
	INSERT INTO events (seq, run_id, task_id, ts, type, from_status,
			    to_status, data, horizon)
	VALUES (s, p_run_id, COALESCE(p_task_id,
		(SELECT NULLIF(task_id, 0) FROM runs WHERE id = p_run_id)),
		p_ts, p_type, p_from, p_to, p_data, h);
	RETURN s;
END
$$;

-- The claimable rows in the claim's order: the claim walks this index
-- and stops at the first row it can lock, whatever the statistics say
-- (CLAIM_PLAN in postgres_queue.c).
CREATE INDEX tasks_queued ON tasks (priority DESC, id)
	WHERE status = 'queued';
