CREATE INDEX webhook_deliveries_dead_idx
    ON webhook_deliveries (organization_id, endpoint_id, created_at)
    WHERE status = 'failed' AND next_attempt_at IS NULL;
DROP INDEX webhook_deliveries_dead_endpoint_idx;
DROP INDEX webhook_deliveries_dead_organization_idx;
DROP INDEX webhook_deliveries_dead_time_idx;
CREATE INDEX events_type_idx ON events (event_type, occurred_at);
DROP INDEX events_type_time_idx;
CREATE INDEX events_organization_idx ON events (organization_id, occurred_at);
DROP INDEX events_organization_time_idx;
DROP INDEX events_time_idx;
DROP INDEX webhook_deliveries_endpoint_status_idx;
DROP INDEX webhook_deliveries_endpoint_created_idx;
CREATE INDEX webhook_endpoints_organization_idx ON webhook_endpoints (organization_id, created_at);
DROP INDEX webhook_endpoints_organization_created_idx;
CREATE INDEX applications_organization_created_idx ON applications (organization_id, created_at);
DROP INDEX applications_organization_created_id_idx;
DROP INDEX invitations_pending_organization_idx;
DROP INDEX memberships_organization_role_created_idx;
DROP INDEX memberships_organization_created_idx;
