ALTER TABLE oauth_authorization_codes DROP COLUMN amr;
ALTER TABLE sessions DROP COLUMN amr;
