-- 010: idempotency keys of task submissions (issue 23, docs/api.md
-- "Idempotency"): a key names one task for good, whichever host or
-- process took the submission, and survives restarts. The primary key
-- decides a race: the second INSERT of a key inserts nothing.
--
-- task_id is NULL between the claim of the key and the insert of its
-- task (one request's handler); payload_sha256 is the SHA-256 of the
-- submission (its JSON with sorted keys, the key itself left out), so a
-- key reused for another payload is told apart from a retry.
CREATE TABLE idempotency_keys (
	idem_key        TEXT    PRIMARY KEY,
	payload_sha256  TEXT    NOT NULL,
	task_id         INTEGER,
	created_at      INTEGER NOT NULL
);
