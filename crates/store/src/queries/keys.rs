use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::ports::{SigningKeyStore, StoreError, StoredSigningKey};

use super::{
    backend::{schema::signing_keys, Conn, DbStore},
    rows::SigningKeyRow,
};
use crate::db_error;

#[async_trait]
impl SigningKeyStore for DbStore {
    async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            Ok(signing_keys::table
                .order(signing_keys::created_at.desc())
                .select(SigningKeyRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?
                .into_iter()
                .map(StoredSigningKey::from)
                .collect())
        })
    }

    async fn add_signing_key(&self, key: StoredSigningKey) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            diesel::insert_into(signing_keys::table)
                .values(SigningKeyRow::from(key))
                .execute(conn)
                .await
        })
        .map(drop)
    }
}
