DROP INDEX events_type_idx;
DROP INDEX events_organization_idx;
DROP INDEX webhook_deliveries_dead_idx;
