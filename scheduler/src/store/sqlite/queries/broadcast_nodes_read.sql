-- The nodes recorded alive at broadcast tick ?2 of the rows grouped under ?1 (a JSON array; see
-- broadcast_nodes.sql).
SELECT nodes FROM scheduler_broadcast_ticks WHERE task_name = ?1 AND tick = ?2
