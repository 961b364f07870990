-- 016: a write and its COMMIT in one message on PostgreSQL (issue 21,
-- pg/016-one-message.sql: the checks of a fence and of a lost row made
-- on the server, so that they can abort the transaction before the
-- COMMIT that follows them). Nothing changes on SQLite: its checks run
-- in the process, between the statements of one transaction.
SELECT 1;
