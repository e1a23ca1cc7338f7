-- The endpoint of event ?1 is gone: no pending event to its channel is sent any more.
UPDATE scheduler_outbox SET state = 'disabled', locked_by = NULL, locked_until = NULL
WHERE state = 'pending'
  AND channel = (SELECT channel FROM scheduler_outbox WHERE id = ?1)
