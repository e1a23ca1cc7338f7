SELECT disabled_reason FROM scheduler_webhook_state WHERE url_digest = $1
