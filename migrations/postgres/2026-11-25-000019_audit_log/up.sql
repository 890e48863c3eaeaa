-- The audit log: one record per change (written in the change's transaction) and per sign-in
-- attempt. No foreign keys: a record outlives what it names (a deleted member, a purged
-- organization) until GATEHOUSE_AUDIT_RETENTION_DAYS purges it.
CREATE TABLE audit_log (
    id uuid PRIMARY KEY,
    occurred_at timestamptz NOT NULL,
    actor_type text NOT NULL,
    actor_id text,
    organization_id uuid,
    action text NOT NULL,
    target_type text,
    target_id text,
    ip text,
    user_agent text,
    request_id text,
    outcome text NOT NULL
);
-- Newest first, as every listing reads it: whole log (and the retention purge), by
-- organization, by actor, by action. A filtered page walks its index from the newest end.
CREATE INDEX audit_log_time_idx ON audit_log (occurred_at, id);
CREATE INDEX audit_log_organization_idx ON audit_log (organization_id, occurred_at, id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor_id, occurred_at, id);
CREATE INDEX audit_log_action_idx ON audit_log (action, occurred_at, id);
