-- Mail goes out through an outbox (issue 51): a use case's mail is written in its change's
-- transaction and sent by the worker, never on a request's time. The body holds a one-time
-- link, so the row keeps it sealed under the server's secret key (bound to `id`), and the
-- worker deletes the row once the mail is sent or given up. A lease moves `next_attempt_at`
-- to the lease's end: a worker that dies leaves the mail due again then.
CREATE TABLE mail_outbox (
    id uuid PRIMARY KEY,
    sealed bytea NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL
);
CREATE INDEX mail_outbox_due_idx ON mail_outbox (next_attempt_at, id);
