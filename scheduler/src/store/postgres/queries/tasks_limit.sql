-- Set the limit shared by tasks (crate::limits) each row names (after tasks_create, same
-- transaction): $1 row names, $2 the limit of each (NULL: none). A running run keeps holding
-- the limit its claim took (`limit_held`) until it ends.
UPDATE scheduler_tasks AS t
SET limit_name = l.limit_name,
    updated_at = now()
FROM unnest($1::text[], $2::text[]) AS l(name, limit_name)
WHERE t.name = l.name
