-- Webhook endpoints and their deliveries.

CREATE TABLE webhook_endpoints (
    id text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    url text NOT NULL,
    description text NOT NULL DEFAULT '',
    events text NOT NULL, -- JSON array of event types
    -- AES-256-GCM under GATEHOUSE_SECRET_KEY; opened only to sign.
    secret_sealed blob NOT NULL,
    is_active boolean NOT NULL DEFAULT 1,
    -- Failed attempts in a row, across deliveries; any success resets it.
    consecutive_failures integer NOT NULL DEFAULT 0,
    last_delivery_at text,
    created_at text NOT NULL,
    updated_at text NOT NULL
);
CREATE INDEX webhook_endpoints_organization_idx ON webhook_endpoints (organization_id, created_at);

-- One row per (event, endpoint): the latest attempt's outcome, and when the next one is due.
-- status 'pending': queued (new, or manually retried); 'failed' with next_attempt_at: waiting for
-- an automatic retry; 'failed' without: permanently failed; 'success'.
CREATE TABLE webhook_deliveries (
    id text PRIMARY KEY,
    endpoint_id text NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    organization_id text NOT NULL,
    event_id text NOT NULL,
    event_type text NOT NULL,
    payload text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'success', 'failed')),
    attempt integer NOT NULL DEFAULT 1,
    next_attempt_at text,
    leased_until text,
    lease text,
    http_status integer,
    response_body text,
    duration_ms integer,
    delivered_at text,
    created_at text NOT NULL,
    CONSTRAINT webhook_deliveries_event_endpoint_key UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at);
