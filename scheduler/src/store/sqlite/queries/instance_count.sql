-- How many instances there are (rows `task/key`, enabled or not): the heartbeat's count.
SELECT count(*) FROM scheduler_tasks WHERE instance_of IS NOT NULL
