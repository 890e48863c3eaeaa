DROP TABLE oauth_authorization_codes;
ALTER TABLE sessions DROP COLUMN scope;
ALTER TABLE sessions DROP COLUMN client_id;
ALTER TABLE sessions DROP COLUMN application_id;
