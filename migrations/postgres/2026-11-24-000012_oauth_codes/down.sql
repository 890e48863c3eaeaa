DROP TABLE oauth_authorization_codes;
DROP INDEX sessions_application_idx;
ALTER TABLE sessions DROP COLUMN scope;
ALTER TABLE sessions DROP COLUMN client_id;
ALTER TABLE sessions DROP COLUMN application_id;
