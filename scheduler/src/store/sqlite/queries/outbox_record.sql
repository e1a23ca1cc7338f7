-- What happens to event ?1 after attempt ?2: next state ?3 ('delivered' | 'pending' | 'failed' |
-- 'disabled'), next attempt time ?4 (pending only), error ?5, at ?6 (now).
UPDATE scheduler_outbox
SET state = ?3,
    attempts = ?2,
    deliver_after = COALESCE(?4, deliver_after),
    locked_by = NULL,
    locked_until = NULL,
    last_error = ?5,
    delivered_at = CASE WHEN ?3 = 'delivered' THEN ?6 END
WHERE id = ?1
