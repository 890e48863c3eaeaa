-- `search=` on members (issue 50): a case-insensitive substring of a user's email or name.
-- FTS5's trigram tokenizer indexes every three characters of them; a search of three
-- characters or more finds its candidates there (`users_search MATCH '"term"'`), and the
-- `LIKE` conditions, unchanged, keep exactly today's matches. The table holds the index only
-- (`content=`): the rows stay in `users`, found by rowid, and the triggers keep the index in
-- step with them. SQLite's VACUUM may renumber the rowids of `users`: after a VACUUM, run
-- `INSERT INTO users_search(users_search) VALUES ('rebuild')` (docs/operations.md).
CREATE VIRTUAL TABLE users_search USING fts5(email, full_name, content='users', tokenize='trigram');
INSERT INTO users_search(users_search) VALUES ('rebuild');
CREATE TRIGGER users_search_insert AFTER INSERT ON users BEGIN
    INSERT INTO users_search(rowid, email, full_name) VALUES (new.rowid, new.email, new.full_name);
END;
CREATE TRIGGER users_search_delete AFTER DELETE ON users BEGIN
    INSERT INTO users_search(users_search, rowid, email, full_name)
        VALUES ('delete', old.rowid, old.email, old.full_name);
END;
CREATE TRIGGER users_search_update AFTER UPDATE OF email, full_name ON users BEGIN
    INSERT INTO users_search(users_search, rowid, email, full_name)
        VALUES ('delete', old.rowid, old.email, old.full_name);
    INSERT INTO users_search(rowid, email, full_name) VALUES (new.rowid, new.email, new.full_name);
END;

