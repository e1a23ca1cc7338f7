-- The newest audit entry's id (0: none): the change listener's sign of an operator action.
SELECT coalesce(max(id), 0) FROM scheduler_audit
