-- Forget nodes silent for longer than $1 ms.
DELETE FROM scheduler_nodes WHERE heartbeat_at < now() - $1::int8 * interval '1 millisecond'
