-- 008: the claim in one statement on PostgreSQL (issue 21,
-- pg/008-claim.sql: a server-side function, so that a claim is one
-- round trip and a commit). Nothing changes on SQLite: the database is
-- in the process, a statement costs no round trip.
SELECT 1;
