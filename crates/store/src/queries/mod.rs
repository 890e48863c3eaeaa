//! The queries, written once. This module is compiled twice: as `pg::queries` and as
//! `sqlite::queries`, where `super::schema`, `super::Db`, `super::Conn`, `super::DbStore` and
//! the `write_tx!` macro are each backend's own. Queries are functions over a connection so
//! that they compose inside one transaction.

mod accounts;
mod api_keys;
mod applications;
mod branding_sso;
mod keys;
mod members;
mod memberships;
mod oauth;
mod organizations;
mod policies;
mod rows;
pub(super) use rows::NewDeliveryRow;
mod sessions;
mod webhooks;

use async_trait::async_trait;
use diesel_async::RunQueryDsl;
use gatehouse_domain::ports::{HealthStore, StoreError};

use super::DbStore;
use crate::{
    db_error,
    listing::{contains_pattern, lower},
    pool_error, Backend, Store,
};

impl DbStore {
    /// A pooled connection, or `Unavailable`.
    async fn conn(
        &self,
    ) -> Result<
        deadpool::managed::Object<
            diesel_async::pooled_connection::AsyncDieselConnectionManager<super::Conn>,
        >,
        StoreError,
    > {
        self.pool.get().await.map_err(pool_error)
    }
}

impl Store for DbStore {
    fn backend(&self) -> Backend {
        super::BACKEND
    }
}

#[async_trait]
impl HealthStore for DbStore {
    async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn().await?;
        diesel::sql_query("SELECT 1")
            .execute(&mut *conn)
            .await
            .map_err(db_error)?;
        Ok(())
    }
}
