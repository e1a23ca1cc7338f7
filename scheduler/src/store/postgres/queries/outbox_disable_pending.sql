-- The endpoints of the events $1 are gone: no pending event to their channels is sent any more.
UPDATE scheduler_outbox SET state = 'disabled', locked_by = NULL, locked_until = NULL
WHERE state = 'pending'
  AND channel IN (SELECT channel FROM scheduler_outbox WHERE id = ANY($1::int8[]))
