-- Set the limit shared by tasks (crate::limits) the row ?1 names to ?2 (NULL: none), at ?3
-- (after tasks_create, same transaction). A running run keeps holding the limit its claim took
-- (`limit_held`) until it ends.
UPDATE scheduler_tasks
SET limit_name = ?2,
    updated_at = ?3
WHERE name = ?1
