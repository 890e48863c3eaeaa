DROP INDEX organizations_deleted_at_idx;
DROP INDEX api_keys_organization_id_idx;
DROP TABLE applications;
ALTER TABLE memberships DROP COLUMN invited_at;
ALTER TABLE memberships DROP COLUMN invited_by;
DROP TABLE invitations;
