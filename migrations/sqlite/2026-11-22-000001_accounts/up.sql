-- Accounts, organizations, memberships, sessions, API keys, signing keys and the event outbox.
-- SQLite: ids are text UUIDs, timestamps RFC 3339 text, JSON text, booleans 0/1.

CREATE TABLE users (
    id text PRIMARY KEY,
    email text NOT NULL CONSTRAINT users_email_key UNIQUE,
    full_name text NOT NULL,
    password_hash text NOT NULL,
    password_changed_at text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL
);

CREATE TABLE organizations (
    id text PRIMARY KEY,
    name text NOT NULL,
    slug text NOT NULL CONSTRAINT organizations_slug_key UNIQUE,
    kind text NOT NULL CHECK (kind IN ('personal', 'team')),
    plan text NOT NULL CHECK (plan IN ('free', 'starter', 'pro', 'business', 'enterprise')),
    default_role text NOT NULL DEFAULT 'member' CHECK (default_role IN ('member', 'viewer')),
    allow_member_invite boolean NOT NULL DEFAULT 0,
    is_active boolean NOT NULL DEFAULT 1,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    deleted_at text
);

CREATE TABLE memberships (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at text NOT NULL,
    updated_at text NOT NULL,
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user_id_idx ON memberships (user_id);
-- One owner per organization, enforced by the database too.
CREATE UNIQUE INDEX memberships_one_owner_idx ON memberships (organization_id) WHERE role = 'owner';

CREATE TABLE sessions (
    id text PRIMARY KEY,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    refresh_token_hash text NOT NULL CONSTRAINT sessions_refresh_token_hash_key UNIQUE,
    created_at text NOT NULL,
    expires_at text NOT NULL,
    last_used_at text NOT NULL,
    revoked_at text
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);

CREATE TABLE api_keys (
    id text PRIMARY KEY,
    name text NOT NULL,
    prefix text NOT NULL,
    key_hash text NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at text NOT NULL,
    last_used_at text
);
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);

CREATE TABLE signing_keys (
    kid text PRIMARY KEY,
    private_key_sealed blob NOT NULL,
    public_key_der blob NOT NULL,
    created_at text NOT NULL
);

-- The outbox: every state change records its events here in its own transaction.
CREATE TABLE events (
    id text PRIMARY KEY,
    event_type text NOT NULL,
    organization_id text,
    user_id text,
    data text NOT NULL,
    occurred_at text NOT NULL,
    dispatched_at text
);
CREATE INDEX events_undispatched_idx ON events (occurred_at) WHERE dispatched_at IS NULL;
