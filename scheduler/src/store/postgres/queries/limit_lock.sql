-- Lock the rows of the limits $1 (limits shared by tasks, crate::limits) until the claim ends,
-- in name order (claims never deadlock on them): claims of one limit take turns across the
-- nodes. Returns each declared limit's size; the holders are counted by limit_holders.sql in a
-- statement of its own, whose snapshot is taken once these locks are held (so it sees the
-- locks taken by the claim that held them before).
SELECT name, size
FROM scheduler_limits
WHERE name = ANY($1)
ORDER BY name
FOR UPDATE
