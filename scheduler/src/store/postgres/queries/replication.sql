-- What the server says of its replication, for the node's start-up line: the standbys a
-- commit waits for, whether this session's commits wait at all, and the standbys streaming
-- from it (every role sees their rows; only pg_read_all_stats sees their sync_state, NULL
-- otherwise). Base backups in progress are not standbys.
SELECT current_setting('synchronous_standby_names') AS synchronous_standby_names,
       current_setting('synchronous_commit') AS synchronous_commit,
       count(*) FILTER (WHERE r.state IS DISTINCT FROM 'backup') AS standbys,
       count(*) FILTER (WHERE r.sync_state IN ('sync', 'quorum')) AS synchronous_standbys,
       count(*) FILTER (WHERE r.sync_state IS NULL) AS hidden
FROM pg_stat_replication AS r
