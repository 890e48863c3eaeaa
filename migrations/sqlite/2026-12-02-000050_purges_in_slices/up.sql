-- Retention purges delete in slices of at most 1,000 rows, the oldest first (issue 50). This
-- index gives them the finished deliveries in time without reading the rest: a delivery
-- enters it when its last attempt is recorded (`next_attempt_at` becomes NULL), so a fan-out's
-- inserts do not pay for it.
CREATE INDEX webhook_deliveries_finished_idx ON webhook_deliveries (created_at)
    WHERE next_attempt_at IS NULL;
