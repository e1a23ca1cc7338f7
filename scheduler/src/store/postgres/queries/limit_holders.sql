-- The holders of the limits $1 (crate::limits): the locked rows whose lock holds each limit.
SELECT limit_held AS name, count(*) AS holders
FROM scheduler_tasks
WHERE lock_token IS NOT NULL AND limit_held = ANY($1)
GROUP BY limit_held
