DROP INDEX sessions_user_live_idx;
DROP TABLE password_history;
DROP TABLE sso_configurations;
DROP TABLE organization_branding;
DROP TABLE organization_policies;
