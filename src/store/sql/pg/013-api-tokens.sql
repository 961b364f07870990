-- 013: named API tokens (issue 24 part 5, sql/013-api-tokens.sql): the
-- same table, columns and keys.
CREATE TABLE api_tokens (
	name            TEXT    PRIMARY KEY,
	role            TEXT    NOT NULL,
	secret_sha256   TEXT    NOT NULL UNIQUE,
	created_at      BIGINT  NOT NULL,
	last_used_at    BIGINT  NOT NULL DEFAULT 0,
	revoked_at      BIGINT  NOT NULL DEFAULT 0
);
