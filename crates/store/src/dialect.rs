//! What the two backends do differently inside the shared queries, named in one small trait.
//!
//! The queries in `src/queries/` are written once and compiled twice, once in each backend's
//! module, against that backend's `schema`, `Conn` and `Db`. Where the SQL itself must differ
//! (row locks that skip locked rows, an upsert that ignores duplicates, a set-based update from
//! arrays), the shared code calls the backend's [`Dialect`] implementation, `Sql`, and nothing
//! else of it.

use diesel::QueryResult;
use gatehouse_domain::ports::AttemptRecord;
use time::OffsetDateTime;

use crate::types::DbUuid;

/// The statements a backend writes its own way.
pub(crate) trait Dialect {
    /// The backend's connection.
    type Conn;
    /// A new delivery, as the backend's schema inserts it.
    type NewDelivery<'a>;
    /// A new outbox event, as the backend's schema inserts it.
    type NewEvent;

    /// A search of members by a substring of their email or name (`search=`), through an index
    /// the backend keeps beside `users` for it: a condition on `memberships.user_id`, its SQL
    /// before and after the bound search phrase ([`search_phrase`]), that holds for every
    /// member the `LIKE` conditions match and few others. `None` where those conditions use an
    /// index as written (PostgreSQL's trigram indexes on `lower(email)` and `lower(full_name)`).
    const USER_SEARCH: Option<(&'static str, &'static str)>;

    /// Up to `limit` deliveries due at `now` by the domain's `DueRule` (of active endpoints),
    /// at most `per_endpoint` of each endpoint and none of the `busy` endpoints, as `(delivery,
    /// endpoint, organization)`: the candidates a lease picks from, in the rule's order (each
    /// organization's oldest due first, then each one's second, and so on). Nothing is locked;
    /// the lease locks what it picks with [`Dialect::lease_picked`]. Both backends run the
    /// statement `due::lease_candidates` builds from the rule (a window diesel's DSL does not
    /// write), and differ only in how they bind it and join each endpoint's deliveries.
    async fn lease_candidates(
        conn: &mut Self::Conn,
        now: OffsetDateTime,
        per_endpoint: i64,
        limit: i64,
        busy: &[DbUuid],
    ) -> QueryResult<Vec<(DbUuid, DbUuid, DbUuid)>>;

    /// Leases the picked deliveries `ids` that are still due at `now` by their own rows (the
    /// domain's `DueRule` as far as a delivery's row says: due and unleased) under `lease`
    /// until `until`, and returns them: locked for the caller's transaction, so that no
    /// concurrent leaser in any process takes them too; one that another leaser holds is left
    /// out, not waited for.
    async fn lease_picked(
        conn: &mut Self::Conn,
        ids: &[DbUuid],
        now: OffsetDateTime,
        lease: DbUuid,
        until: OffsetDateTime,
    ) -> QueryResult<Vec<DbUuid>>;

    /// Lets the caller's transaction commit without waiting for its write-ahead log to reach the
    /// disk. Only for the delivery machinery's own bookkeeping (dispatching events, leases,
    /// attempts), which a database crash may lose without losing a delivery: the event is
    /// dispatched, the delivery leased or sent again, and at-least-once still holds. Never for
    /// a change's own transaction, whose events must be as durable as the change.
    async fn bookkeeping(conn: &mut Self::Conn) -> QueryResult<()>;

    /// Makes the caller's transaction read by its indexes, in their order, whatever the
    /// planner's statistics say: for a purge's slice, which must cost what its few rows cost.
    /// Right after a purge deleted most of a table, PostgreSQL's statistics still count the
    /// rows that went, and it planned the search for events without deliveries as a hash join
    /// over the whole deliveries table (200 ms a slice, where the index takes 0.2 ms). SQLite
    /// plans these statements by their indexes already.
    async fn by_index(conn: &mut Self::Conn) -> QueryResult<()>;

    /// Begins a lease in the caller's transaction: makes it the only lease under way among
    /// every process on the database until it ends, so that a lease counts the attempts in
    /// flight at each endpoint (every replica's held leases) with no other lease taking more
    /// meanwhile, and the per-endpoint bound holds for the cluster; and makes it bookkeeping
    /// ([`Dialect::bookkeeping`]). PostgreSQL takes a transaction-level advisory lock and sets
    /// the transaction's settings in the same statement (one round trip; a lease is a few);
    /// SQLite's write transactions are one at a time already.
    async fn begin_lease(conn: &mut Self::Conn) -> QueryResult<()>;

    /// Tells every process on the database, when the caller's transaction commits, that it
    /// wrote outbox events (PostgreSQL `NOTIFY gatehouse_outbox`, delivered on commit and
    /// never before; several in one transaction come as one). SQLite has one process: its
    /// store's own signal is enough.
    async fn announce_outbox(conn: &mut Self::Conn) -> QueryResult<()>;

    /// Inserts outbox events, in the caller's transaction.
    async fn insert_events(conn: &mut Self::Conn, rows: Vec<Self::NewEvent>) -> QueryResult<()>;

    /// Inserts new deliveries, skipping (event, endpoint) pairs that exist.
    async fn insert_deliveries(
        conn: &mut Self::Conn,
        rows: Vec<Self::NewDelivery<'_>>,
    ) -> QueryResult<()>;

    /// Ends the run of failures of each endpoint whose attempts in the caller's batch all
    /// succeeded (one endpoint once each): its `consecutive_failures` becomes `ended`, and its
    /// last delivery the time given, its latest attempt's. The endpoints' rows are locked in
    /// the order of their ids, as every recorder in every process locks them.
    async fn end_runs_of_failures(
        conn: &mut Self::Conn,
        endpoints: &[(DbUuid, OffsetDateTime)],
        ended: i32,
    ) -> QueryResult<()>;

    /// Writes each attempt on its delivery if the lease holds: the delivery's endpoint, or
    /// `None` (the lease was lost or the endpoint deleted), in the records' order.
    async fn record_deliveries(
        conn: &mut Self::Conn,
        records: &[AttemptRecord],
    ) -> QueryResult<Vec<Option<DbUuid>>>;
}

/// The phrase an FTS5 trigram index is asked for (`MATCH '"term"'`, inner quotes doubled): the
/// rows holding the term as a substring, without case. `None` for a term of fewer than three
/// characters, which holds no trigram to look up.
pub(crate) fn search_phrase(term: &str) -> Option<String> {
    (term.chars().count() >= 3).then(|| format!("\"{}\"", term.replace('"', "\"\"")))
}

#[cfg(test)]
mod tests {
    use super::search_phrase;

    #[test]
    fn a_search_phrase_is_quoted_and_needs_three_characters() {
        assert_eq!(search_phrase("ada").as_deref(), Some("\"ada\""));
        assert_eq!(
            search_phrase("a\"b OR c").as_deref(),
            Some("\"a\"\"b OR c\"")
        );
        assert_eq!(search_phrase("ad"), None);
        assert_eq!(search_phrase("éé").as_deref(), None);
        assert_eq!(search_phrase("ééé").as_deref(), Some("\"ééé\""));
    }
}
