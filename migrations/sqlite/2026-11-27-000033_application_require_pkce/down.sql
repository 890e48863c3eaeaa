ALTER TABLE applications DROP COLUMN require_pkce;
