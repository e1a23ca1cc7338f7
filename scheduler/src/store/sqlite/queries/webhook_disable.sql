-- Disable the webhook endpoint with URL digest ?1 for reason ?2 at ?3 (now); the first reason
-- stays.
INSERT INTO scheduler_webhook_state (url_digest, disabled_at, disabled_reason) VALUES (?1, ?3, ?2)
ON CONFLICT (url_digest) DO NOTHING
