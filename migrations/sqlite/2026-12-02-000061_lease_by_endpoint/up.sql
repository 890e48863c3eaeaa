-- The lease reads each endpoint's first due deliveries, no more than one endpoint may take at
-- once (issue 50; `due::lease_candidates`): endpoints with deliveries queued are found by
-- skipping through this index, one probe each, so an inactive or busy endpoint's backlog is
-- never read; each other one's due deliveries are read from it in their order. It holds every
-- column the lease filters on or returns (SQLite has no INCLUDE: they are trailing keys).
CREATE INDEX webhook_deliveries_endpoint_due_idx
    ON webhook_deliveries (endpoint_id, next_attempt_at, id, organization_id, status, leased_until)
    WHERE next_attempt_at IS NOT NULL;
DROP INDEX webhook_deliveries_lease_idx;
