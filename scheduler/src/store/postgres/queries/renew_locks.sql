-- Extend the locks node $1 holds, all in one statement, each by its own lifetime; fenced by
-- owner and token (not by expiry), so a lock taken over is never extended. A row another
-- transaction holds at this moment is skipped, not waited for (a stuck statement of this
-- node's own, an outcome write frozen in its server process, would otherwise hold back the
-- renewal of every other lock): it comes back `busy` if it is still this node's, to be renewed
-- again soon. Returns the locks extended and those busy.
-- $2, $3, $4 parallel arrays of task names, tokens and lifetimes in ms.
WITH held AS (
    SELECT * FROM unnest($2::text[], $3::uuid[], $4::int8[]) AS held(name, token, lock_ms)
), free AS MATERIALIZED (
    SELECT t.name
    FROM scheduler_tasks AS t
    WHERE t.name IN (SELECT name FROM held)
    ORDER BY t.name
    FOR NO KEY UPDATE SKIP LOCKED
), renewed AS (
    UPDATE scheduler_tasks AS t
    SET lock_expires_at = clock_timestamp() + held.lock_ms * interval '1 millisecond'
    FROM held
    WHERE t.name = held.name AND t.lock_owner = $1 AND t.lock_token = held.token
      AND t.name IN (SELECT name FROM free)
    RETURNING t.name, t.lock_token
)
SELECT name, lock_token, false AS busy FROM renewed
UNION ALL
SELECT h.name, h.token, true
FROM held AS h
JOIN scheduler_tasks AS t ON t.name = h.name AND t.lock_owner = $1 AND t.lock_token = h.token
WHERE h.name NOT IN (SELECT name FROM free)
