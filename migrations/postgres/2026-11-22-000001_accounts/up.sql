-- Accounts, organizations, memberships, sessions, API keys, signing keys and the event outbox.

CREATE TABLE users (
    id uuid PRIMARY KEY,
    email text NOT NULL CONSTRAINT users_email_key UNIQUE,
    full_name text NOT NULL,
    password_hash text NOT NULL,
    password_changed_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);

CREATE TABLE organizations (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    slug text NOT NULL CONSTRAINT organizations_slug_key UNIQUE,
    kind text NOT NULL CHECK (kind IN ('personal', 'team')),
    plan text NOT NULL CHECK (plan IN ('free', 'starter', 'pro', 'business', 'enterprise')),
    default_role text NOT NULL DEFAULT 'member' CHECK (default_role IN ('member', 'viewer')),
    allow_member_invite boolean NOT NULL DEFAULT false,
    is_active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz
);

CREATE TABLE memberships (
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user_id_idx ON memberships (user_id);
-- One owner per organization, enforced by the database too.
CREATE UNIQUE INDEX memberships_one_owner_idx ON memberships (organization_id) WHERE role = 'owner';

CREATE TABLE sessions (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    refresh_token_hash text NOT NULL CONSTRAINT sessions_refresh_token_hash_key UNIQUE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    last_used_at timestamptz NOT NULL,
    revoked_at timestamptz
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);

CREATE TABLE api_keys (
    id uuid PRIMARY KEY,
    name text NOT NULL,
    prefix text NOT NULL,
    key_hash text NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    last_used_at timestamptz
);
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);

CREATE TABLE signing_keys (
    kid text PRIMARY KEY,
    private_key_sealed bytea NOT NULL,
    public_key_der bytea NOT NULL,
    created_at timestamptz NOT NULL
);

-- The outbox: every state change records its events here in its own transaction.
CREATE TABLE events (
    id uuid PRIMARY KEY,
    event_type text NOT NULL,
    organization_id uuid,
    user_id uuid,
    data jsonb NOT NULL,
    occurred_at timestamptz NOT NULL,
    dispatched_at timestamptz
);
CREATE INDEX events_undispatched_idx ON events (occurred_at) WHERE dispatched_at IS NULL;
