SELECT version, digest, applied_by FROM scheduler_config_state WHERE id = 1
