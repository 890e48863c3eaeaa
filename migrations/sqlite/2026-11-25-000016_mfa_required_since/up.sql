-- Since when an organization has required MFA: a member's grace period counts from here (or
-- from when they joined, whichever is later). Policies saved before this migration that
-- require MFA count from their last save.
ALTER TABLE organization_policies ADD COLUMN mfa_required_since text;
UPDATE organization_policies SET mfa_required_since = updated_at WHERE json_extract(document, '$.mfa_policy.required') = 1;
