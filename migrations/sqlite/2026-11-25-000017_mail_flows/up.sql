-- Mail-based account flows. Users carry whether their address is verified; the tokens mailed
-- for sign-in links, password resets and verification are kept as their SHA-256, work once
-- and expire (15 minutes, or 24 hours for verification).
ALTER TABLE users ADD COLUMN email_verified boolean NOT NULL DEFAULT false;

CREATE TABLE account_tokens (
    token_hash text PRIMARY KEY,
    purpose text NOT NULL CHECK (purpose IN ('magic_link', 'password_reset', 'email_verification')),
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    email text NOT NULL,
    created_at text NOT NULL,
    expires_at text NOT NULL,
    used_at text
);
CREATE INDEX account_tokens_expires_idx ON account_tokens (expires_at);

-- How the first step of a sign-in with a second factor was passed (a password, or a mailed
-- link): the session's amr starts with it.
ALTER TABLE mfa_logins ADD COLUMN first_factor text NOT NULL DEFAULT 'pwd';
