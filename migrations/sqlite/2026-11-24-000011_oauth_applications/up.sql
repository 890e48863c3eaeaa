-- Applications become OAuth clients: a public client id, a secret kept as its SHA-256, and the
-- redirect URIs (a JSON array) the authorization flow may return to. No application could be
-- created before this migration (the table only counted them), so the defaults describe no
-- real row; SQLite cannot add a NOT NULL column without one.
ALTER TABLE applications ADD COLUMN client_id text NOT NULL DEFAULT '';
ALTER TABLE applications ADD COLUMN client_secret_hash text NOT NULL DEFAULT '';
ALTER TABLE applications ADD COLUMN redirect_uris text NOT NULL DEFAULT '[]';
CREATE UNIQUE INDEX applications_client_id_key ON applications (client_id);
CREATE INDEX applications_organization_created_idx ON applications (organization_id, created_at);
DROP INDEX applications_organization_id_idx;
