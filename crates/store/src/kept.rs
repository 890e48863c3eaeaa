//! Raw statements that the connection prepares once and keeps.
//!
//! diesel prepares a raw statement (`diesel::sql_query`) afresh every time it runs, since its
//! text could be anything: on PostgreSQL that is a round trip of its own to prepare it before the
//! round trip that runs it, a parse and a plan each time, and a message to close it after. The
//! statements of the delivery worker's every lease and record, of `/readyz` and of every write
//! that announces events are raw, and each of them has one text (or, on SQLite, one for each
//! count of the values it lists, a handful): [`kept`] marks such a statement for the
//! connection's statement cache, which keeps it by its text and its bind types, as it keeps
//! every statement diesel's DSL writes.

use diesel::{
    backend::Backend,
    query_builder::{AstPass, Query, QueryFragment, QueryId},
    QueryResult,
};

/// A raw statement kept prepared by the connection (see the module). Only for a statement whose
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
