DROP TRIGGER users_search_update;
DROP TRIGGER users_search_delete;
DROP TRIGGER users_search_insert;
DROP TABLE users_search;
