-- Delete up to ?2 records of the nodes alive at broadcast ticks decided before ?1: a claim asks
-- for a tick's record only around the tick (or a retry of it).
DELETE FROM scheduler_broadcast_ticks
WHERE rowid IN (
    SELECT rowid FROM scheduler_broadcast_ticks
    WHERE decided_at < ?1
    ORDER BY decided_at
    LIMIT ?2
)
