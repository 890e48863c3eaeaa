-- Every paginated listing walks an index in its own order (filter columns first, then the
-- ORDER BY columns, the id last as the tie-break), so that a deep page skips index entries
-- instead of sorting the whole collection: at 100,000 members, page 150 of an organization's
-- members sorted every membership joined to its user (60 to 95 ms on SQLite). The figures are
-- in docs/operations.md ("Listings"), from `just bench-listings`.

-- Members: an organization's memberships, oldest first, all roles or one role.
CREATE INDEX memberships_organization_created_idx
    ON memberships (organization_id, created_at, user_id);
CREATE INDEX memberships_organization_role_created_idx
    ON memberships (organization_id, role, created_at, user_id);
-- Members: the organization's pending invitations, oldest first; expires_at is read from the
-- index too (the listing keeps those not expired).
CREATE INDEX invitations_pending_organization_idx
    ON invitations (organization_id, invited_at, id, expires_at)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
-- Applications and webhook endpoints of an organization, newest first.
CREATE INDEX applications_organization_created_id_idx
    ON applications (organization_id, created_at, id);
DROP INDEX applications_organization_created_idx;
CREATE INDEX webhook_endpoints_organization_created_idx
    ON webhook_endpoints (organization_id, created_at, id);
DROP INDEX webhook_endpoints_organization_idx;
-- An endpoint's deliveries, newest first, all or of one status.
CREATE INDEX webhook_deliveries_endpoint_created_idx
    ON webhook_deliveries (organization_id, endpoint_id, created_at, id);
CREATE INDEX webhook_deliveries_endpoint_status_idx
    ON webhook_deliveries (organization_id, endpoint_id, status, created_at, id);
-- Stored events, newest first: all, by organization, by type.
CREATE INDEX events_time_idx ON events (occurred_at, id);
CREATE INDEX events_organization_time_idx ON events (organization_id, occurred_at, id);
DROP INDEX events_organization_idx;
CREATE INDEX events_type_time_idx ON events (event_type, occurred_at, id);
DROP INDEX events_type_idx;
-- Dead letters, newest first: all, by organization, by organization and endpoint. The event
-- type is in the index for the listing's "sent again" condition.
CREATE INDEX webhook_deliveries_dead_time_idx
    ON webhook_deliveries (created_at, id, event_type)
    WHERE status = 'failed' AND next_attempt_at IS NULL;
CREATE INDEX webhook_deliveries_dead_organization_idx
    ON webhook_deliveries (organization_id, created_at, id, event_type)
    WHERE status = 'failed' AND next_attempt_at IS NULL;
CREATE INDEX webhook_deliveries_dead_endpoint_idx
    ON webhook_deliveries (organization_id, endpoint_id, created_at, id, event_type)
    WHERE status = 'failed' AND next_attempt_at IS NULL;
DROP INDEX webhook_deliveries_dead_idx;
