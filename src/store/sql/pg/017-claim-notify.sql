-- 017: a claim and its COMMIT in one message (issue 21).
--
-- A claim was two round trips: BEGIN and the claim, then the COMMIT
-- with the NOTIFY of its event after it (pg__commit). Now the COMMIT
-- goes in the claim's message (claim_try in postgres_queue.c), and so
-- does the NOTIFY, which must still follow only a claim that took a
-- task: an empty claim that notified would draw an xid (every NOTIFY
-- takes one) and wake every listener for nothing. The message is sent
-- before the client knows, so the server tells the NOTIFY: the claim
-- sets baton.claimed, a setting of the session, which outlives the
-- COMMIT (set_config with is_local false; a rollback undoes it), and
-- the NOTIFY after the COMMIT (CLAIM_NOTIFY_SQL) fires only when it
-- reads 'y'. Every call resets it first. baton_task_claim is 008's
-- with those two lines (assignments, which PL/pgSQL evaluates without
-- starting an executor as PERFORM does), and its settings of 008 and
-- 009 restated (a CREATE OR REPLACE drops what it does not name).
CREATE OR REPLACE FUNCTION baton_task_claim(p_now BIGINT, p_holder TEXT,
				 p_worker TEXT, p_expires BIGINT,
				 p_skip BIGINT[],
				 OUT claim_task tasks,
				 OUT claim_deps TEXT,
				 OUT claim_xid xid8,
				 OUT claim_seq BIGINT,
				 OUT claim_overlap BIGINT)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE
SET enable_sort = off SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan AS $$
DECLARE
	v_id BIGINT;
	v_area TEXT;
	v_set TEXT;
BEGIN
	v_set := set_config('baton.claimed', '', false);
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
	v_set := set_config('baton.claimed', 'y', false);
	RETURN NEXT;
END
$$;
