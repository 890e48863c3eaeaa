DELETE FROM memberships WHERE role NOT IN ('owner', 'admin', 'member', 'viewer');
DELETE FROM invitations WHERE role NOT IN ('admin', 'member', 'viewer');
DELETE FROM service_accounts WHERE role NOT IN ('admin', 'member', 'viewer');
ALTER TABLE memberships ADD CONSTRAINT memberships_role_check
    CHECK (role IN ('owner', 'admin', 'member', 'viewer'));
ALTER TABLE invitations ADD CONSTRAINT invitations_role_check
    CHECK (role IN ('admin', 'member', 'viewer'));
DROP TABLE organization_roles;
