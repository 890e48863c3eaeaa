-- The lease reads each organization's first due deliveries instead of every due delivery
-- (issue 36; `due::lease_candidates_per_organization`): organizations are found by skipping
-- through this index, and each one's due deliveries read from it in their order. It holds every
-- column the lease filters on, as the index it replaces did; the count of deliveries queued
-- (`next_attempt_at IS NOT NULL`) reads it too.
CREATE INDEX webhook_deliveries_organization_due_idx
    ON webhook_deliveries (organization_id, next_attempt_at, id)
    INCLUDE (endpoint_id, status, leased_until)
    WHERE next_attempt_at IS NOT NULL;
DROP INDEX webhook_deliveries_lease_idx;
