DROP TABLE events;
DROP TABLE signing_keys;
DROP TABLE api_keys;
DROP TABLE sessions;
DROP TABLE memberships;
DROP TABLE organizations;
DROP TABLE users;
