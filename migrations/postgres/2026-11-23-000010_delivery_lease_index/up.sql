-- The lease query's filters (status, lease, endpoint) are answered from the index before a row
-- is fetched and locked (see the SQLite migration of the same name and docs/benchmarks.md).
CREATE INDEX webhook_deliveries_lease_idx
    ON webhook_deliveries (next_attempt_at, id)
    INCLUDE (endpoint_id, status, leased_until)
    WHERE next_attempt_at IS NOT NULL;
DROP INDEX webhook_deliveries_due_idx;
