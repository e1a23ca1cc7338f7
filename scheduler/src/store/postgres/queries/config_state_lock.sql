-- Serialises reconciles across nodes: the first statement of every apply transaction. Returns
-- the applied state (a fresh row has an empty digest).
INSERT INTO scheduler_config_state (id, version, digest, applied_by)
VALUES (1, NULL, '', '')
ON CONFLICT (id) DO UPDATE SET id = 1
RETURNING version, digest, applied_by
