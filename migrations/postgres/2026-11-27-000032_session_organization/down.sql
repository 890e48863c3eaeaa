ALTER TABLE sessions DROP COLUMN organization_id;
