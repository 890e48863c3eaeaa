-- The organization whose identity provider signed the session's user in (SAML): the only one
-- for which the session's `ext` method counts as a second factor. Null for every other sign-in.
ALTER TABLE sessions ADD COLUMN sso_organization_id uuid;
