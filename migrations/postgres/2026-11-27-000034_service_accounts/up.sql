-- Service accounts: an organization's non-human members, with a role, that never sign in and act
-- through their API keys. A key belongs to a user (acting as them) or to a service account
-- (acting as it, outliving whoever made it); deleting the account deletes its keys.
CREATE TABLE service_accounts (
    id uuid PRIMARY KEY,
    organization_id uuid NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name text NOT NULL,
    role text NOT NULL,
    -- Who created it: kept as a record, not a reference (the account outlives its creator).
    created_by uuid NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL
);
CREATE INDEX service_accounts_organization_id_idx ON service_accounts (organization_id, created_at, id);

ALTER TABLE api_keys ALTER COLUMN user_id DROP NOT NULL;
ALTER TABLE api_keys
    ADD COLUMN service_account_id uuid REFERENCES service_accounts (id) ON DELETE CASCADE;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_one_holder
    CHECK ((user_id IS NULL) <> (service_account_id IS NULL));
CREATE INDEX api_keys_service_account_id_idx ON api_keys (service_account_id)
    WHERE service_account_id IS NOT NULL;
