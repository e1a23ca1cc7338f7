-- Alerts go to several channels (Slack, Feishu, DingTalk, WeCom, e-mail, the webhook): the
-- outbox holds one row per (event, channel), each delivered and retried on its own, so one
-- channel failing never holds back another. Rows written before this migration were for the
-- one webhook.
-- Never edit a migration after it has landed.
ALTER TABLE scheduler_outbox ADD COLUMN channel TEXT NOT NULL DEFAULT 'webhook';
