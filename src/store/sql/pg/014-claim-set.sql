-- 014: a batch of claims taken as a set (issue 21).
--
-- baton_task_claim_batch of 009 called baton_task_claim once a task:
-- a pick, an UPDATE, a dependency list and an event, each a statement
-- with its own executor start, and a subtransaction an event. Most of a
-- host's round went there (about 100 us of the server's CPU a task).
-- Now the claimable tasks without an area that come first in claim
-- order are taken together: one pick, one UPDATE, one event append. A
-- task with an area still goes through baton_task_claim, one at a time
-- under the area lock, where the order reaches it, so the batch takes
-- exactly the tasks, in exactly the order, that one claim after another
-- would (a task without an area overlaps nothing, so taking it never
-- depends on what else the batch took).

-- baton_event_add of 007 for many events at once: p_* are parallel
-- arrays, one element an event; returns the events' seqs in the arrays'
-- order, increasing. One horizon serves them all: it is taken after
-- every seq was drawn (the ordering rule of 001), so the subtransaction
-- that makes it (about 20 us of the server's time) is paid once a batch,
-- not once an event. A task's run is found as baton_event_add finds it.
CREATE FUNCTION baton_events_add(p_run_ids TEXT[], p_task_ids BIGINT[],
				 p_ts BIGINT[], p_types TEXT[],
				 p_froms TEXT[], p_tos TEXT[],
				 p_datas TEXT[])
RETURNS BIGINT[] LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_seqs BIGINT[];
	h xid8;
BEGIN
	PERFORM pg_current_xact_id();
	v_seqs := ARRAY(SELECT nextval('events_seq')
			FROM generate_series(1, cardinality(p_types)));
	BEGIN
		INSERT INTO event_clock VALUES (1);
		RAISE SQLSTATE 'BT001';
	EXCEPTION WHEN SQLSTATE 'BT001' THEN
		NULL;
	END;
	h := pg_snapshot_xmax(pg_current_snapshot());
	INSERT INTO events (seq, run_id, task_id, ts, type, from_status,
			    to_status, data, horizon)
	SELECT e.seq, e.run_id, COALESCE(e.task_id,
		(SELECT NULLIF(r.task_id, 0) FROM runs AS r
		  WHERE r.id = e.run_id)),
	       e.ts, e.type, e.from_status, e.to_status, e.data, h
	  FROM unnest(v_seqs, p_run_ids, p_task_ids, p_ts, p_types, p_froms,
		      p_tos, p_datas)
	    AS e(seq, run_id, task_id, ts, type, from_status, to_status,
		 data);
	RETURN v_seqs;
END
$$;

-- Up to p_max claims, as 009's; the rows come back in claim order, each
-- with its own token (increasing in that order) and its task_claimed
-- event. The set's pick is baton_task_claim's pick (CLAIM_PLAN's SET
-- clauses, the skip list) with a LIMIT; the tasks it locked but did not
-- take (from the first with an area on) stay locked to the commit and
-- are reached again by the next pick, which sees this transaction's own
-- locks as no obstacle. jit is off: enable_sort = off prices a sort at
-- 10^10, which is far past jit_above_cost, and a statement with an
-- ORDER BY was compiled by LLVM at every call (about 200 ms, against
-- well under one to run it).
CREATE OR REPLACE FUNCTION baton_task_claim_batch(p_now BIGINT,
						  p_holder TEXT,
						  p_worker TEXT,
						  p_expires BIGINT,
						  p_max INTEGER,
						  OUT claim_task tasks,
						  OUT claim_deps TEXT,
						  OUT claim_xid xid8,
						  OUT claim_seq BIGINT)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE
SET enable_sort = off SET enable_bitmapscan = off
SET plan_cache_mode = force_generic_plan SET jit = off AS $$
DECLARE
	v_skip BIGINT[] := '{}';
	v_got INTEGER := 0;
	v_ids BIGINT[];
	v_areas TEXT[];
	v_take BIGINT[];
	v_toks BIGINT[];
	v_seqs BIGINT[];
	v_k INTEGER;
	v_claim RECORD;
BEGIN
	WHILE v_got < p_max AND cardinality(v_skip) < 16 LOOP
		SELECT array_agg(s.id ORDER BY s.priority DESC, s.id),
		       array_agg(s.area ORDER BY s.priority DESC, s.id)
		  INTO v_ids, v_areas
		  FROM (SELECT q.id, q.area, q.priority FROM tasks AS q
			 WHERE q.status = 'queued' AND q.not_before <= p_now
			 AND q.id <> ALL (v_skip)
			 AND NOT EXISTS (SELECT 1 FROM task_deps AS d
			  JOIN tasks AS p ON p.id = d.depends_on
			  WHERE d.task_id = q.id AND p.status <> 'done')
			 AND (q.area IS NULL OR NOT EXISTS (SELECT 1
			  FROM tasks AS r WHERE r.status = 'running'
			  AND (r.area = q.area
			   OR starts_with(r.area, q.area || '/')
			   OR starts_with(q.area, r.area || '/'))))
			 ORDER BY q.priority DESC, q.id LIMIT p_max - v_got
			 FOR NO KEY UPDATE OF q SKIP LOCKED) AS s;
		IF v_ids IS NULL THEN
			RETURN;
		END IF;
		v_k := 0;
		WHILE v_k < cardinality(v_ids) AND v_areas[v_k + 1] IS NULL
		LOOP
			v_k := v_k + 1;
		END LOOP;
		IF v_k = 0 THEN
			-- the first has an area: one claim, under the lock
			SELECT * INTO v_claim FROM baton_task_claim(p_now,
				p_holder, p_worker, p_expires, v_skip);
			IF NOT FOUND THEN
				RETURN;
			END IF;
			IF v_claim.claim_overlap IS NOT NULL THEN
				v_skip := v_skip || v_claim.claim_overlap;
				CONTINUE;
			END IF;
			claim_task := v_claim.claim_task;
			claim_deps := v_claim.claim_deps;
			claim_xid := v_claim.claim_xid;
			claim_seq := v_claim.claim_seq;
			v_got := v_got + 1;
			RETURN NEXT;
			CONTINUE;
		END IF;
		v_take := v_ids[1:v_k];
		v_toks := ARRAY(SELECT nextval('lease_tokens')
				FROM generate_series(1, v_k));
		UPDATE tasks AS t SET status = 'running',
		 attempts = t.attempts + 1, started_at = p_now,
		 lease_holder = p_holder,
		 lease_token = v_toks[array_position(v_take, t.id)],
		 lease_expires_at = p_expires, version = t.version + 1,
		 updated_at = p_now
		 WHERE t.id = ANY (v_take);
		v_seqs := baton_events_add(
			array_fill(NULL::TEXT, ARRAY[v_k]), v_take,
			array_fill(p_now, ARRAY[v_k]),
			array_fill('task_claimed'::TEXT, ARRAY[v_k]),
			array_fill(NULL::TEXT, ARRAY[v_k]),
			array_fill(NULL::TEXT, ARRAY[v_k]),
			ARRAY(SELECT '{"worker":' || p_worker || ',"token":'
				|| t.lease_token || ',"attempt":'
				|| t.attempts || '}'
			      FROM unnest(v_take) WITH ORDINALITY
				AS x(id, ord)
			      JOIN tasks AS t ON t.id = x.id
			     ORDER BY x.ord));
		RETURN QUERY SELECT t, (SELECT string_agg(d.depends_on::text,
			',' ORDER BY d.depends_on) FROM task_deps AS d
			WHERE d.task_id = t.id), pg_current_xact_id(), x.seq
		  FROM unnest(v_take, v_seqs) WITH ORDINALITY
		    AS x(id, seq, ord)
		  JOIN tasks AS t ON t.id = x.id
		 ORDER BY x.ord;
		v_got := v_got + v_k;
	END LOOP;
END
$$;
