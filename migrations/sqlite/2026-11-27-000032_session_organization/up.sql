-- The organization a session's access tokens speak for (org_id, org_role, org_permissions),
-- chosen at sign-in or refresh and admitted again at every refresh. Null: no one organization.
-- No foreign key: an organization that goes away stops admitting the session's next refresh
-- (403), which then names another organization or none.
ALTER TABLE sessions ADD COLUMN organization_id text;
