-- The outbox dispatcher's poll (`pending_events`: the undispatched events, oldest first, by
-- `(occurred_at, id)`) reads this index in its order and stops at its limit. The index it
-- replaces held `occurred_at` alone, so it could not give the `id` order: SQLite without
-- statistics (Gatehouse never runs ANALYZE) walked `events_time_idx` instead, which holds every
-- stored event, and read each event's row to check `dispatched_at`: every poll read the whole
-- table (issue 36; docs/benchmarks.md, "The eighth pass").
CREATE INDEX events_undispatched_time_idx ON events (occurred_at, id) WHERE dispatched_at IS NULL;
DROP INDEX events_undispatched_idx;
