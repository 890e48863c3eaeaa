-- The lease takes each organization's oldest due delivery before anyone's second (a window
-- over the due deliveries, partitioned by organization): the organization joins the columns
-- the lease index holds, so that the lease still reads the index alone.
DROP INDEX webhook_deliveries_lease_idx;
CREATE INDEX webhook_deliveries_lease_idx
    ON webhook_deliveries (next_attempt_at, id, endpoint_id, status, leased_until, organization_id)
    WHERE next_attempt_at IS NOT NULL;
