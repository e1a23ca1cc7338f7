-- Forget nodes silent since before ?1.
DELETE FROM scheduler_nodes WHERE heartbeat_at < ?1
