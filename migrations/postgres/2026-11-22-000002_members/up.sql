-- Invitations, the applications an organization counts, and what members and clean-up need.

CREATE TABLE invitations (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email text NOT NULL,
    role text NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
    token_hash text NOT NULL CONSTRAINT invitations_token_hash_key UNIQUE,
    invited_by uuid NOT NULL,
    invited_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    accepted_at timestamptz,
    revoked_at timestamptz
);
-- At most one open invitation per organization and email.
CREATE UNIQUE INDEX invitations_one_open_idx ON invitations (organization_id, email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;
CREATE INDEX invitations_email_idx ON invitations (email)
    WHERE accepted_at IS NULL AND revoked_at IS NULL;

ALTER TABLE memberships ADD COLUMN invited_by uuid;
ALTER TABLE memberships ADD COLUMN invited_at timestamptz;

-- The applications module comes with OAuth; the table exists now so that counts are real.
CREATE TABLE applications (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name text NOT NULL,
    is_active boolean NOT NULL DEFAULT true,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX applications_organization_id_idx ON applications (organization_id);

CREATE INDEX api_keys_organization_id_idx ON api_keys (organization_id);
CREATE INDEX organizations_deleted_at_idx ON organizations (deleted_at) WHERE deleted_at IS NOT NULL;
