-- 016: a write and its COMMIT in one message (issue 21).
--
-- A task's guarded update was two round trips: BEGIN, the fencing read
-- and the update in one message; then, once the client had checked the
-- fence and seen the row change, the COMMIT. Now the COMMIT goes in the
-- same message (pg__exec_commit in postgres.c), so both checks are made
-- by the server, where a failed one raises and so aborts the
-- transaction: the server skips the rest of the message, the COMMIT
-- with it.
--
-- baton_check(ok, state, detail) raises SQLSTATE state unless ok is
-- true, and returns true. The states are baton's own (class BT):
--
-- - BT002: the fence is stale; detail is the task's lease token, or -1
--   when the task is gone (check_fence in postgres.c says which);
-- - BT003: a guarded update found no row to change (the row is gone,
--   changed, or in a status the update may not leave; the client asks
--   which after the rollback).
--
-- BT001 is baton_event_add's (001). VOLATILE, so that the planner never
-- runs it early on constants.
CREATE FUNCTION baton_check(p_ok BOOLEAN, p_state TEXT, p_detail TEXT)
RETURNS BOOLEAN LANGUAGE plpgsql VOLATILE AS $$
BEGIN
	IF p_ok IS NOT TRUE THEN
		RAISE EXCEPTION USING ERRCODE = p_state,
			MESSAGE = 'baton check ' || p_state || ' failed',
			DETAIL = COALESCE(p_detail, '');
	END IF;
	RETURN true;
END
$$;
