-- 011: chat intake (issue 23, sql/011-chat.sql): the same tables,
-- columns and index.
CREATE TABLE chat_conversations (
	id          BIGSERIAL PRIMARY KEY,
	phase       TEXT    NOT NULL,
	mode        TEXT,
	plan        TEXT,
	tasks       TEXT,
	created_at  BIGINT  NOT NULL,
	updated_at  BIGINT  NOT NULL
);

CREATE TABLE chat_messages (
	id               BIGSERIAL PRIMARY KEY,
	conversation_id  BIGINT  NOT NULL REFERENCES chat_conversations(id),
	role             TEXT    NOT NULL,
	kind             TEXT    NOT NULL,
	content          TEXT    NOT NULL,
	created_at       BIGINT  NOT NULL
);
CREATE INDEX chat_messages_conv ON chat_messages(conversation_id, id);
