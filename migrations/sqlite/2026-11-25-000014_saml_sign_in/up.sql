-- SAML sign-in. An AuthnRequest sent to an organization's identity provider waits here for its
-- answer: single use (the sign-in deletes it), for 10 minutes.
CREATE TABLE saml_requests (
    id text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    return_to text NOT NULL,
    created_at text NOT NULL,
    expires_at text NOT NULL
);
CREATE INDEX saml_requests_expires_idx ON saml_requests (expires_at);

-- The ids of assertions that signed someone in, kept until the assertion could no longer be
-- presented: a second presentation is refused.
CREATE TABLE saml_assertions (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    assertion_id text NOT NULL,
    expires_at text NOT NULL,
    PRIMARY KEY (organization_id, assertion_id)
);
CREATE INDEX saml_assertions_expires_idx ON saml_assertions (expires_at);

-- The domains of each configuration's whitelist, one row each, for home realm discovery
-- (which organization's identity provider an email's domain belongs to).
CREATE TABLE sso_domains (
    organization_id text NOT NULL REFERENCES sso_configurations (organization_id) ON DELETE CASCADE,
    domain text NOT NULL,
    PRIMARY KEY (organization_id, domain)
);
CREATE INDEX sso_domains_domain_idx ON sso_domains (domain);
INSERT INTO sso_domains (organization_id, domain)
SELECT DISTINCT sso_configurations.organization_id, json_each.value
FROM sso_configurations, json_each(sso_configurations.domain_whitelist);
