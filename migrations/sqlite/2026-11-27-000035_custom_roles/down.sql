DELETE FROM service_accounts WHERE role NOT IN ('admin', 'member', 'viewer');
CREATE TABLE memberships_any_role (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role text NOT NULL CHECK (role IN ('owner', 'admin', 'member', 'viewer')),
    created_at text NOT NULL,
    updated_at text NOT NULL,
    invited_by text,
    invited_at text,
    PRIMARY KEY (organization_id, user_id)
);
INSERT INTO memberships_any_role
    (organization_id, user_id, role, created_at, updated_at, invited_by, invited_at)
    SELECT organization_id, user_id, role, created_at, updated_at, invited_by, invited_at
    FROM memberships WHERE role IN ('owner', 'admin', 'member', 'viewer');
DROP TABLE memberships;
ALTER TABLE memberships_any_role RENAME TO memberships;
CREATE INDEX memberships_user_id_idx ON memberships (user_id);
CREATE UNIQUE INDEX memberships_one_owner_idx ON memberships (organization_id) WHERE role = 'owner';
CREATE INDEX memberships_organization_created_idx
    ON memberships (organization_id, created_at, user_id);
CREATE INDEX memberships_organization_role_created_idx
    ON memberships (organization_id, role, created_at, user_id);

CREATE TABLE invitations_any_role (
    id text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email text NOT NULL,
    role text NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    token_hash text NOT NULL CONSTRAINT invitations_token_hash_key UNIQUE,
    invited_by text NOT NULL,
    invited_at text NOT NULL,
    expires_at text NOT NULL,
    accepted_at text,
    revoked_at text
);
INSERT INTO invitations_any_role
    (id, organization_id, email, role, token_hash, invited_by, invited_at, expires_at,
     accepted_at, revoked_at)
    SELECT id, organization_id, email, role, token_hash, invited_by, invited_at, expires_at,
        accepted_at, revoked_at
    FROM invitations WHERE role IN ('admin', 'member', 'viewer');
DROP TABLE invitations;
ALTER TABLE invitations_any_role RENAME TO invitations;
CREATE UNIQUE INDEX invitations_one_open_idx ON invitations (organization_id, email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
CREATE INDEX invitations_email_idx ON invitations (email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
CREATE INDEX invitations_pending_organization_idx
    ON invitations (organization_id, invited_at, id, expires_at)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
DROP TABLE organization_roles;
