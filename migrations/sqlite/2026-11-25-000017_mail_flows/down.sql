ALTER TABLE mfa_logins DROP COLUMN first_factor;
DROP TABLE account_tokens;
ALTER TABLE users DROP COLUMN email_verified;
