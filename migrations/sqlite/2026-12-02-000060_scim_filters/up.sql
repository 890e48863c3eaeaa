-- SCIM filters answered by the store (issue 50): `userName`, `externalId`, `displayName` and a
-- user's addresses compared with `eq`, `sw`, `co` and `pr` read indexes, never the whole
-- directory. Each compared value has a key column: lowercase (the application writes it, with
-- Rust's `to_lowercase`; rows already there get `lower()`, which folds ASCII only) unless it
-- compares with case (`externalId`). Text compares by code point (BINARY), so a prefix (`sw`)
-- is a range of an (organization, key) index; `co` reads the organization's range of it.
ALTER TABLE scim_users ADD COLUMN display_name_key text;
UPDATE scim_users SET display_name_key = lower(display_name);
ALTER TABLE scim_groups ADD COLUMN display_name_key text NOT NULL DEFAULT '';
UPDATE scim_groups SET display_name_key = lower(display_name);

-- A user's addresses, one row each (the `emails` column keeps them as sent, for rendering).
CREATE TABLE scim_user_emails (
    organization_id text NOT NULL,
    user_id text NOT NULL,
    value_key text NOT NULL,
    PRIMARY KEY (user_id, value_key),
    FOREIGN KEY (organization_id, user_id)
        REFERENCES scim_users (organization_id, id) ON DELETE CASCADE
);
INSERT INTO scim_user_emails (organization_id, user_id, value_key)
SELECT DISTINCT u.organization_id, u.id, lower(json_extract(e.value, '$.value'))
FROM scim_users u, json_each(u.emails) AS e
WHERE json_extract(e.value, '$.value') IS NOT NULL;

-- eq, sw and co: (organization, key); userName's is its unique constraint.
CREATE INDEX scim_users_external_id_idx ON scim_users (organization_id, external_id);
CREATE INDEX scim_users_display_name_idx ON scim_users (organization_id, display_name_key);
CREATE INDEX scim_user_emails_value_idx ON scim_user_emails (organization_id, value_key);
CREATE INDEX scim_groups_display_name_idx ON scim_groups (organization_id, display_name_key);
CREATE INDEX scim_groups_external_id_idx ON scim_groups (organization_id, external_id);
