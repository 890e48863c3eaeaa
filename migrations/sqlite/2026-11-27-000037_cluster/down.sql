DROP TABLE periodic_runs;
DROP INDEX webhook_deliveries_held_idx;
