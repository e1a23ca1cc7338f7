INSERT INTO scheduler_webhook_state (url_digest, disabled_reason) VALUES ($1, $2)
ON CONFLICT (url_digest) DO NOTHING
