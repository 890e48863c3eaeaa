-- Business-plan configuration: policies, branding and SAML SSO, one of each per organization,
-- and the password history the reuse rule of a password policy checks.

-- The policy and branding documents are the API shapes, validated by the domain on the way in
-- and on the way out.
CREATE TABLE organization_policies (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    document jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE organization_branding (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    document jsonb NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE sso_configurations (
    organization_id uuid PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    provider text NOT NULL CHECK (provider IN ('saml')),
    idp_entity_id text NOT NULL,
    idp_sso_url text NOT NULL,
    -- A public certificate: not a secret, but never in a response either.
    idp_certificate text NOT NULL,
    domain_whitelist text[] NOT NULL,
    auto_provision boolean NOT NULL,
    default_role text NOT NULL CHECK (default_role IN ('admin', 'member', 'viewer')),
    is_active boolean NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Previous password hashes, newest first by retired_at; at most 24 per user are kept.
CREATE TABLE password_history (
    id bigserial PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    password_hash text NOT NULL,
    retired_at timestamptz NOT NULL
);
CREATE INDEX password_history_user_idx ON password_history (user_id, retired_at DESC);

-- Concurrent-session limits count a user's live sessions, oldest first.
CREATE INDEX sessions_user_live_idx ON sessions (user_id, created_at) WHERE revoked_at IS NULL;
