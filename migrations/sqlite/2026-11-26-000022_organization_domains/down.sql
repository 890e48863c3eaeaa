DROP TABLE organization_domains;
