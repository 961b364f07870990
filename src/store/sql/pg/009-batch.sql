-- 009: up to p_max claims in one statement (issue 21,
-- store_task_claim_batch), and the claim's statements planned once.
--
-- PL/pgSQL plans each statement of a function with its parameters'
-- values (a custom plan) for its first five runs in a session and keeps
-- doing so while the generic plan looks dearer, which for the pick (a
-- LIMIT over an index walk with unknown values) it always does: every
-- claim planned its pick afresh, about 1 ms of the server's CPU, three
-- times what running it costs. The pick's plan does not depend on the
-- values (CLAIM_PLAN: the walk of tasks_queued), so the generic plan is
-- the right one, made once per session.
ALTER FUNCTION baton_task_claim(BIGINT, TEXT, TEXT, BIGINT, BIGINT[])
	SET plan_cache_mode = force_generic_plan;

-- baton_task_claim_batch calls baton_task_claim (008) until it has
-- p_max tasks or finds none, in the caller's one transaction, so each
-- claim keeps every rule of one at a time:
--
-- - each call is its own statement with its own snapshot, which sees
--   the claims this loop made (its own writes) and every claim committed
--   by an earlier holder of the area lock, so no two claims of a batch,
--   and no claim of a batch and one elsewhere, overlap in area;
-- - a pick whose area is taken goes into the skip list and the loop
--   goes on; its row stays locked until the commit, which only makes
--   concurrent claims pass over it (SKIP LOCKED) for that long;
-- - each claim draws its own token and appends its own task_claimed
--   event (one xid for the batch: the first row lock drew it).
--
-- Rows come back in claim order, the overlap column dropped. It passes
-- over at most 16 taken areas, as pg__task_claim does (CLAIM_MAX_SKIPS).
CREATE FUNCTION baton_task_claim_batch(p_now BIGINT, p_holder TEXT,
				       p_worker TEXT, p_expires BIGINT,
				       p_max INTEGER,
				       OUT claim_task tasks,
				       OUT claim_deps TEXT,
				       OUT claim_xid xid8,
				       OUT claim_seq BIGINT)
RETURNS SETOF record LANGUAGE plpgsql VOLATILE AS $$
DECLARE
	v_skip BIGINT[] := '{}';
	v_got INTEGER := 0;
	v_claim RECORD;
BEGIN
	WHILE v_got < p_max AND cardinality(v_skip) < 16 LOOP
		SELECT * INTO v_claim FROM baton_task_claim(p_now, p_holder,
			p_worker, p_expires, v_skip);
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
	END LOOP;
END
$$;
