-- Record the config applied: ?1 version (NULL keeps the stored one), ?2 digest, ?3 node, ?4 now.
INSERT INTO scheduler_config_state (id, version, digest, applied_by, applied_at)
VALUES (1, ?1, ?2, ?3, ?4)
ON CONFLICT (id) DO UPDATE
SET version = COALESCE(excluded.version, version), digest = excluded.digest,
    applied_by = excluded.applied_by, applied_at = excluded.applied_at
