-- 008: the claim in one statement (issue 21).
--
-- baton_task_claim is claim_in_tx of postgres_queue.c on the server, so
-- that a claim is one round trip (sent with its BEGIN) and a COMMIT,
-- not five: pick and lock the first claimable task (FOR NO KEY UPDATE
-- SKIP LOCKED), recheck its area under the area lock, take it with a
-- fresh token and append its task_claimed event. See the top of
-- postgres_queue.c for why each step is safe; the function keeps every
-- step as it was:
--
-- - the area recheck is a statement of its own after the lock: in a
--   VOLATILE function under READ COMMITTED each statement takes a new
--   snapshot, so it sees every claim committed by an earlier holder;
-- - a pick whose area is taken returns claim_overlap (its id) and writes
--   nothing; the caller rolls back and claims again without it;
-- - nothing found returns no row and writes nothing (no xid is drawn);
-- - the event goes through baton_event_add (the ordering rule of 001):
--   the row lock of the pick drew the xid before the event's seq.
--
-- The SET clauses are CLAIM_PLAN's: with sorts and bitmap scans priced
-- out the pick walks tasks_queued (007) in the claim's order whatever
-- the statistics say. p_worker is the holder as a JSON string (the C
-- side encodes it as store__claim_data does). 108170700680706 is
-- AREA_LOCK_KEY of postgres_queue.c.
CREATE FUNCTION baton_task_claim(p_now BIGINT, p_holder TEXT,
				 p_worker TEXT, p_expires BIGINT,
				 p_skip BIGINT[],
				 OUT claim_task tasks,
				 OUT claim_deps TEXT,
				 OUT claim_xid xid8,
				 OUT claim_seq BIGINT,
				 OUT claim_overlap BIGINT)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE
SET enable_sort = off SET enable_bitmapscan = off AS $$
DECLARE
	v_id BIGINT;
	v_area TEXT;
BEGIN
	SELECT q.id, q.area INTO v_id, v_area FROM tasks AS q
	 WHERE q.status = 'queued' AND q.not_before <= p_now
	 AND q.id <> ALL (p_skip)
	 AND NOT EXISTS (SELECT 1 FROM task_deps AS d
	  JOIN tasks AS p ON p.id = d.depends_on
	  WHERE d.task_id = q.id AND p.status <> 'done')
	 AND (q.area IS NULL OR NOT EXISTS (SELECT 1 FROM tasks AS r
	  WHERE r.status = 'running' AND (r.area = q.area
	   OR starts_with(r.area, q.area || '/')
	   OR starts_with(q.area, r.area || '/'))))
	 ORDER BY q.priority DESC, q.id LIMIT 1
	 FOR NO KEY UPDATE OF q SKIP LOCKED;
	IF NOT FOUND THEN
		RETURN;
	END IF;
	IF v_area IS NOT NULL THEN
		PERFORM pg_advisory_xact_lock(108170700680706);
		PERFORM 1 FROM tasks AS r WHERE r.status = 'running'
		 AND (r.area = v_area OR starts_with(r.area, v_area || '/')
		  OR starts_with(v_area, r.area || '/'))
		 LIMIT 1;
		IF FOUND THEN
			claim_overlap := v_id;
			RETURN NEXT;
			RETURN;
		END IF;
	END IF;
	UPDATE tasks SET status = 'running', attempts = attempts + 1,
	 started_at = p_now, lease_holder = p_holder,
	 lease_token = nextval('lease_tokens'), lease_expires_at = p_expires,
	 version = version + 1, updated_at = p_now
	 WHERE id = v_id RETURNING tasks.* INTO claim_task;
	IF NOT FOUND THEN
		RAISE EXCEPTION 'task % vanished', v_id;
	END IF;
	SELECT string_agg(d.depends_on::text, ',' ORDER BY d.depends_on)
	 INTO claim_deps FROM task_deps AS d WHERE d.task_id = v_id;
	claim_xid := pg_current_xact_id();
	claim_seq := baton_event_add(NULL, v_id, p_now, 'task_claimed', NULL,
		NULL, '{"worker":' || p_worker || ',"token":'
		|| claim_task.lease_token || ',"attempt":'
		|| claim_task.attempts || '}');
	RETURN NEXT;
END
$$;
