    id, task_name, scheduled_at, started_at, finished_at, status, node_id, ticks_collapsed,
    error, attempt, trigger, triggered_by, cancel_requested_at, cancel_requested_by,
    shard_index, shard_total, instance_key, args_override
