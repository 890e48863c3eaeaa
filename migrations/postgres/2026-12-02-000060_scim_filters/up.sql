-- SCIM filters answered by the store (issue 50): `userName`, `externalId`, `displayName` and a
-- user's addresses compared with `eq`, `sw`, `co` and `pr` read indexes, never the whole
-- directory. Each compared value has a key column: lowercase (the application writes it, with
-- Rust's `to_lowercase`; rows already there get `lower()`) unless it compares with case
-- (`externalId`). Keys are in the "C" collation, ordered by code point, so that a prefix (`sw`)
-- is a range of a btree index; `co` reads trigram (pg_trgm) indexes.
CREATE EXTENSION IF NOT EXISTS pg_trgm;

ALTER TABLE scim_users ALTER COLUMN user_name_key TYPE text COLLATE "C";
ALTER TABLE scim_users ALTER COLUMN external_id TYPE text COLLATE "C";
ALTER TABLE scim_users ADD COLUMN display_name_key text COLLATE "C";
UPDATE scim_users SET display_name_key = lower(display_name);
ALTER TABLE scim_groups ALTER COLUMN external_id TYPE text COLLATE "C";
ALTER TABLE scim_groups ADD COLUMN display_name_key text COLLATE "C";
UPDATE scim_groups SET display_name_key = lower(display_name);
ALTER TABLE scim_groups ALTER COLUMN display_name_key SET NOT NULL;

-- A user's addresses, one row each (the `emails` column keeps them as sent, for rendering).
CREATE TABLE scim_user_emails (
    organization_id uuid NOT NULL,
    user_id uuid NOT NULL,
    value_key text COLLATE "C" NOT NULL,
    PRIMARY KEY (user_id, value_key),
    FOREIGN KEY (organization_id, user_id)
        REFERENCES scim_users (organization_id, id) ON DELETE CASCADE
);
INSERT INTO scim_user_emails (organization_id, user_id, value_key)
SELECT DISTINCT u.organization_id, u.id, lower(e.entry ->> 'value')
FROM scim_users u, jsonb_array_elements(u.emails::jsonb) AS e(entry)
WHERE e.entry ->> 'value' IS NOT NULL;

-- eq and sw: (organization, key); userName's is its unique constraint.
CREATE INDEX scim_users_external_id_idx ON scim_users (organization_id, external_id);
CREATE INDEX scim_users_display_name_idx ON scim_users (organization_id, display_name_key);
CREATE INDEX scim_user_emails_value_idx ON scim_user_emails (organization_id, value_key);
CREATE INDEX scim_groups_display_name_idx ON scim_groups (organization_id, display_name_key);
CREATE INDEX scim_groups_external_id_idx ON scim_groups (organization_id, external_id);
-- co: trigrams of each key.
CREATE INDEX scim_users_user_name_trgm_idx ON scim_users USING gin (user_name_key gin_trgm_ops);
CREATE INDEX scim_users_external_id_trgm_idx ON scim_users USING gin (external_id gin_trgm_ops);
CREATE INDEX scim_users_display_name_trgm_idx
    ON scim_users USING gin (display_name_key gin_trgm_ops);
CREATE INDEX scim_user_emails_value_trgm_idx
    ON scim_user_emails USING gin (value_key gin_trgm_ops);
CREATE INDEX scim_groups_display_name_trgm_idx
    ON scim_groups USING gin (display_name_key gin_trgm_ops);
CREATE INDEX scim_groups_external_id_trgm_idx
    ON scim_groups USING gin (external_id gin_trgm_ops);
