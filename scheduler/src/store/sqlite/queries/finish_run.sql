-- Record the end of run ?1 under token ?2 as the engine decided it: status ?3, error ?4, ticks
-- collapsed ?5, at ?6 (now), its handler started at ?7 (NULL: never; it replaces the start the
-- claim planned). A run another node already marked `lost` still gets its real outcome, with
-- a note.
UPDATE scheduler_runs
SET status = ?3,
    started_at = ?7,
    finished_at = ?6,
    error = CASE WHEN status = 'lost'
                 THEN concat_ws(' ', ?4, '(recorded after another node released the lock)')
                 ELSE ?4 END,
    ticks_collapsed = ?5
WHERE id = ?1 AND lock_token = ?2 AND status IN ('running', 'lost')
