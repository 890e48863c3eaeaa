use std::collections::HashMap;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        custom_permissions, AssignedRole, AuditRecord, CustomRole, NewEvent, OrganizationId,
        PermissionSet, Role, RoleDescription, RoleKey, RoleName, Slice,
    },
    ports::{RoleChange, RoleDeletion, RoleStore, ScimTokenRevocation, StoreError},
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    audit::insert_audit,
    backend::{
        schema::{invitations, memberships, organization_roles, service_accounts},
        Conn, Db, DbStore,
    },
    events::record_events,
    grants::revoke_scim_tokens,
};
use crate::{
    corrupt, db_error,
    types::{DbStrings, DbUuid},
};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = organization_roles, check_for_backend(Db), treat_none_as_default_value = false)]
struct RoleRow {
    organization_id: DbUuid,
    key: String,
    name: String,
    description: String,
    permissions: DbStrings,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

/// The permissions as stored: their dotted names.
fn stored(permissions: PermissionSet) -> DbStrings {
    DbStrings(
        permissions
            .iter()
            .map(|permission| permission.as_str().to_owned())
            .collect(),
    )
}

/// The permissions stored names give; a name this version does not know is ignored (a newer
/// Gatehouse may have written it), one of the owner's own is corrupt.
fn permissions_of(names: &DbStrings) -> Result<PermissionSet, StoreError> {
    let known = names
        .0
        .iter()
        .filter(|name| gatehouse_domain::model::Permission::parse(name).is_some())
        .map(String::as_str);
    custom_permissions(known).map_err(|_| corrupt("organization_roles.permissions"))
}

impl RoleRow {
    fn of(role: &CustomRole) -> Self {
        Self {
            organization_id: DbUuid(role.organization_id.as_uuid()),
            key: role.key.as_ref().to_owned(),
            name: role.name.as_ref().to_owned(),
            description: role.description.as_ref().to_owned(),
            permissions: stored(role.permissions),
            created_at: role.created_at,
            updated_at: role.updated_at,
        }
    }

    fn into_domain(self) -> Result<CustomRole, StoreError> {
        Ok(CustomRole {
            organization_id: self.organization_id.0.into(),
            key: RoleKey::parse(&self.key).map_err(|_| corrupt("organization_roles.key"))?,
            name: RoleName::parse(&self.name).map_err(|_| corrupt("organization_roles.name"))?,
            description: RoleDescription::parse(&self.description)
                .map_err(|_| corrupt("organization_roles.description"))?,
            permissions: permissions_of(&self.permissions)?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// What the custom roles that stored role names refer to grant, read in one query, and none
/// when every name is a built-in role's: the one place a stored role becomes an
/// [`AssignedRole`].
pub(super) struct CustomRoles(HashMap<(Uuid, String), PermissionSet>);

impl CustomRoles {
    /// The custom roles among `(organization, role name)` pairs.
    pub(super) async fn of(
        conn: &mut Conn,
        names: impl IntoIterator<Item = (DbUuid, &str)>,
    ) -> Result<Self, StoreError> {
        let custom: Vec<(DbUuid, String)> = names
            .into_iter()
            .filter(|(_, name)| name.parse::<Role>().is_err())
            .map(|(organization, name)| (organization, name.to_owned()))
            .collect();
        let mut roles = HashMap::new();
        if custom.is_empty() {
            return Ok(Self(roles));
        }
        let organizations: Vec<DbUuid> = custom.iter().map(|(o, _)| *o).collect();
        let keys: Vec<String> = custom.into_iter().map(|(_, key)| key).collect();
        let rows: Vec<(DbUuid, String, DbStrings)> = organization_roles::table
            .filter(organization_roles::organization_id.eq_any(organizations))
            .filter(organization_roles::key.eq_any(keys))
            .select((
                organization_roles::organization_id,
                organization_roles::key,
                organization_roles::permissions,
            ))
            .load(conn)
            .await
            .map_err(db_error)?;
        for (organization, key, permissions) in rows {
            roles.insert((organization.0, key), permissions_of(&permissions)?);
        }
        Ok(Self(roles))
    }

    /// The role a stored name gives in the organization. `column` names where it was read,
    /// for the error when it is no role's name. A custom role that is gone grants nothing: a
    /// grant that raced the role's deletion fails closed.
    pub(super) fn resolve(
        &self,
        organization: DbUuid,
        name: &str,
        column: &'static str,
    ) -> Result<AssignedRole, StoreError> {
        if let Ok(role) = name.parse::<Role>() {
            return Ok(AssignedRole::BuiltIn(role));
        }
        let key = RoleKey::parse(name).map_err(|_| corrupt(column))?;
        let permissions = self
            .0
            .get(&(organization.0, name.to_owned()))
            .copied()
            .unwrap_or_default();
        Ok(AssignedRole::Custom { key, permissions })
    }
}

#[async_trait]
impl RoleStore for DbStore {
    async fn create_role(
        &self,
        role: CustomRole,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            diesel::insert_into(organization_roles::table)
                .values(RoleRow::of(&role))
                .execute(conn)
                .await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await
        })
    }

    async fn roles(
        &self,
        organization_id: OrganizationId,
        slice: Slice,
    ) -> Result<(Vec<CustomRole>, u64), StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let organization = DbUuid(organization_id.as_uuid());
            let total: i64 = organization_roles::table
                .filter(organization_roles::organization_id.eq(organization))
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<RoleRow> = page_rows!(
                conn,
                slice,
                total,
                organization_roles::table
                    .filter(organization_roles::organization_id.eq(organization))
                    .select(RoleRow::as_select())
                    .into_boxed(),
                asc / desc(organization_roles::key)
            );
            let roles = rows
                .into_iter()
                .map(RoleRow::into_domain)
                .collect::<Result<Vec<_>, _>>()?;
            Ok((roles, u64::try_from(total).unwrap_or(0)))
        })
    }

    async fn role(
        &self,
        organization_id: OrganizationId,
        key: &RoleKey,
    ) -> Result<Option<CustomRole>, StoreError> {
        let key = key.as_ref().to_owned();
        in_read!(self, async |conn: &mut Conn| {
            organization_roles::table
                .filter(organization_roles::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(organization_roles::key.eq(key))
                .select(RoleRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(RoleRow::into_domain)
                .transpose()
        })
    }

    async fn update_role(
        &self,
        organization_id: OrganizationId,
        key: &RoleKey,
        change: RoleChange,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<Option<CustomRole>, StoreError> {
        let key = key.as_ref().to_owned();
        let row = in_write_tx!(self, async |conn: &mut Conn| {
            let role = organization_roles::table
                .filter(organization_roles::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(organization_roles::key.eq(key));
            let row: Option<RoleRow> = diesel::update(role)
                .set((
                    change
                        .name
                        .as_ref()
                        .map(|name| organization_roles::name.eq(name.as_ref().to_owned())),
                    change.description.as_ref().map(|description| {
                        organization_roles::description.eq(description.as_ref().to_owned())
                    }),
                    change
                        .permissions
                        .map(|permissions| organization_roles::permissions.eq(stored(permissions))),
                    organization_roles::updated_at.eq(at),
                ))
                .returning(RoleRow::as_returning())
                .get_result(conn)
                .await
                .optional()?;
            if row.is_some() {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
                // Its holders' SCIM tokens, when it no longer lets them manage single sign-on.
                revoke_scim_tokens(conn, &revoked).await?;
            }
            Ok(row)
        })?;
        row.map(RoleRow::into_domain).transpose()
    }

    async fn delete_role(
        &self,
        organization_id: OrganizationId,
        key: &RoleKey,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<RoleDeletion, StoreError> {
        let key = key.as_ref().to_owned();
        in_write_tx!(self, async |conn: &mut Conn| {
            let organization = DbUuid(organization_id.as_uuid());
            let role = || {
                organization_roles::table
                    .filter(organization_roles::organization_id.eq(organization))
                    .filter(organization_roles::key.eq(key.clone()))
            };
            // The role's row, locked for this transaction (PostgreSQL; a SQLite write
            // transaction holds the whole database): a concurrent grant of it waits, then finds
            // it gone.
            let found = diesel::update(role())
                .set(organization_roles::key.eq(organization_roles::key))
                .execute(conn)
                .await?;
            if found == 0 {
                return Ok(RoleDeletion::NotFound);
            }
            let members: i64 = memberships::table
                .filter(memberships::organization_id.eq(organization))
                .filter(memberships::role.eq(key.clone()))
                .count()
                .get_result(conn)
                .await?;
            let invited: i64 = invitations::table
                .filter(invitations::organization_id.eq(organization))
                .filter(invitations::role.eq(key.clone()))
                .filter(invitations::accepted_at.is_null())
                .filter(invitations::revoked_at.is_null())
                .count()
                .get_result(conn)
                .await?;
            let accounts: i64 = service_accounts::table
                .filter(service_accounts::organization_id.eq(organization))
                .filter(service_accounts::role.eq(key.clone()))
                .count()
                .get_result(conn)
                .await?;
            let holders = members + invited + accounts;
            if holders > 0 {
                return Ok(RoleDeletion::Held(holders.unsigned_abs()));
            }
            diesel::delete(role()).execute(conn).await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            Ok(RoleDeletion::Deleted)
        })
    }
}
