DROP TABLE scim_group_roles;
DROP TABLE scim_group_members;
DROP TABLE scim_groups;
DROP TABLE scim_users;
DROP TABLE scim_tokens;
