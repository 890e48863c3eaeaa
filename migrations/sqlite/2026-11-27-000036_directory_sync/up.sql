-- Directory sync (SCIM 2.0): each organization's bearer tokens, the users and groups its
-- identity provider provisions, the groups' members, and which role each group's members get.
CREATE TABLE scim_tokens (
    id text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name text NOT NULL,
    prefix text NOT NULL,
    token_hash text NOT NULL CONSTRAINT scim_tokens_token_hash_key UNIQUE,
    -- Who created it: kept as a record, not a reference (the token outlives its creator).
    created_by text NOT NULL,
    created_at text NOT NULL,
    last_used_at text
);
CREATE INDEX scim_tokens_organization_id_idx ON scim_tokens (organization_id, created_at, id);

CREATE TABLE scim_users (
    id text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_name text NOT NULL,
    -- userName lowercased: unique in the organization but for case.
    user_name_key text NOT NULL,
    external_id text,
    display_name text,
    name_formatted text,
    given_name text,
    family_name text,
    -- [{"value", "type", "primary"}], as the directory sent them.
    emails text NOT NULL,
    active boolean NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    CONSTRAINT scim_users_organization_id_id_key UNIQUE (organization_id, id),
    CONSTRAINT scim_users_user_name_key UNIQUE (organization_id, user_name_key)
);
CREATE INDEX scim_users_organization_id_idx ON scim_users (organization_id, created_at, id);

CREATE TABLE scim_groups (
    id text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    display_name text NOT NULL,
    external_id text,
    created_at text NOT NULL,
    updated_at text NOT NULL,
    CONSTRAINT scim_groups_organization_id_id_key UNIQUE (organization_id, id)
);
CREATE INDEX scim_groups_organization_id_idx ON scim_groups (organization_id, created_at, id);

-- A member is a user of the group's own organization: both keys carry it.
CREATE TABLE scim_group_members (
    organization_id text NOT NULL,
    group_id text NOT NULL,
    user_id text NOT NULL,
    PRIMARY KEY (group_id, user_id),
    FOREIGN KEY (organization_id, group_id)
        REFERENCES scim_groups (organization_id, id) ON DELETE CASCADE,
    FOREIGN KEY (organization_id, user_id)
        REFERENCES scim_users (organization_id, id) ON DELETE CASCADE
);
CREATE INDEX scim_group_members_user_id_idx ON scim_group_members (user_id);

CREATE TABLE scim_group_roles (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    group_name text NOT NULL,
    role text NOT NULL,
    PRIMARY KEY (organization_id, group_name)
);
