-- acp-relay schema, version 7: recordings of remote ACP (WebSocket and Streamable HTTP), beside stdio.
-- Frames from every transport land in frames as before (each JSON-RPC message's exact bytes: the
-- WebSocket text frame or the SSE data payload, one line each); what the transport itself did is kept
-- beside them, in its own table, so every command that reads frames works on a remote recording unchanged.

-- How the agent was reached: stdio (a child process), ws (WebSocket) or http (Streamable HTTP).
ALTER TABLE connections ADD COLUMN transport TEXT NOT NULL DEFAULT 'stdio';
-- The remote endpoint (`run --connect URL`, `serve`'s listen address), credentials in it removed.
ALTER TABLE connections ADD COLUMN endpoint TEXT;

-- One row per transport event, in read order with the connection's frames (same ts/mono clocks):
-- an HTTP request and its status and timing, an SSE stream opened or closed, an SSE event's id, a
-- WebSocket opened or closed (with its close code), a message the transport dropped and why.
CREATE TABLE transport_events (
    id                INTEGER PRIMARY KEY,
    connection_id     INTEGER NOT NULL REFERENCES connections(id),
    ts                REAL NOT NULL,
    mono              REAL NOT NULL,
    event             TEXT NOT NULL,          -- http | sse_open | sse_close | ws_open | ws_close | dropped | error ...
    side              TEXT,                   -- agent (toward the agent) | client (toward the editor or client)
    method            TEXT,                   -- HTTP method (POST, GET, DELETE)
    status            INTEGER,                -- HTTP status, or the WebSocket close code
    elapsed_ms        REAL,                   -- request to response headers
    acp_connection_id TEXT,                   -- Acp-Connection-Id as sent or received
    acp_session_id    TEXT,                   -- Acp-Session-Id as sent
    details           TEXT                    -- JSON: header names and values (credentials redacted), ids, reasons
);
CREATE INDEX transport_events_connection ON transport_events (connection_id, id);
