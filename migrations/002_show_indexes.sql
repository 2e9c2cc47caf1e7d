-- acp-relay schema, version 2: indexes for `acp-relay show` and `acp-relay stats`.
-- Read-time indexes only (no triggers, no summary tables), and no more indexes on frames than before:
-- the relay's write path stays one row per frame plus one entry per index.

-- A session's frames within one connection, in recorded order, carrying kind and method so the session
-- listing counts frames, turns, errors and unanswered requests from the index alone (raw stays untouched).
-- `session_id IS NULL AND connection_id = ?` also finds a connection's initialize exchange and invalid lines.
CREATE INDEX frames_session_connection ON frames (session_id, connection_id, id, kind, method);

-- It replaces frames_session (session_id, id): every `session_id = ?` lookup can use the new index, and
-- each index on frames costs the relay's writer on every frame.
DROP INDEX frames_session;

-- Session listing newest first, `show last`, and session id prefixes (sessions change rarely).
CREATE INDEX sessions_first_seen ON sessions (first_seen);
CREATE INDEX sessions_session_id ON sessions (session_id);
