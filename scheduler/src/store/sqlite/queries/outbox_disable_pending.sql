-- The endpoint is gone: no pending event is sent any more.
UPDATE scheduler_outbox SET state = 'disabled', locked_by = NULL, locked_until = NULL
WHERE state = 'pending'
