-- The store's clock ?1 (the operation's), for an instance upsert's decision.
SELECT ?1 AS db_now
