-- 010: idempotency keys of task submissions (issue 23, sql/010-idempotency.sql):
-- the same table, columns and key.
CREATE TABLE idempotency_keys (
	idem_key        TEXT    PRIMARY KEY,
	payload_sha256  TEXT    NOT NULL,
	task_id         BIGINT,
	created_at      BIGINT  NOT NULL
);
