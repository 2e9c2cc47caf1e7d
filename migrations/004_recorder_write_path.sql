-- acp-relay schema, version 4: one index fewer on the recorder's write path.
-- frames_method (method) cost the recorder about 0.8 us on every frame (a tenth of its SQLite insert at
-- 200 B), and only `stats` over every recording reads it, to find the session/prompt frames. A partial
-- index holds just those: a frame with another method costs the evaluation of the WHERE, not an entry.
DROP INDEX frames_method;
CREATE INDEX frames_prompt ON frames (method) WHERE method = 'session/prompt';
-- Indexed on method itself so that stats' queries (`f.method = 'session/prompt'`) get the plans they had.
