-- How the user of a session signed in (RFC 8176 amr values, space-separated: 'pwd' for a
-- password, 'ext' for SAML single sign-on); an authorization code carries it from the browser's
-- session to the session its exchange opens. Sessions and codes from before were passwords.
ALTER TABLE sessions ADD COLUMN amr text NOT NULL DEFAULT 'pwd';
ALTER TABLE oauth_authorization_codes ADD COLUMN amr text NOT NULL DEFAULT 'pwd';
