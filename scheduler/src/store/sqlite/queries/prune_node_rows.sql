-- Delete the broadcast rows (`name[@node]`, see crate::shard) of nodes forgotten by
-- prune_nodes, unless a lock is still held on one: such a row is pinned to a node that is gone
-- and would never run again (a node coming back under the same id creates it again).
DELETE FROM scheduler_tasks
WHERE node_pin IS NOT NULL AND node_pin <> '' AND lock_token IS NULL
  AND NOT EXISTS (SELECT 1 FROM scheduler_nodes AS n WHERE n.node_id = scheduler_tasks.node_pin)
