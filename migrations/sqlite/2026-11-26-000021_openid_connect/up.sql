-- OpenID Connect: the authorization request's nonce, echoed in the ID token, and when the user
-- signed in to the page that granted the code (the ID token's auth_time). Codes live a minute:
-- one issued before this migration has neither, and counts its issue time as the sign-in's.
ALTER TABLE oauth_authorization_codes ADD COLUMN nonce text;
ALTER TABLE oauth_authorization_codes ADD COLUMN authenticated_at text;
