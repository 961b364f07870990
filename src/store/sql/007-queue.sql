-- 007: the queue on PostgreSQL (issue 21, pg/007-queue.sql): its event
-- function loses its NOTIFY and its claim gets an index of the queued
-- rows. Nothing changes on SQLite: one writer at a time, notifications
-- through inotify, and a claim that already walks tasks_claim in order
-- (t_queue's claim_uses_index); an index more would only slow writes.
SELECT 1;
