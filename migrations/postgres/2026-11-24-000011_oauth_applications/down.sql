CREATE INDEX applications_organization_id_idx ON applications (organization_id);
DROP INDEX applications_organization_created_idx;
DROP INDEX applications_client_id_key;
ALTER TABLE applications DROP COLUMN redirect_uris;
ALTER TABLE applications DROP COLUMN client_secret_hash;
ALTER TABLE applications DROP COLUMN client_id;
