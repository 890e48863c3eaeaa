-- The password hash the first step of a sign-in checked (NULL for a sign-in link): the second
-- step opens its session only while it is still the account's (issue 49).
ALTER TABLE mfa_logins ADD COLUMN password_checked TEXT;
