use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        ApiKey, ApiKeyId, AssignedRole, AuditRecord, NewEvent, OrganizationId, Page, PageRequest,
        ServiceAccount, ServiceAccountId, ServiceAccountName, MAX_SERVICE_ACCOUNTS,
    },
    ports::{ServiceAccountAccess, ServiceAccountStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    api_keys::keys_page,
    audit::insert_audit,
    backend::{
        schema::{api_keys, organizations, service_accounts},
        Conn, Db, DbStore,
    },
    custom_roles::CustomRoles,
    events::record_events,
    grants::give_role,
};
use crate::{corrupt, db_error, types::DbUuid};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = service_accounts, check_for_backend(Db), treat_none_as_default_value = false)]
struct ServiceAccountRow {
    id: DbUuid,
    organization_id: DbUuid,
    name: String,
    role: String,
    created_by: DbUuid,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl ServiceAccountRow {
    fn of(account: &ServiceAccount) -> Self {
        Self {
            id: DbUuid(account.id.as_uuid()),
            organization_id: DbUuid(account.organization_id.as_uuid()),
            name: account.name.as_ref().to_owned(),
            role: account.role.name().to_owned(),
            created_by: DbUuid(account.created_by.as_uuid()),
            created_at: account.created_at,
            updated_at: account.updated_at,
        }
    }

    fn into_domain(self, roles: &CustomRoles) -> Result<ServiceAccount, StoreError> {
        Ok(ServiceAccount {
            id: self.id.0.into(),
            organization_id: self.organization_id.0.into(),
            name: ServiceAccountName::parse(&self.name)
                .map_err(|_| corrupt("service_accounts.name"))?,
            role: roles.resolve(self.organization_id, &self.role, "service_accounts.role")?,
            created_by: self.created_by.0.into(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[async_trait]
impl ServiceAccountStore for DbStore {
    async fn create_service_account(
        &self,
        account: ServiceAccount,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let organization = DbUuid(account.organization_id.as_uuid());
            // The organization's row, locked for this transaction (PostgreSQL; a SQLite write
            // transaction holds the whole database): concurrent creations count one after the
            // other.
            diesel::update(organizations::table.find(organization))
                .set(organizations::id.eq(organizations::id))
                .execute(conn)
                .await?;
            let held: i64 = service_accounts::table
                .filter(service_accounts::organization_id.eq(organization))
                .count()
                .get_result(conn)
                .await?;
            if held >= i64::from(MAX_SERVICE_ACCOUNTS) {
                return Ok(false);
            }
            give_role(conn, organization, account.role.name()).await?;
            diesel::insert_into(service_accounts::table)
                .values(ServiceAccountRow::of(&account))
                .execute(conn)
                .await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            Ok(true)
        })
    }

    async fn service_accounts(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ServiceAccount>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let rows: Vec<ServiceAccountRow> = service_accounts::table
                .filter(service_accounts::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .order((
                    service_accounts::created_at.asc(),
                    service_accounts::id.asc(),
                ))
                .select(ServiceAccountRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?;
            let roles = CustomRoles::of(
                conn,
                rows.iter().map(|r| (r.organization_id, r.role.as_str())),
            )
            .await?;
            rows.into_iter()
                .map(|row| row.into_domain(&roles))
                .collect()
        })
    }

    async fn service_account(
        &self,
        id: ServiceAccountId,
    ) -> Result<Option<ServiceAccountAccess>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let row: Option<(ServiceAccountRow, String)> = service_accounts::table
                .inner_join(organizations::table)
                .filter(service_accounts::id.eq(DbUuid(id.as_uuid())))
                .filter(organizations::is_active.eq(true))
                .select((ServiceAccountRow::as_select(), organizations::plan))
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            let Some((row, plan)) = row else {
                return Ok(None);
            };
            let roles = CustomRoles::of(conn, [(row.organization_id, row.role.as_str())]).await?;
            Ok(Some(ServiceAccountAccess {
                account: row.into_domain(&roles)?,
                plan: plan.parse().map_err(|_| corrupt("organizations.plan"))?,
            }))
        })
    }

    async fn update_service_account(
        &self,
        organization_id: OrganizationId,
        id: ServiceAccountId,
        name: Option<ServiceAccountName>,
        role: Option<AssignedRole>,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<Option<ServiceAccount>, StoreError> {
        let updated: Option<ServiceAccountRow> = in_write_tx!(self, async |conn: &mut Conn| {
            if let Some(role) = &role {
                give_role(conn, DbUuid(organization_id.as_uuid()), role.name()).await?;
            }
            let account = service_accounts::table
                .filter(service_accounts::id.eq(DbUuid(id.as_uuid())))
                .filter(service_accounts::organization_id.eq(DbUuid(organization_id.as_uuid())));
            let row: Option<ServiceAccountRow> = diesel::update(account)
                .set((
                    name.as_ref()
                        .map(|name| service_accounts::name.eq(name.as_ref().to_owned())),
                    role.map(|role| service_accounts::role.eq(role.name().to_owned())),
                    service_accounts::updated_at.eq(at),
                ))
                .returning(ServiceAccountRow::as_returning())
                .get_result(conn)
                .await
                .optional()?;
            if row.is_some() {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok(row)
        })?;
        let Some(row) = updated else {
            return Ok(None);
        };
        // The role it now holds, as granted now (read after the change committed).
        let (organization, name) = (row.organization_id, row.role.clone());
        let roles = in_read!(self, async |conn: &mut Conn| {
            CustomRoles::of(conn, [(organization, name.as_str())]).await
        })?;
        row.into_domain(&roles).map(Some)
    }

    async fn delete_service_account(
        &self,
        organization_id: OrganizationId,
        id: ServiceAccountId,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let account = DbUuid(id.as_uuid());
            let deleted = diesel::delete(
                service_accounts::table
                    .filter(service_accounts::id.eq(account))
                    .filter(
                        service_accounts::organization_id.eq(DbUuid(organization_id.as_uuid())),
                    ),
            )
            .execute(conn)
            .await?
                == 1;
            if deleted {
                // Its keys stop with it, in this transaction (the foreign key cascades too).
                diesel::delete(api_keys::table.filter(api_keys::service_account_id.eq(account)))
                    .execute(conn)
                    .await?;
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok(deleted)
        })
    }

    async fn organization_api_keys(
        &self,
        organization_id: OrganizationId,
        page: PageRequest,
    ) -> Result<Page<ApiKey>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let organization = DbUuid(organization_id.as_uuid());
            keys_page(
                conn,
                || {
                    api_keys::table
                        .filter(api_keys::organization_id.eq(organization))
                        .into_boxed()
                },
                page,
            )
            .await
        })
    }

    async fn revoke_organization_api_key(
        &self,
        organization_id: OrganizationId,
        id: ApiKeyId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let key = api_keys::table
                .filter(api_keys::id.eq(DbUuid(id.as_uuid())))
                .filter(api_keys::organization_id.eq(DbUuid(organization_id.as_uuid())));
            let deleted = diesel::delete(key).execute(conn).await? == 1;
            if deleted {
                insert_audit(conn, audit).await?;
            }
            Ok(deleted)
        })
    }
}
