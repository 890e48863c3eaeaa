-- The OAuth authorization-code flow. A session opened by a token exchange belongs to the
-- application that asked for it (its refresh token works only for that client, and its access
-- tokens carry client_id and scope); deleting the application ends its sessions.
ALTER TABLE sessions ADD COLUMN application_id text REFERENCES applications (id) ON DELETE CASCADE;
ALTER TABLE sessions ADD COLUMN client_id text;
ALTER TABLE sessions ADD COLUMN scope text;

-- Authorization codes, kept as their SHA-256: single use, short-lived, bound to the client, the
-- redirect URI and the PKCE challenge. session_id: the session the first exchange opened, ended
-- if the code is presented again.
CREATE TABLE oauth_authorization_codes (
    code_hash text PRIMARY KEY,
    application_id text NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    scope text NOT NULL,
    created_at text NOT NULL,
    expires_at text NOT NULL,
    used_at text,
    session_id text
);
CREATE INDEX oauth_authorization_codes_expires_idx ON oauth_authorization_codes (expires_at);
