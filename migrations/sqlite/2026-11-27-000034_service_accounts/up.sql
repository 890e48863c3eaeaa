-- Service accounts: an organization's non-human members, with a role, that never sign in and act
-- through their API keys. A key belongs to a user (acting as them) or to a service account
-- (acting as it, outliving whoever made it); deleting the account deletes its keys.
CREATE TABLE service_accounts (
    id text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name text NOT NULL,
    role text NOT NULL,
    -- Who created it: kept as a record, not a reference (the account outlives its creator).
    created_by text NOT NULL,
    created_at text NOT NULL,
    updated_at text NOT NULL
);
CREATE INDEX service_accounts_organization_id_idx ON service_accounts (organization_id, created_at, id);

-- SQLite cannot drop a column's NOT NULL: the table is rebuilt (nothing references it).
CREATE TABLE api_keys_with_holders (
    id text PRIMARY KEY,
    name text NOT NULL,
    prefix text NOT NULL,
    key_hash text NOT NULL CONSTRAINT api_keys_key_hash_key UNIQUE,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id text REFERENCES users (id) ON DELETE CASCADE,
    created_at text NOT NULL,
    last_used_at text,
    service_account_id text REFERENCES service_accounts (id) ON DELETE CASCADE,
    CONSTRAINT api_keys_one_holder CHECK ((user_id IS NULL) <> (service_account_id IS NULL))
);
INSERT INTO api_keys_with_holders
    (id, name, prefix, key_hash, organization_id, user_id, created_at, last_used_at)
    SELECT id, name, prefix, key_hash, organization_id, user_id, created_at, last_used_at
    FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_with_holders RENAME TO api_keys;
CREATE INDEX api_keys_user_id_idx ON api_keys (user_id);
CREATE INDEX api_keys_organization_id_idx ON api_keys (organization_id);
CREATE INDEX api_keys_service_account_id_idx ON api_keys (service_account_id)
    WHERE service_account_id IS NOT NULL;
