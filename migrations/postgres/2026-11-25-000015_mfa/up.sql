-- Multi-factor authentication. A user's second factors: an authenticator app's TOTP secret
-- (sealed under GATEHOUSE_SECRET_KEY, with the last time step whose code it took, so that each
-- code works once) or a WebAuthn credential (the adapter's serialisation, public key and
-- counter). A TOTP factor is pending until its first code confirms it.
CREATE TABLE mfa_factors (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    kind text NOT NULL CHECK (kind IN ('totp', 'webauthn')),
    totp_secret_sealed bytea,
    last_step bigint,
    credential_id text UNIQUE,
    passkey text,
    created_at timestamptz NOT NULL,
    confirmed_at timestamptz,
    last_used_at timestamptz
);
CREATE INDEX mfa_factors_user_idx ON mfa_factors (user_id);

-- Recovery codes, kept as their SHA-256; each works once.
CREATE TABLE recovery_codes (
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    code_hash text NOT NULL,
    created_at timestamptz NOT NULL,
    used_at timestamptz,
    PRIMARY KEY (user_id, code_hash)
);

-- The second step of a sign-in, by the SHA-256 of its mfa_token: five minutes, five wrong
-- factors, one use.
CREATE TABLE mfa_logins (
    token_hash text PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    failures integer NOT NULL DEFAULT 0,
    used_at timestamptz,
    webauthn_state text
);
CREATE INDEX mfa_logins_expires_idx ON mfa_logins (expires_at);

-- WebAuthn registrations under way: the ceremony's state until the browser answers.
CREATE TABLE webauthn_registrations (
    id uuid PRIMARY KEY,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    state text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
