-- 015: events_run_seq holds only the events of a run, as on PostgreSQL
-- (pg/015-event-index.sql): the queue's events have none, and every
-- read by run asks for run_id = ?, which implies the index's condition.
DROP INDEX events_run_seq;
CREATE INDEX events_run_seq ON events (run_id, seq) WHERE run_id IS NOT NULL;
