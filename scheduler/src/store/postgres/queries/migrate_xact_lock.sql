SELECT pg_advisory_xact_lock(hashtext('scheduler.migrate:' || $1))
