-- 017: a claim and its COMMIT in one message on PostgreSQL (issue 21,
-- pg/017-claim-notify.sql: the claim tells the NOTIFY after its COMMIT
-- whether it took a task). Nothing changes on SQLite: its notifications
-- are written in the claim's own transaction.
SELECT 1;
