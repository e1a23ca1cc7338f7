-- Delete the broadcast rows (`name[@node]`, see crate::shard) of nodes forgotten by
-- prune_nodes, unless a lock is still held on one: such a row is pinned to a node that is gone
-- and would never run again (a node coming back under the same id creates it again).
DELETE FROM scheduler_tasks AS t
WHERE t.node_pin IS NOT NULL AND t.node_pin <> '' AND t.lock_token IS NULL
  AND NOT EXISTS (SELECT 1 FROM scheduler_nodes AS n WHERE n.node_id = t.node_pin)
