CREATE TABLE api_keys_of_users (
    id text PRIMARY KEY,
    name text NOT NULL,
    prefix text NOT NULL,
    key_hash text NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at text NOT NULL,
    last_used_at text
);
INSERT INTO api_keys_of_users
    SELECT id, name, prefix, key_hash, organization_id, user_id, created_at, last_used_at
    FROM api_keys WHERE user_id IS NOT NULL;
DROP TABLE api_keys;
ALTER TABLE api_keys_of_users RENAME TO api_keys;
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);
CREATE INDEX api_keys_organization_id_idx ON api_keys (organization_id);
DROP TABLE service_accounts;
