-- Webhook endpoints and their deliveries.

CREATE TABLE webhook_endpoints (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    url text NOT NULL,
    description text NOT NULL DEFAULT '',
    events text[] NOT NULL,
    -- AES-256-GCM under GATEHOUSE_SECRET_KEY; opened only to sign.
    secret_sealed bytea NOT NULL,
    is_active boolean NOT NULL DEFAULT true,
    -- Failed attempts in a row, across deliveries; any success resets it.
    consecutive_failures integer NOT NULL DEFAULT 0,
    last_delivery_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX webhook_endpoints_organization_idx ON webhook_endpoints (organization_id, created_at);

-- One row per (event, endpoint): the latest attempt's outcome, and when the next one is due.
-- status 'pending': queued (new, or manually retried); 'failed' with next_attempt_at: waiting for
-- an automatic retry; 'failed' without: permanently failed; 'success'.
CREATE TABLE webhook_deliveries (
    id uuid PRIMARY KEY,
    endpoint_id uuid NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
    organization_id uuid NOT NULL,
    event_id uuid NOT NULL,
    event_type text NOT NULL,
    payload text NOT NULL,
    status text NOT NULL CHECK (status IN ('pending', 'success', 'failed')),
    attempt integer NOT NULL DEFAULT 1,
    next_attempt_at timestamptz,
    leased_until timestamptz,
    lease uuid,
    http_status integer,
    response_body text,
    duration_ms bigint,
    delivered_at timestamptz,
    created_at timestamptz NOT NULL,
    CONSTRAINT webhook_deliveries_event_endpoint_key UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at)
    WHERE next_attempt_at IS NOT NULL;
CREATE INDEX webhook_deliveries_endpoint_idx ON webhook_deliveries (endpoint_id, created_at);
