ALTER TABLE organization_policies DROP COLUMN mfa_required_since;
