-- 014: a batch of claims taken as a set on PostgreSQL (issue 21,
-- pg/014-claim-set.sql: the claimable tasks without an area that come
-- first are taken in one statement, not one at a time). Nothing changes
-- on SQLite: its batch is a loop of claims in one transaction, each a
-- statement in the process.
SELECT 1;
