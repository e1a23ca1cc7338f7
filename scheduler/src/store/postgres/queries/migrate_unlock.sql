SELECT pg_advisory_unlock(hashtext('scheduler.migrate:' || $1))
