-- An organization's log filtered by action or by actor: without these, the count and the page
-- read every record of the organization (or of the action) and check the other column; at a
-- million records a busy organization's page took 90 to 180 ms (docs/benchmarks.md, "Audit
-- log"). Both or neither: with only the first, SQLite (which keeps no statistics) counts an
-- organization + actor filter through it and gets slower.
CREATE INDEX audit_log_organization_action_idx ON audit_log (organization_id, action, occurred_at, id);
CREATE INDEX audit_log_organization_actor_idx ON audit_log (organization_id, actor_id, occurred_at, id);
