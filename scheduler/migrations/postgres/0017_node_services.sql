-- The background services a node reports not running (`engine::health`: restarting after a
-- panic, or stopping), by name, comma-separated; '' while every one runs. The node writes it
-- when it changes; `/api/nodes` shows it for every node.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_nodes ADD COLUMN services_down text NOT NULL DEFAULT '';
