ALTER TABLE mfa_logins DROP COLUMN password_checked;
