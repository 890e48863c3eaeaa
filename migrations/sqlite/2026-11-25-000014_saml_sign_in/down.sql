DROP TABLE sso_domains;
DROP TABLE saml_assertions;
DROP TABLE saml_requests;
