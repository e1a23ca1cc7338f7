UPDATE scheduler_config_state
SET version = COALESCE($1, version), digest = $2, applied_by = $3, applied_at = now()
WHERE id = 1
