-- acp-relay schema, version 2: indexes for `acp-relay show` and `acp-relay stats`.
-- Read-time indexes only (no triggers, no summary tables): the relay's write path stays one row per frame
-- plus one entry per index.

-- A session's frames within one connection, in recorded order, carrying kind and method so the session
-- listing counts frames, turns, errors and unanswered requests from the index alone (raw stays untouched).
-- `session_id IS NULL AND connection_id = ?` also finds a connection's initialize exchange and invalid lines.
CREATE INDEX frames_session_connection ON frames (session_id, connection_id, id, kind, method);

-- A request's response (show --frame N, stats): responses only, so the relay pays for it on responses alone.
CREATE INDEX frames_request_seq ON frames (connection_id, request_seq) WHERE request_seq IS NOT NULL;

-- Session listing newest first, `show last`, and session id prefixes.
CREATE INDEX sessions_first_seen ON sessions (first_seen);
CREATE INDEX sessions_session_id ON sessions (session_id);
