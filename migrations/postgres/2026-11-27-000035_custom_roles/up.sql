-- Custom roles: an organization's own roles over the permission catalogue. A member, an
-- invitation or a service account holds a built-in role's name or a custom role's key in `role`;
-- a custom role cannot be deleted while anyone holds it (the domain counts them in the
-- transaction that deletes it).
CREATE TABLE organization_roles (
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    key text NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    permissions text[] NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (organization_id, key)
);

ALTER TABLE memberships DROP CONSTRAINT memberships_role_check;
ALTER TABLE invitations DROP CONSTRAINT invitations_role_check;
