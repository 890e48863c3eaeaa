//! Statements that the connection prepares once and keeps, where diesel would not.
//!
//! diesel prepares a raw statement (`diesel::sql_query`) afresh every time it runs, since its
//! text could be anything: on PostgreSQL that is a round trip of its own to prepare it before the
//! round trip that runs it, a parse and a plan each time, and a message to close it after. The
//! statements of the delivery worker's every lease and record, of `/readyz` and of every write
//! that announces events are raw, and each of them has one text (or, on SQLite, one for each
//! count of the values it lists, a handful): [`kept`] marks such a statement for the
//! connection's statement cache, which keeps it by its text and its bind types, as it keeps
//! the `SELECT`s diesel's DSL writes.
//!
//! diesel never keeps an `UPDATE` of its DSL either (a changeset may leave out its `None`
//! fields, so that one type of statement has several texts): an update whose every value is
//! bound has one text, and the hot ones are kept too: SQLite's record of a delivery attempt, the
//! end of an endpoint's run of failures, and the updates of every sign-in, refresh, sign-out,
//! code exchange and change of a user's name.
//!
//! Nor does it keep an `INSERT` of a struct with an `Option` field, when a `None` means the
//! column's default (`DEFAULT` in the text, so that, again, one type has several texts): every
//! `Insertable` of the store says `treat_none_as_default_value = false`, so that a `None` is a
//! bound `NULL` and the insert has one text. No column the store inserts relies on a default.
//! `tests/prepared.rs` watches the connections: every statement of a second sign-in, refresh,
//! sign-out, code exchange, machine token and name change is one they keep.

use diesel::{
    backend::Backend,
    query_builder::{AstPass, Query, QueryFragment, QueryId},
    QueryResult,
};

/// A statement kept prepared by the connection (see the module). Only for a statement whose
/// text is one of a few: every text is kept, once per connection, for the connection's life.
///
/// On SQLite a statement is kept when its rows are loaded, not when it is only executed: diesel's
/// SQLite connection takes an executed statement by reference, and a reference does not pass on
/// [`QueryFragment::is_safe_to_cache_prepared`]. No SQLite statement has a round trip to save;
/// the lease's candidates, the one worth keeping there, are loaded.
#[derive(Debug, Clone)]
pub(crate) struct Kept<Q>(Q);

/// `statement`, kept prepared by the connection that runs it.
pub(crate) fn kept<Q>(statement: Q) -> Kept<Q> {
    Kept(statement)
}

impl<Q, DB> QueryFragment<DB> for Kept<Q>
where
    Q: QueryFragment<DB>,
    DB: Backend,
{
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, DB>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    /// Always: the text is one of a few (see [`Kept`]), whatever diesel assumes of raw SQL.
    fn is_safe_to_cache_prepared(&self, _backend: &DB) -> QueryResult<bool> {
        Ok(true)
    }
}

/// No type of its own identifies the statement: the cache keeps it by its text.
impl<Q> QueryId for Kept<Q> {
    type QueryId = ();

    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: Query> Query for Kept<Q> {
    type SqlType = Q::SqlType;
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    use diesel::{
        connection::{Instrumentation, InstrumentationEvent},
        sql_types::BigInt,
    };
    use diesel_async::{AsyncConnection, RunQueryDsl};

    use super::kept;

    /// Counts the statements the connection prepares for its cache.
    fn count_kept(prepared: &Arc<AtomicUsize>) -> impl Instrumentation {
        let prepared = Arc::clone(prepared);
        move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::CacheQuery { .. } = event {
                prepared.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// A number a statement reads.
    #[derive(diesel::QueryableByName)]
    struct Number {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }

    #[tokio::test]
    async fn a_kept_statement_is_prepared_once_per_sqlite_connection() {
        let mut conn = crate::sqlite::Conn::establish(":memory:")
            .await
            .expect("an in-memory SQLite database");
        let prepared = Arc::new(AtomicUsize::new(0));
        conn.set_instrumentation(count_kept(&prepared));
        for n in 0..3_i64 {
            let read: Vec<Number> =
                kept(diesel::sql_query("SELECT ?1 + 1 AS n").bind::<BigInt, _>(n))
                    .load(&mut conn)
                    .await
                    .expect("the kept statement runs");
            assert_eq!(read.iter().map(|r| r.n).collect::<Vec<_>>(), [n + 1]);
        }
        assert_eq!(
            AtomicUsize::load(&prepared, Ordering::Relaxed),
            1,
            "prepared the first time only"
        );
        for n in 0..3_i64 {
            let _: Vec<Number> = diesel::sql_query("SELECT ?1 + 2 AS n")
                .bind::<BigInt, _>(n)
                .load(&mut conn)
                .await
                .expect("the raw statement runs");
        }
        assert_eq!(
            AtomicUsize::load(&prepared, Ordering::Relaxed),
            1,
            "a raw statement is not kept"
        );
    }

    diesel::table! {
        counters (id) {
            id -> BigInt,
            n -> BigInt,
        }
    }

    #[tokio::test]
    async fn a_kept_update_is_prepared_once_per_sqlite_connection_and_a_plain_one_every_time() {
        use diesel::{ExpressionMethods, QueryDsl};
        use diesel_async::SimpleAsyncConnection;

        let mut conn = crate::sqlite::Conn::establish(":memory:")
            .await
            .expect("an in-memory SQLite database");
        conn.batch_execute("CREATE TABLE counters (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO counters VALUES (1, 0)")
            .await
            .expect("the table");
        let prepared = Arc::new(AtomicUsize::new(0));
        conn.set_instrumentation(count_kept(&prepared));
        for n in 1..=3_i64 {
            let ids: Vec<i64> = kept(
                diesel::update(counters::table.find(1_i64))
                    .set(counters::n.eq(n))
                    .returning(counters::id),
            )
            .load(&mut conn)
            .await
            .expect("the kept update runs");
            assert_eq!(ids, [1]);
        }
        assert_eq!(
            AtomicUsize::load(&prepared, Ordering::Relaxed),
            1,
            "prepared the first time only"
        );
        for n in 4..=6_i64 {
            diesel::update(counters::table.find(1_i64))
                .set(counters::n.eq(n))
                .execute(&mut conn)
                .await
                .expect("the update runs");
        }
        assert_eq!(
            AtomicUsize::load(&prepared, Ordering::Relaxed),
            1,
            "diesel keeps no update of its own"
        );
        let n: i64 = counters::table
            .find(1_i64)
            .select(counters::n)
            .get_result(&mut conn)
            .await
            .expect("the row");
        assert_eq!(n, 6, "every update was made");
    }

    #[tokio::test]
    async fn a_kept_statement_is_prepared_once_per_postgres_connection() {
        let url = gatehouse_testkit::postgres_admin_url().await;
        let mut conn = crate::pg::Conn::establish(&url)
            .await
            .expect("the test PostgreSQL server");
        let prepared = Arc::new(AtomicUsize::new(0));
        conn.set_instrumentation(count_kept(&prepared));
        for n in 0..3_i64 {
            kept(diesel::sql_query("SELECT $1 + 1").bind::<BigInt, _>(n))
                .execute(&mut conn)
                .await
                .expect("the kept statement runs");
        }
        assert_eq!(
            AtomicUsize::load(&prepared, Ordering::Relaxed),
            1,
            "prepared the first time only"
        );
        for n in 0..3_i64 {
            let read: Vec<Number> =
                kept(diesel::sql_query("SELECT $1 + 3 AS n").bind::<BigInt, _>(n))
                    .load(&mut conn)
                    .await
                    .expect("the kept statement's rows are read");
            assert_eq!(read.iter().map(|r| r.n).collect::<Vec<_>>(), [n + 3]);
        }
        assert_eq!(
            AtomicUsize::load(&prepared, Ordering::Relaxed),
            2,
            "loaded as executed: prepared the first time only"
        );
        for n in 0..3_i64 {
            diesel::sql_query("SELECT $1 + 2")
                .bind::<BigInt, _>(n)
                .execute(&mut conn)
                .await
                .expect("the raw statement runs");
        }
        assert_eq!(
            AtomicUsize::load(&prepared, Ordering::Relaxed),
            2,
            "a raw statement is not kept"
        );
    }
}
