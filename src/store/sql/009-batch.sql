-- 009: the batched claim on PostgreSQL (issue 21, pg/009-batch.sql: a
-- server-side loop, so that a batch of claims is one round trip and a
-- commit). Nothing changes on SQLite: its batch is a loop of claims in
-- one transaction.
SELECT 1;
