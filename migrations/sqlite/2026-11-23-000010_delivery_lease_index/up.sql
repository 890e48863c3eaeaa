-- The lease query (due, not leased, pending or failed, not at a full endpoint, oldest first)
-- reads only this index: every column it filters on or returns is in it. With the plain index
-- on next_attempt_at, each due row cost a lookup of the table row (with its payload), and a
-- lease skipped past every due row of busy endpoints that way (docs/benchmarks.md).
CREATE INDEX webhook_deliveries_lease_idx
    ON webhook_deliveries (next_attempt_at, id, endpoint_id, status, leased_until)
    WHERE next_attempt_at IS NOT NULL;
DROP INDEX webhook_deliveries_due_idx;
