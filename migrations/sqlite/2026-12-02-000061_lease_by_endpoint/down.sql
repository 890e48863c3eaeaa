CREATE INDEX webhook_deliveries_lease_idx
    ON webhook_deliveries (next_attempt_at, id, endpoint_id, status, leased_until, organization_id)
    WHERE next_attempt_at IS NOT NULL;
DROP INDEX webhook_deliveries_endpoint_due_idx;
