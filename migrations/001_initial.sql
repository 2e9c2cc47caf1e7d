-- acp-relay schema, version 1. A public interface: documented in README.md ("Database").
-- Raw bytes are the truth; every index column can be recomputed from frames.raw.

CREATE TABLE connections (
    id                INTEGER PRIMARY KEY,
    started_at        REAL NOT NULL,          -- unix seconds (wall clock)
    ended_at          REAL,
    argv              TEXT NOT NULL,          -- JSON array: the agent command
    cwd               TEXT,
    relay_pid         INTEGER,
    recorder_pid      INTEGER,                -- the relay's database writer (a child process)
    recorder_rss_kb   INTEGER,                -- the writer's peak resident memory
    agent_pid         INTEGER,
    label             TEXT,
    status            TEXT NOT NULL DEFAULT 'running',  -- running | ended | spawn_failed | interrupted
    exit_code         INTEGER,                -- the relay's own exit status (128+N for signal N)
    exit_signal       INTEGER,                -- the signal that killed the agent, if any
    closed_by         TEXT,                   -- editor_eof | agent_exit | signal:NAME | spawn_failed
    error             TEXT,                   -- why the agent could not be started, etc.
    protocol_version  INTEGER,                -- as negotiated by initialize (the agent's answer)
    client_info       TEXT,                   -- JSON: initialize params clientInfo (v1) / info (v2)
    agent_info        TEXT,                   -- JSON: initialize result agentInfo (v1) / info (v2)
    frames            INTEGER NOT NULL DEFAULT 0,  -- frames recorded
    frames_unrecorded INTEGER NOT NULL DEFAULT 0,  -- frames forwarded but not recorded (database trouble)
    bytes_c2a         INTEGER NOT NULL DEFAULT 0,
    bytes_a2c         INTEGER NOT NULL DEFAULT 0,
    bytes_stderr      INTEGER NOT NULL DEFAULT 0,
    unanswered        TEXT,                   -- JSON: requests still pending at close, per direction
    stderr_tail       TEXT,                   -- the last lines of agent stderr
    redaction         TEXT                    -- JSON: the redaction policy the stored copy was made with
);

CREATE TABLE sessions (
    id                INTEGER PRIMARY KEY,
    session_id        TEXT NOT NULL,          -- the ACP sessionId
    connection_id     INTEGER NOT NULL REFERENCES connections(id),
    origin            TEXT,                   -- session/new | session/load | session/resume | session/fork | subagent | seen
    first_seen        REAL NOT NULL,
    last_seen         REAL NOT NULL,
    cwd               TEXT,
    title             TEXT,                   -- from session_info_update
    parent_session_id TEXT,                   -- fork source or subagent parent
    UNIQUE (connection_id, session_id)
);

CREATE TABLE frames (
    id                   INTEGER PRIMARY KEY,     -- global frame number (show --frame N)
    connection_id        INTEGER NOT NULL REFERENCES connections(id),
    seq                  INTEGER NOT NULL,        -- order within the connection, both directions
    direction            TEXT NOT NULL,           -- c2a (editor -> agent) | a2c (agent -> editor)
    ts                   REAL NOT NULL,           -- unix seconds when the line's last byte was read
    mono                 REAL NOT NULL,           -- monotonic seconds since the connection started
    length               INTEGER NOT NULL,        -- byte length, without the \n delimiter
    parse                TEXT NOT NULL,           -- ok | blank | cr | invalid_utf8 | invalid_json | not_jsonrpc
    kind                 TEXT NOT NULL,           -- request | notification | response | error | batch | invalid
    method               TEXT,                    -- for a response: the method of its request
    rpc_id,                                       -- JSON-RPC id, typed (no affinity): 1 and '1' differ
    session_id           TEXT,
    update_kind          TEXT,                    -- session/update: update.sessionUpdate
    -- The sparse index fields, as one JSON object (binding a dozen mostly-NULL columns per frame was the
    -- recorder's largest cost); the generated columns below expose each one by name.
    details              TEXT,
    -- Last stored column, so that a big frame can be written as zeroblob(n) then streamed in with
    -- incremental blob I/O, without SQLite ever holding a copy of it.
    raw                  BLOB NOT NULL,           -- exact bytes, without the \n delimiter
    unterminated         INTEGER NOT NULL GENERATED ALWAYS AS (coalesce(json_extract(details, '$.unterminated'), 0)) VIRTUAL,
    redacted             INTEGER NOT NULL GENERATED ALWAYS AS (coalesce(json_extract(details, '$.redacted'), 0)) VIRTUAL,
    message_id           TEXT    GENERATED ALWAYS AS (json_extract(details, '$.messageId')) VIRTUAL,
    tool_call_id         TEXT    GENERATED ALWAYS AS (json_extract(details, '$.toolCallId')) VIRTUAL,
    terminal_id          TEXT    GENERATED ALWAYS AS (json_extract(details, '$.terminalId')) VIRTUAL,
    plan_id              TEXT    GENERATED ALWAYS AS (json_extract(details, '$.planId')) VIRTUAL,
    compaction_id        TEXT    GENERATED ALWAYS AS (json_extract(details, '$.compactionId')) VIRTUAL,
    sender_session_id    TEXT    GENERATED ALWAYS AS (json_extract(details, '$.senderSessionId')) VIRTUAL,
    recipient_session_id TEXT    GENERATED ALWAYS AS (json_extract(details, '$.recipientSessionId')) VIRTUAL,
    child_session_id     TEXT    GENERATED ALWAYS AS (json_extract(details, '$.childSessionId')) VIRTUAL,
    request_seq          INTEGER GENERATED ALWAYS AS (json_extract(details, '$.requestSeq')) VIRTUAL,
    latency_ms           REAL    GENERATED ALWAYS AS (json_extract(details, '$.latencyMs')) VIRTUAL,
    error_code           INTEGER GENERATED ALWAYS AS (json_extract(details, '$.errorCode')) VIRTUAL,
    UNIQUE (connection_id, seq)
);
CREATE INDEX frames_session ON frames (session_id, id);
CREATE INDEX frames_method ON frames (method);

-- One row per member of a batch frame (v2 JSON-RPC batch arrays). Single-message frames are indexed in
-- frames itself; the messages view below unites both.
CREATE TABLE batch_messages (
    frame_id             INTEGER NOT NULL REFERENCES frames(id),
    idx                  INTEGER NOT NULL,
    kind                 TEXT NOT NULL,
    method               TEXT,
    rpc_id,
    session_id           TEXT,
    update_kind          TEXT,
    details              TEXT,
    message_id           TEXT    GENERATED ALWAYS AS (json_extract(details, '$.messageId')) VIRTUAL,
    tool_call_id         TEXT    GENERATED ALWAYS AS (json_extract(details, '$.toolCallId')) VIRTUAL,
    terminal_id          TEXT    GENERATED ALWAYS AS (json_extract(details, '$.terminalId')) VIRTUAL,
    plan_id              TEXT    GENERATED ALWAYS AS (json_extract(details, '$.planId')) VIRTUAL,
    compaction_id        TEXT    GENERATED ALWAYS AS (json_extract(details, '$.compactionId')) VIRTUAL,
    sender_session_id    TEXT    GENERATED ALWAYS AS (json_extract(details, '$.senderSessionId')) VIRTUAL,
    recipient_session_id TEXT    GENERATED ALWAYS AS (json_extract(details, '$.recipientSessionId')) VIRTUAL,
    child_session_id     TEXT    GENERATED ALWAYS AS (json_extract(details, '$.childSessionId')) VIRTUAL,
    request_seq          INTEGER GENERATED ALWAYS AS (json_extract(details, '$.requestSeq')) VIRTUAL,
    latency_ms           REAL    GENERATED ALWAYS AS (json_extract(details, '$.latencyMs')) VIRTUAL,
    error_code           INTEGER GENERATED ALWAYS AS (json_extract(details, '$.errorCode')) VIRTUAL,
    PRIMARY KEY (frame_id, idx)
);
CREATE INDEX batch_messages_session ON batch_messages (session_id);

CREATE TABLE stderr (
    id            INTEGER PRIMARY KEY,
    connection_id INTEGER NOT NULL REFERENCES connections(id),
    ts            REAL NOT NULL,
    mono          REAL NOT NULL,
    raw           BLOB NOT NULL,                  -- one line of agent stderr, without \n
    unterminated  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX stderr_connection ON stderr (connection_id, id);

-- Every JSON-RPC message, whether alone on its line or inside a batch.
CREATE VIEW messages AS
    SELECT f.id AS frame_id, 0 AS idx, f.connection_id, f.seq, f.direction, f.ts, f.kind, f.method, f.rpc_id,
           f.session_id, f.update_kind, f.message_id, f.tool_call_id, f.terminal_id, f.plan_id, f.compaction_id,
           f.sender_session_id, f.recipient_session_id, f.child_session_id, f.request_seq, f.latency_ms,
           f.error_code
    FROM frames f WHERE f.kind != 'batch'
    UNION ALL
    SELECT f.id, b.idx, f.connection_id, f.seq, f.direction, f.ts, b.kind, b.method, b.rpc_id,
           b.session_id, b.update_kind, b.message_id, b.tool_call_id, b.terminal_id, b.plan_id, b.compaction_id,
           b.sender_session_id, b.recipient_session_id, b.child_session_id, b.request_seq, b.latency_ms,
           b.error_code
    FROM batch_messages b JOIN frames f ON f.id = b.frame_id;
