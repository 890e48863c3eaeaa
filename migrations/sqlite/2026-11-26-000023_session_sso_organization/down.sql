ALTER TABLE sessions DROP COLUMN sso_organization_id;
