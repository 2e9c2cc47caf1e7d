-- acp-relay schema, version 3: captures brought in by `acp-relay import`.
-- An imported capture is an ordinary connection (status 'imported'); this table says where it came from, so
-- importing the same file twice is caught by its content hash, and so frames rebuilt from parsed JSON (a
-- source without the exact bytes) are known as such. The relay's write path never touches it.
CREATE TABLE imports (
    id            INTEGER PRIMARY KEY,
    connection_id INTEGER NOT NULL REFERENCES connections(id),
    sha256        TEXT NOT NULL,              -- of the whole file, as read
    source        TEXT NOT NULL,              -- the file name given to `acp-relay import`
    format        TEXT NOT NULL,              -- sqlite | ndjson | acp-devtools | conductor-trace
    imported_at   REAL NOT NULL,
    frames        INTEGER NOT NULL,
    rebuilt       INTEGER NOT NULL DEFAULT 0  -- frames re-serialized from parsed JSON (details.rebuilt = 1)
);
CREATE INDEX imports_sha256 ON imports (sha256);
