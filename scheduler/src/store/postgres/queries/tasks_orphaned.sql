UPDATE scheduler_tasks AS t
SET orphaned_since = CASE WHEN o.orphaned THEN COALESCE(t.orphaned_since, now()) ELSE NULL END,
    updated_at = now()
FROM unnest($1::text[], $2::bool[]) AS o(name, orphaned)
WHERE t.name = o.name
