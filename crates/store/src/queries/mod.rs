//! The queries, written once. This module is compiled twice: as `pg::queries` and as
//! `sqlite::queries`. Every query file reaches the backend it is compiled into by one path,
//! `super::backend` (this module's name for its parent, `pg` or `sqlite`): there
//! `backend::schema` (one description, `src/schema.rs`, with the backend's column types),
//! `backend::Db`, `backend::Conn`, `backend::DbStore` and the `write_tx!` macro are each
//! backend's own, and `backend::Sql` is its `Dialect`: the statements the backends write
//! differently. Queries are functions over a connection so that they compose inside one
//! transaction.

/// The rows of `page` of a listing of `total` matching rows: none past the end (see
/// `listing::past_the_end`), else the page's window (`listing::window`) of `$query` (boxed, its
/// columns selected) in the listing's order, `$dir` on each of `$columns` (`$reverse` for a
/// window read from the end), turned back into the listing's order.
macro_rules! page_rows {
    ($conn:expr, $page:expr, $total:expr, $query:expr, $dir:ident / $reverse:ident ($($column:expr),+ $(,)?)) => {{
        let (page, total) = ($page, $total);
        if $crate::listing::past_the_end(page, total) {
            Vec::new()
        } else {
            let window = $crate::listing::window(page.offset(), page.limit(), total);
            let query = $query;
            let query = if window.reversed {
                query.order(($($column.$reverse(),)+))
            } else {
                query.order(($($column.$dir(),)+))
            };
            let rows = query
                .limit(window.limit)
                .offset(window.offset)
                .load($conn)
                .await
                .map_err($crate::db_error)?;
            window.in_order(rows)
        }
    }};
}

mod account_tokens;
mod accounts;
mod api_keys;
mod applications;
mod audit;
mod branding_sso;
mod custom_roles;
mod directory;
mod domains;
mod events;
mod grants;
mod keys;
mod mail;
mod members;
mod memberships;
mod mfa;
mod oauth;
mod operations;
mod organizations;
mod policies;
mod rows;
mod saml;
mod service_accounts;
pub(super) use events::NewEventRow;
pub(super) use rows::NewDeliveryRow;
mod sessions;
mod webhooks;

use async_trait::async_trait;
use diesel_async::RunQueryDsl;
use gatehouse_domain::ports::{HealthStore, PoolUse, StoreError};

/// The backend module this copy of the queries is compiled into: `pg` or `sqlite`.
use super as backend;

use crate::{
    db_error,
    listing::{contains_pattern, lower},
    Backend, Store,
};
use backend::{Conn, DbStore};

impl Store for DbStore {
    fn backend(&self) -> Backend {
        backend::BACKEND
    }

    fn outbox_committed(&self) -> std::sync::Arc<tokio::sync::Notify> {
        DbStore::outbox_committed(self)
    }

    fn mail_queued(&self) -> std::sync::Arc<tokio::sync::Notify> {
        DbStore::mail_queued(self)
    }
}

#[async_trait]
impl HealthStore for DbStore {
    async fn ping(&self) -> Result<(), StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            crate::kept::kept(diesel::sql_query("SELECT 1"))
                .execute(conn)
                .await
                .map_err(db_error)?;
            Ok(())
        })
    }

    fn pools(&self) -> Vec<PoolUse> {
        self.pool_use()
    }
}
