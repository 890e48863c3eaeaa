-- The control plane. Dead letters (deliveries failed for good: failed with no attempt due) are
-- few beside the delivery log; this partial index holds just them, by organization, endpoint
-- and age, for the listing and for a replay's selection.
CREATE INDEX webhook_deliveries_dead_idx
    ON webhook_deliveries (organization_id, endpoint_id, created_at)
    WHERE status = 'failed' AND next_attempt_at IS NULL;
-- Stored events, newest first, by organization and by type.
CREATE INDEX events_organization_idx ON events (organization_id, occurred_at);
CREATE INDEX events_type_idx ON events (event_type, occurred_at);
