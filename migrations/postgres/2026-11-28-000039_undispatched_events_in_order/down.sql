CREATE INDEX events_undispatched_idx ON events (occurred_at) WHERE dispatched_at IS NULL;
DROP INDEX events_undispatched_time_idx;
