-- The OAuth authorization-code flow (see the SQLite migration of the same name).
ALTER TABLE sessions ADD COLUMN application_id uuid REFERENCES applications (id) ON DELETE CASCADE;
ALTER TABLE sessions ADD COLUMN client_id text;
ALTER TABLE sessions ADD COLUMN scope text;
CREATE INDEX sessions_application_idx ON sessions (application_id) WHERE application_id IS NOT NULL;

CREATE TABLE oauth_authorization_codes (
    code_hash text PRIMARY KEY,
    application_id uuid NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    redirect_uri text NOT NULL,
    code_challenge text NOT NULL,
    scope text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    used_at timestamptz,
    session_id uuid
);
CREATE INDEX oauth_authorization_codes_expires_idx ON oauth_authorization_codes (expires_at);
