-- 006: the queue's claim index (issue 21), as on PostgreSQL
-- (pg/006-queue.sql, which also drops the NOTIFY from baton_event_add):
-- the claimable rows in the claim's order.
CREATE INDEX tasks_queued ON tasks (priority DESC, id)
	WHERE status = 'queued';
