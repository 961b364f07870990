-- 015: events_run_seq holds only the events of a run (issue 21).
--
-- The events of the queue (task_added, task_claimed, task_settled and
-- the rest) have no run: each of them put a (NULL, seq) entry in
-- events_run_seq that no reader looks for, since every read by run asks
-- for run_id = $n, which only a row with a run can match, and the
-- planner proves that such a condition implies the index's. A claim and
-- a settle write two such events a task.
DROP INDEX events_run_seq;
CREATE INDEX events_run_seq ON events (run_id, seq) WHERE run_id IS NOT NULL;
