-- 013: named API tokens (issue 24 part 5, docs/security.md "Users and
-- roles"): who may use serve's API and with which role. The secret is
-- never stored: secret_sha256 is the SHA-256 of it (64 hex digits), and
-- the secret has 256 random bits, so the hash alone opens nothing.
--
-- role is viewer, operator or admin; revoked_at and last_used_at are 0
-- until the token is revoked or first used (last use is written at most
-- once a minute per token).
CREATE TABLE api_tokens (
	name            TEXT    PRIMARY KEY,
	role            TEXT    NOT NULL,
	secret_sha256   TEXT    NOT NULL UNIQUE,
	created_at      INTEGER NOT NULL,
	last_used_at    INTEGER NOT NULL DEFAULT 0,
	revoked_at      INTEGER NOT NULL DEFAULT 0
);
