-- 011: chat intake (issue 23, docs/chat.md): conversations that turn
-- what a person wants into tasks, and their messages, kept so that a
-- conversation survives restarts of serve and of `baton chat`.
--
-- phase is one of greeting, requirement_gathering, plan_proposal,
-- execution, monitoring; mode (direct, local, github) is set once, by
-- the start of execution, whose UPDATE ... WHERE phase =
-- 'plan_proposal' lets one start win. plan is the proposed plan as
-- plan.json text; tasks the queued tasks' ids and the status last
-- reported of each, as a JSON object {"7": "queued", ...}.
CREATE TABLE chat_conversations (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	phase       TEXT    NOT NULL,
	mode        TEXT,
	plan        TEXT,
	tasks       TEXT,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL
);

-- role: user, assistant or system; kind: text, mode_selection,
-- progress, error.
CREATE TABLE chat_messages (
	id               INTEGER PRIMARY KEY AUTOINCREMENT,
	conversation_id  INTEGER NOT NULL REFERENCES chat_conversations(id),
	role             TEXT    NOT NULL,
	kind             TEXT    NOT NULL,
	content          TEXT    NOT NULL,
	created_at       INTEGER NOT NULL
);
CREATE INDEX chat_messages_conv ON chat_messages(conversation_id, id);
