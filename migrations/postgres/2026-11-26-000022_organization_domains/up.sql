-- Verified domains: the email domains an organization claimed, pending until the TXT record
-- _gatehouse-challenge.{domain} holds verification_value. An organization claims a domain
-- once; at most one organization has it verified (the partial unique index).
CREATE TABLE organization_domains (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    domain text NOT NULL,
    verification_value text NOT NULL,
    verified_at timestamptz,
    created_at timestamptz NOT NULL,
    CONSTRAINT organization_domains_organization_domain_key UNIQUE (organization_id, domain)
);
CREATE UNIQUE INDEX organization_domains_verified_domain_key
    ON organization_domains (domain) WHERE verified_at IS NOT NULL;
