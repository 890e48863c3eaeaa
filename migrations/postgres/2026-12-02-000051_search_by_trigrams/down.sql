DROP INDEX users_full_name_trgm_idx;
DROP INDEX users_email_trgm_idx;
