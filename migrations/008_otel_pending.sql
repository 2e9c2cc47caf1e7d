-- acp-relay schema, version 8: spans `acp-relay run --otlp` could not send.
-- One row per span the collector did not take (down, refusing, too slow); `acp-relay otel export --pending`
-- rebuilds each listed session's spans (their ids are derived from the recording, so they come out the
-- same), sends only the listed ones, and deletes their rows once the collector has them: what was sent live
-- is never sent twice. No REFERENCES: prune deletes connections without knowing this table, and --pending
-- drops the rows of a session that is gone.
CREATE TABLE otel_pending (
    id            INTEGER PRIMARY KEY,
    connection_id INTEGER NOT NULL,
    session_id    TEXT NOT NULL,
    span_id       TEXT NOT NULL,          -- 16 hex digits
    name          TEXT,                   -- the span's name, for people reading the table
    reason        TEXT,                   -- why it was not sent
    created_at    REAL NOT NULL,
    UNIQUE (connection_id, session_id, span_id)
);
