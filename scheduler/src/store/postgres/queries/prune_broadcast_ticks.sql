-- Delete up to $2 records of the nodes alive at broadcast ticks older than the retention
-- ($1 ms): a claim asks for a tick's record only around the tick (or a retry of it).
DELETE FROM scheduler_broadcast_ticks
WHERE (task_name, tick) IN (
    SELECT task_name, tick FROM scheduler_broadcast_ticks
    WHERE decided_at < now() - $1::int8 * interval '1 millisecond'
    ORDER BY decided_at
    LIMIT $2
)
