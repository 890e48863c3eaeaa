ALTER TABLE oauth_authorization_codes DROP COLUMN authenticated_at;
ALTER TABLE oauth_authorization_codes DROP COLUMN nonce;
