-- Serialises reconciles across nodes: the first statement of every apply transaction.
INSERT INTO scheduler_config_state (id, version, digest, applied_by)
VALUES (1, NULL, '', '')
ON CONFLICT (id) DO UPDATE SET id = 1
RETURNING version
