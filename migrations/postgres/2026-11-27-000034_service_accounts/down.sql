DELETE FROM api_keys WHERE service_account_id IS NOT NULL;
DROP INDEX api_keys_service_account_id_idx;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_one_holder;
ALTER TABLE api_keys DROP COLUMN service_account_id;
ALTER TABLE api_keys ALTER COLUMN user_id SET NOT NULL;
DROP TABLE service_accounts;
