-- A user's consent to the API scopes an application asked for (org:read, ...), given on the
-- hosted consent page, remembered per user and application until the user takes it back.
CREATE TABLE oauth_consents (
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    application_id text NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    scope text NOT NULL,
    granted_at text NOT NULL,
    PRIMARY KEY (user_id, application_id)
);
CREATE INDEX oauth_consents_application_idx ON oauth_consents (application_id);
