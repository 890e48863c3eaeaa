-- `search=` on members (issue 50): a case-insensitive substring of a user's email or name is
-- `lower(column) LIKE '%term%'`. These
-- trigram indexes answer that condition as written, so a search reads the users it finds,
-- not every member of the organization. pg_trgm ships with PostgreSQL and is a trusted
-- extension: the database's owner may create it.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX users_email_trgm_idx ON users USING gin (lower(email) gin_trgm_ops);
CREATE INDEX users_full_name_trgm_idx ON users USING gin (lower(full_name) gin_trgm_ops);
