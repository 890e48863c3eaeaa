use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        ApiKey, ApiKeyId, AuditRecord, KeyHolder, NewApiKey, Page, PageRequest, TokenHash, UserId,
        MAX_API_KEYS_PER_ORGANIZATION,
    },
    ports::{ApiKeyStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{api_keys, memberships, organizations, service_accounts},
        Conn, Db, DbStore,
    },
    rows::{ApiKeyRow, NewApiKeyRow},
};
use crate::{db_error, types::DbUuid};

/// One page of the keys `keys` selects (a filter of `api_keys`: a user's, an organization's),
/// newest first, with their total.
pub(super) async fn keys_page(
    conn: &mut Conn,
    keys: impl Fn() -> api_keys::BoxedQuery<'static, Db>,
    page: PageRequest,
) -> Result<Page<ApiKey>, StoreError> {
    let total: i64 = keys().count().get_result(conn).await.map_err(db_error)?;
    let rows: Vec<ApiKeyRow> = page_rows!(
        conn,
        page,
        total,
        keys().select(ApiKeyRow::as_select()),
        desc / asc(api_keys::created_at, api_keys::id)
    );
    let keys = rows
        .into_iter()
        .map(ApiKeyRow::into_domain)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Page::new(keys, u64::try_from(total).unwrap_or(0), page))
}

#[async_trait]
impl ApiKeyStore for DbStore {
    async fn create_api_key(
        &self,
        key: NewApiKey,
        audit: AuditRecord,
    ) -> Result<Option<ApiKey>, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let row = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    let organization = DbUuid(key.organization_id.as_uuid());
                    // The holder's row, locked for this transaction (PostgreSQL; a SQLite write
                    // transaction holds the whole database): concurrent creations for one holder
                    // in one organization count one after the other.
                    let held: i64 = match key.holder {
                        KeyHolder::User(user_id) => {
                            let user = DbUuid(user_id.as_uuid());
                            diesel::update(
                                memberships::table
                                    .filter(memberships::organization_id.eq(organization))
                                    .filter(memberships::user_id.eq(user)),
                            )
                            .set(memberships::role.eq(memberships::role))
                            .execute(conn)
                            .await?
                            .eq(&1)
                            .then_some(())
                            .ok_or_else(holder_gone)?;
                            api_keys::table
                                .filter(api_keys::organization_id.eq(organization))
                                .filter(api_keys::user_id.eq(user))
                                .count()
                                .get_result(conn)
                                .await?
                        }
                        KeyHolder::ServiceAccount(id) => {
                            let account = DbUuid(id.as_uuid());
                            diesel::update(
                                service_accounts::table
                                    .filter(service_accounts::id.eq(account))
                                    .filter(service_accounts::organization_id.eq(organization)),
                            )
                            .set(service_accounts::name.eq(service_accounts::name))
                            .execute(conn)
                            .await?
                            .eq(&1)
                            .then_some(())
                            .ok_or_else(holder_gone)?;
                            api_keys::table
                                .filter(api_keys::service_account_id.eq(account))
                                .count()
                                .get_result(conn)
                                .await?
                        }
                    };
                    if held >= i64::from(MAX_API_KEYS_PER_ORGANIZATION) {
                        return Ok(None);
                    }
                    insert_audit(conn, audit.clone()).await?;
                    diesel::insert_into(api_keys::table)
                        .values(NewApiKeyRow {
                            id: DbUuid(key.id.as_uuid()),
                            name: key.name.as_ref(),
                            prefix: &key.prefix,
                            key_hash: key.key_hash.as_hex(),
                            organization_id: DbUuid(key.organization_id.as_uuid()),
                            user_id: key.holder.user_id().map(|id| DbUuid(id.as_uuid())),
                            service_account_id: key
                                .holder
                                .service_account_id()
                                .map(|id| DbUuid(id.as_uuid())),
                            created_at: key.created_at,
                        })
                        .returning(ApiKeyRow::as_returning())
                        .get_result(conn)
                        .await
                        .map(Some)
                })
                .await
                .map_err(db_error)?;
                row.map(|row| row.into_domain()).transpose()
            })
            .await
    }

    async fn api_keys_of(
        &self,
        user_id: UserId,
        page: PageRequest,
    ) -> Result<Page<ApiKey>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            keys_page(
                conn,
                || {
                    api_keys::table
                        .filter(api_keys::user_id.eq(user))
                        .into_boxed()
                },
                page,
            )
            .await
        })
    }

    async fn api_key_of(
        &self,
        user_id: UserId,
        id: ApiKeyId,
    ) -> Result<Option<ApiKey>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            api_keys::table
                .filter(api_keys::id.eq(DbUuid(id.as_uuid())))
                .filter(api_keys::user_id.eq(DbUuid(user_id.as_uuid())))
                .select(ApiKeyRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(ApiKeyRow::into_domain)
                .transpose()
        })
    }

    async fn delete_api_key(
        &self,
        user_id: UserId,
        id: ApiKeyId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let own = api_keys::table
                .filter(api_keys::id.eq(DbUuid(id.as_uuid())))
                .filter(api_keys::user_id.eq(DbUuid(user_id.as_uuid())));
            let deleted = diesel::delete(own).execute(conn).await? == 1;
            if deleted {
                insert_audit(conn, audit).await?;
            }
            Ok(deleted)
        })
    }

    async fn use_api_key(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<ApiKey>, StoreError> {
        let hash = hash.clone();
        in_read!(self, async |conn: &mut Conn| {
            let row = api_keys::table
                .inner_join(organizations::table)
                .filter(api_keys::key_hash.eq(hash.as_hex()))
                .filter(organizations::is_active.eq(true))
                .select(ApiKeyRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            let Some(row) = row else { return Ok(None) };
            // Last use is a hint for the owner, not worth a write on every request: once a minute.
            if row
                .last_used_at
                .is_none_or(|used| now - used > time::Duration::minutes(1))
            {
                diesel::update(api_keys::table.find(row.id))
                    .set(api_keys::last_used_at.eq(now))
                    .execute(conn)
                    .await
                    .map_err(db_error)?;
            }
            row.into_domain().map(Some)
        })
    }
}

/// The key's holder left the organization, or its service account was deleted, while the key
/// was being created: [`StoreError::Gone`](gatehouse_domain::ports::StoreError::Gone).
fn holder_gone() -> diesel::result::Error {
    crate::refused(
        diesel::result::DatabaseErrorKind::ForeignKeyViolation,
        "the key's holder is gone",
    )
}
