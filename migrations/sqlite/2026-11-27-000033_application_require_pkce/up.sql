-- Whether an application's authorization requests must carry a PKCE challenge. Without it a
-- request may leave PKCE out (every application is a confidential client: its secret binds the
-- code at the exchange). Existing applications keep working for clients that send PKCE and now
-- also take those that do not.
--
-- A code issued without a challenge keeps code_challenge empty (''): no challenge parses as
-- empty, and SQLite cannot drop the column's NOT NULL without rebuilding the table.
ALTER TABLE applications ADD COLUMN require_pkce boolean NOT NULL DEFAULT false;
