SELECT pg_advisory_lock(hashtext('scheduler.migrate:' || $1))
