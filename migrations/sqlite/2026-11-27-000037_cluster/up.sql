-- Scale-out (issue 34); see the PostgreSQL migration. SQLite serves one process, but the store's
-- queries are the same on both backends.
CREATE INDEX webhook_deliveries_held_idx
    ON webhook_deliveries (endpoint_id, leased_until)
    WHERE lease IS NOT NULL;

CREATE TABLE periodic_runs (
    task TEXT PRIMARY KEY NOT NULL,
    last_run_at TEXT NOT NULL
);
