CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;
DROP INDEX webhook_deliveries_lease_idx;
