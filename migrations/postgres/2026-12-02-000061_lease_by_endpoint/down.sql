CREATE INDEX webhook_deliveries_organization_due_idx
    ON webhook_deliveries (organization_id, next_attempt_at, id)
    INCLUDE (endpoint_id, status, leased_until)
    WHERE next_attempt_at IS NOT NULL;
DROP INDEX webhook_deliveries_endpoint_due_idx;
