-- The store's clock, for an instance upsert's decision.
SELECT now() AS db_now
