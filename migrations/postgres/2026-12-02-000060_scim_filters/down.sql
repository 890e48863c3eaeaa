-- pg_trgm stays: other migrations' indexes may use it.
DROP INDEX scim_groups_external_id_trgm_idx;
DROP INDEX scim_groups_display_name_trgm_idx;
DROP INDEX scim_users_display_name_trgm_idx;
DROP INDEX scim_users_external_id_trgm_idx;
DROP INDEX scim_users_user_name_trgm_idx;
DROP INDEX scim_groups_external_id_idx;
DROP INDEX scim_groups_display_name_idx;
DROP INDEX scim_users_display_name_idx;
DROP INDEX scim_users_external_id_idx;
DROP TABLE scim_user_emails;
ALTER TABLE scim_groups DROP COLUMN display_name_key;
ALTER TABLE scim_groups ALTER COLUMN external_id TYPE text COLLATE "default";
ALTER TABLE scim_users DROP COLUMN display_name_key;
ALTER TABLE scim_users ALTER COLUMN external_id TYPE text COLLATE "default";
ALTER TABLE scim_users ALTER COLUMN user_name_key TYPE text COLLATE "default";
