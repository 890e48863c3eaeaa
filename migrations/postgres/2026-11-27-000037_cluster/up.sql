-- Scale-out (issue 34).
-- The deliveries whose leases are held, by endpoint: a lease counts them across every replica,
-- so that the per-endpoint bound holds for the cluster. Only attempts in flight (and leases a
-- dead replica left to expire) have a lease: the index stays as small as the work in flight.
CREATE INDEX webhook_deliveries_held_idx
    ON webhook_deliveries (endpoint_id)
    INCLUDE (leased_until)
    WHERE lease IS NOT NULL;

-- Periodic work (the purges) claimed once per cluster per interval: a replica runs a task only
-- when its claim moves `last_run_at` forward.
CREATE TABLE periodic_runs (
    task TEXT PRIMARY KEY,
    last_run_at TIMESTAMPTZ NOT NULL
);
