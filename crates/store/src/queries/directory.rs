//! Directory sync: SCIM tokens, the directory's users and groups, the group-to-role map, and
//! the membership changes provisioning makes, written in one transaction.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        AssignedRole, AuditRecord, DirectoryEmail, DirectoryGroup, DirectoryGroupId, DirectoryName,
        DirectoryText, DirectoryUser, DirectoryUserId, GroupAttributes, GroupRoles, OrganizationId,
        Role, ScimToken, ScimTokenId, ScimTokenName, TokenHash, UserAttributes, MAX_SCIM_TOKENS,
    },
    ports::{
        DirectoryChange, DirectoryStore, DirectoryWrite, MemberEffect, ScimTokenAccess, StoreError,
    },
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{
    accounts::{insert_account_rows, reclaim, CreateError},
    audit::insert_audit,
    backend::{
        schema::{
            invitations, memberships, organizations, scim_group_members, scim_group_roles,
            scim_groups, scim_tokens, scim_users,
        },
        Conn, Db, DbStore,
    },
    custom_roles::CustomRoles,
    events::record_events,
    grants::{hold_role, revoke_scim_tokens},
    members::{end_membership, insert_invitation},
    rows::NewMembershipRow,
};
use crate::{corrupt, db_error, types::DbUuid};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = scim_tokens, check_for_backend(Db))]
struct TokenRow {
    id: DbUuid,
    organization_id: DbUuid,
    name: String,
    prefix: String,
    token_hash: String,
    created_by: DbUuid,
    created_at: OffsetDateTime,
    last_used_at: Option<OffsetDateTime>,
}

impl TokenRow {
    fn into_domain(self) -> Result<ScimToken, StoreError> {
        Ok(ScimToken {
            id: self.id.0.into(),
            organization_id: self.organization_id.0.into(),
            name: ScimTokenName::parse(&self.name).map_err(|_| corrupt("scim_tokens.name"))?,
            prefix: self.prefix,
            created_by: self.created_by.0.into(),
            created_at: self.created_at,
            last_used_at: self.last_used_at,
        })
    }
}

/// One address as the `emails` column keeps it.
#[derive(Serialize, Deserialize)]
struct EmailJson {
    value: String,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default)]
    primary: bool,
}

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = scim_users, check_for_backend(Db), treat_none_as_null = true)]
struct UserRow {
    id: DbUuid,
    organization_id: DbUuid,
    user_name: String,
    user_name_key: String,
    external_id: Option<String>,
    display_name: Option<String>,
    name_formatted: Option<String>,
    given_name: Option<String>,
    family_name: Option<String>,
    emails: String,
    active: bool,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

fn text(value: &DirectoryText) -> String {
    value.as_str().to_owned()
}

fn optional(value: Option<&DirectoryText>) -> Option<String> {
    value.map(text)
}

fn parse(value: &str, column: &'static str) -> Result<DirectoryText, StoreError> {
    DirectoryText::parse(value).map_err(|_| corrupt(column))
}

fn parse_optional(
    value: Option<String>,
    column: &'static str,
) -> Result<Option<DirectoryText>, StoreError> {
    value.as_deref().map(|v| parse(v, column)).transpose()
}

impl UserRow {
    fn of(user: &DirectoryUser) -> Self {
        let a = &user.attributes;
        let emails: Vec<EmailJson> = a
            .emails
            .iter()
            .map(|email| EmailJson {
                value: text(&email.value),
                kind: optional(email.kind.as_ref()),
                primary: email.primary,
            })
            .collect();
        Self {
            id: DbUuid(user.id.as_uuid()),
            organization_id: DbUuid(user.organization_id.as_uuid()),
            user_name: text(&a.user_name),
            user_name_key: a.user_name.as_str().to_lowercase(),
            external_id: optional(a.external_id.as_ref()),
            display_name: optional(a.display_name.as_ref()),
            name_formatted: optional(a.name.formatted.as_ref()),
            given_name: optional(a.name.given_name.as_ref()),
            family_name: optional(a.name.family_name.as_ref()),
            emails: serde_json::to_string(&emails).unwrap_or_else(|_| "[]".to_owned()),
            active: a.active,
            created_at: user.created_at,
            updated_at: user.updated_at,
        }
    }

    fn into_domain(self) -> Result<DirectoryUser, StoreError> {
        let emails: Vec<EmailJson> =
            serde_json::from_str(&self.emails).map_err(|_| corrupt("scim_users.emails"))?;
        let emails = emails
            .into_iter()
            .map(|email| {
                Ok(DirectoryEmail {
                    value: parse(&email.value, "scim_users.emails")?,
                    kind: parse_optional(email.kind, "scim_users.emails")?,
                    primary: email.primary,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok(DirectoryUser {
            id: self.id.0.into(),
            organization_id: self.organization_id.0.into(),
            attributes: UserAttributes {
                user_name: parse(&self.user_name, "scim_users.user_name")?,
                external_id: parse_optional(self.external_id, "scim_users.external_id")?,
                display_name: parse_optional(self.display_name, "scim_users.display_name")?,
                name: DirectoryName {
                    formatted: parse_optional(self.name_formatted, "scim_users.name_formatted")?,
                    given_name: parse_optional(self.given_name, "scim_users.given_name")?,
                    family_name: parse_optional(self.family_name, "scim_users.family_name")?,
                },
                emails,
                active: self.active,
            },
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = scim_groups, check_for_backend(Db), treat_none_as_null = true)]
struct GroupRow {
    id: DbUuid,
    organization_id: DbUuid,
    display_name: String,
    external_id: Option<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl GroupRow {
    fn of(group: &DirectoryGroup) -> Self {
        Self {
            id: DbUuid(group.id.as_uuid()),
            organization_id: DbUuid(group.organization_id.as_uuid()),
            display_name: text(&group.attributes.display_name),
            external_id: optional(group.attributes.external_id.as_ref()),
            created_at: group.created_at,
            updated_at: group.updated_at,
        }
    }

    fn into_domain(self, members: Vec<DirectoryUserId>) -> Result<DirectoryGroup, StoreError> {
        Ok(DirectoryGroup {
            id: self.id.0.into(),
            organization_id: self.organization_id.0.into(),
            attributes: GroupAttributes {
                display_name: parse(&self.display_name, "scim_groups.display_name")?,
                external_id: parse_optional(self.external_id, "scim_groups.external_id")?,
                members,
            }
            .normalized(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

/// The groups' rows with their members.
async fn load_groups(
    conn: &mut Conn,
    rows: Vec<GroupRow>,
) -> Result<Vec<DirectoryGroup>, StoreError> {
    let ids: Vec<DbUuid> = rows.iter().map(|row| row.id).collect();
    let members: Vec<(DbUuid, DbUuid)> = scim_group_members::table
        .filter(scim_group_members::group_id.eq_any(&ids))
        .select((scim_group_members::group_id, scim_group_members::user_id))
        .load(conn)
        .await
        .map_err(db_error)?;
    rows.into_iter()
        .map(|row| {
            let of: Vec<DirectoryUserId> = members
                .iter()
                .filter(|(group, _)| *group == row.id)
                .map(|(_, user)| user.0.into())
                .collect();
            row.into_domain(of)
        })
        .collect()
}

/// Why a directory write stopped: a record it changes is gone (nothing is written), or the
/// database refused.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error("a record the write changes is gone")]
    Gone,
    #[error(transparent)]
    Account(#[from] CreateError),
}

impl From<diesel::result::Error> for WriteError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Account(CreateError::Db(error))
    }
}

/// Holds the role the write gives (see [`hold_role`]); `Gone` when it is a custom role deleted
/// meanwhile.
async fn held(
    conn: &mut Conn,
    organization: DbUuid,
    role: &AssignedRole,
) -> Result<(), WriteError> {
    if hold_role(conn, organization, role.name()).await? {
        Ok(())
    } else {
        Err(WriteError::Gone)
    }
}

/// Replaces the group's members, all users of its organization; `Gone` when one is not.
async fn insert_members(conn: &mut Conn, group: &DirectoryGroup) -> Result<(), WriteError> {
    let organization = DbUuid(group.organization_id.as_uuid());
    let id = DbUuid(group.id.as_uuid());
    diesel::delete(scim_group_members::table.filter(scim_group_members::group_id.eq(id)))
        .execute(conn)
        .await?;
    let members: Vec<DbUuid> = group
        .attributes
        .members
        .iter()
        .map(|member| DbUuid(member.as_uuid()))
        .collect();
    if members.is_empty() {
        return Ok(());
    }
    let known: i64 = scim_users::table
        .filter(scim_users::organization_id.eq(organization))
        .filter(scim_users::id.eq_any(&members))
        .count()
        .get_result(conn)
        .await?;
    if usize::try_from(known).unwrap_or(0) != members.len() {
        return Err(WriteError::Gone);
    }
    // One row a statement: SQLite takes no multi-row insert of these through diesel.
    for user in members {
        diesel::insert_into(scim_group_members::table)
            .values((
                scim_group_members::organization_id.eq(organization),
                scim_group_members::group_id.eq(id),
                scim_group_members::user_id.eq(user),
            ))
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// The directory's records changed.
async fn apply_change(
    conn: &mut Conn,
    organization: DbUuid,
    change: &DirectoryChange,
) -> Result<(), WriteError> {
    match change {
        DirectoryChange::CreateUser(user) => {
            diesel::insert_into(scim_users::table)
                .values(UserRow::of(user))
                .execute(conn)
                .await?;
        }
        DirectoryChange::ReplaceUser(user) => {
            let row = UserRow::of(user);
            let updated = diesel::update(
                scim_users::table
                    .filter(scim_users::id.eq(row.id))
                    .filter(scim_users::organization_id.eq(organization)),
            )
            .set(&row)
            .execute(conn)
            .await?;
            if updated != 1 {
                return Err(WriteError::Gone);
            }
        }
        DirectoryChange::DeleteUser(id) => {
            let id = DbUuid(id.as_uuid());
            diesel::delete(scim_group_members::table.filter(scim_group_members::user_id.eq(id)))
                .execute(conn)
                .await?;
            let deleted = diesel::delete(
                scim_users::table
                    .filter(scim_users::id.eq(id))
                    .filter(scim_users::organization_id.eq(organization)),
            )
            .execute(conn)
            .await?;
            if deleted != 1 {
                return Err(WriteError::Gone);
            }
        }
        DirectoryChange::CreateGroup(group) => {
            diesel::insert_into(scim_groups::table)
                .values(GroupRow::of(group))
                .execute(conn)
                .await?;
            insert_members(conn, group).await?;
        }
        DirectoryChange::ReplaceGroup(group) => {
            let row = GroupRow::of(group);
            let updated = diesel::update(
                scim_groups::table
                    .filter(scim_groups::id.eq(row.id))
                    .filter(scim_groups::organization_id.eq(organization)),
            )
            .set(&row)
            .execute(conn)
            .await?;
            if updated != 1 {
                return Err(WriteError::Gone);
            }
            insert_members(conn, group).await?;
        }
        DirectoryChange::DeleteGroup(id) => {
            let id = DbUuid(id.as_uuid());
            diesel::delete(scim_group_members::table.filter(scim_group_members::group_id.eq(id)))
                .execute(conn)
                .await?;
            let deleted = diesel::delete(
                scim_groups::table
                    .filter(scim_groups::id.eq(id))
                    .filter(scim_groups::organization_id.eq(organization)),
            )
            .execute(conn)
            .await?;
            if deleted != 1 {
                return Err(WriteError::Gone);
            }
        }
        DirectoryChange::GroupRoles(roles) => {
            diesel::delete(
                scim_group_roles::table.filter(scim_group_roles::organization_id.eq(organization)),
            )
            .execute(conn)
            .await?;
            for (group, role) in roles.iter() {
                held(conn, organization, role).await?;
                diesel::insert_into(scim_group_roles::table)
                    .values((
                        scim_group_roles::organization_id.eq(organization),
                        scim_group_roles::group_name.eq(group.as_str()),
                        scim_group_roles::role.eq(role.name()),
                    ))
                    .execute(conn)
                    .await?;
            }
        }
    }
    Ok(())
}

/// The open invitations of the address in the organization.
macro_rules! open_invitations {
    ($organization:expr, $email:expr) => {
        invitations::table
            .filter(invitations::organization_id.eq($organization))
            .filter(invitations::email.eq($email))
            .filter(invitations::accepted_at.is_null())
            .filter(invitations::revoked_at.is_null())
    };
}

/// What provisioning changes in the membership; returns the events of accounts it made.
async fn apply_effect(
    conn: &mut Conn,
    organization: DbUuid,
    effect: &MemberEffect,
    at: OffsetDateTime,
) -> Result<Vec<gatehouse_domain::model::NewEvent>, WriteError> {
    let mut events = Vec::new();
    match effect {
        MemberEffect::Join {
            user_id,
            account,
            role,
        } => {
            held(conn, organization, role).await?;
            if let Some(account) = account {
                events = insert_account_rows(conn, account).await?;
            }
            // A membership that appeared meanwhile: the primary key refuses, all rolls back.
            diesel::insert_into(memberships::table)
                .values(NewMembershipRow {
                    organization_id: organization,
                    user_id: DbUuid(user_id.as_uuid()),
                    role: role.name(),
                    created_at: at,
                    updated_at: at,
                    invited_by: None,
                    invited_at: None,
                })
                .execute(conn)
                .await?;
        }
        MemberEffect::Reclaim(reclaiming) => {
            reclaim(conn, reclaiming, at).await?;
        }
        MemberEffect::Invite(invitation) => {
            held(conn, organization, invitation.role.role()).await?;
            diesel::update(open_invitations!(organization, invitation.email.as_ref()))
                .set(invitations::revoked_at.eq(Some(invitation.invited_at)))
                .execute(conn)
                .await?;
            insert_invitation(conn, invitation).await?;
        }
        MemberEffect::ChangeRole { user_id, role } => {
            held(conn, organization, role).await?;
            // Never the owner's (re-checked after waiting on a transfer's lock): a member who
            // became the owner meanwhile makes the whole write change nothing.
            let changed = diesel::update(
                memberships::table
                    .filter(memberships::organization_id.eq(organization))
                    .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
                    .filter(memberships::role.ne(Role::Owner.as_str())),
            )
            .set((
                memberships::role.eq(role.name()),
                memberships::updated_at.eq(at),
            ))
            .execute(conn)
            .await?;
            if changed != 1 {
                return Err(WriteError::Gone);
            }
        }
        MemberEffect::InvitationRole { email, role } => {
            held(conn, organization, role).await?;
            diesel::update(open_invitations!(organization, email.as_ref()))
                .set(invitations::role.eq(role.name()))
                .execute(conn)
                .await?;
        }
        MemberEffect::Remove { user_id } => {
            if !end_membership(conn, OrganizationId::from_uuid(organization.0), *user_id).await? {
                return Err(WriteError::Gone);
            }
        }
        MemberEffect::RevokeInvitations { email, at } => {
            diesel::update(open_invitations!(organization, email.as_ref()))
                .set(invitations::revoked_at.eq(Some(*at)))
                .execute(conn)
                .await?;
        }
        MemberEffect::RevokeScimToken(revocation) => {
            revoke_scim_tokens(conn, std::slice::from_ref(revocation)).await?;
        }
    }
    Ok(events)
}

/// The write's statements, in the caller's transaction.
async fn write(conn: &mut Conn, write: &DirectoryWrite) -> Result<(), WriteError> {
    let organization = DbUuid(write.organization_id.as_uuid());
    // The organization's row, locked for this transaction (PostgreSQL; a SQLite write
    // transaction holds the whole database): one organization's provisioning goes one request
    // after the other, and a gone organization provisions nothing.
    let live = diesel::update(
        organizations::table
            .find(organization)
            .filter(organizations::is_active.eq(true)),
    )
    .set(organizations::id.eq(organizations::id))
    .execute(conn)
    .await?;
    if live != 1 {
        return Err(WriteError::Gone);
    }
    for change in &write.changes {
        apply_change(conn, organization, change).await?;
    }
    let at = write.at;
    let mut events = Vec::new();
    for effect in &write.effects {
        events.extend(apply_effect(conn, organization, effect, at).await?);
    }
    // Recorded once the changes are made, so that a new member's events reach the
    // organization too.
    events.extend(write.events.iter().cloned());
    record_events(conn, events).await?;
    for record in &write.audit {
        insert_audit(conn, record.clone()).await?;
    }
    Ok(())
}

#[async_trait]
impl DirectoryStore for DbStore {
    async fn create_scim_token(
        &self,
        token: ScimToken,
        hash: TokenHash,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let organization = DbUuid(token.organization_id.as_uuid());
            diesel::update(organizations::table.find(organization))
                .set(organizations::id.eq(organizations::id))
                .execute(conn)
                .await?;
            let held: i64 = scim_tokens::table
                .filter(scim_tokens::organization_id.eq(organization))
                .count()
                .get_result(conn)
                .await?;
            if held >= i64::from(MAX_SCIM_TOKENS) {
                return Ok(false);
            }
            diesel::insert_into(scim_tokens::table)
                .values(TokenRow {
                    id: DbUuid(token.id.as_uuid()),
                    organization_id: organization,
                    name: token.name.as_ref().to_owned(),
                    prefix: token.prefix.clone(),
                    token_hash: hash.as_hex().to_owned(),
                    created_by: DbUuid(token.created_by.as_uuid()),
                    created_at: token.created_at,
                    last_used_at: None,
                })
                .execute(conn)
                .await?;
            insert_audit(conn, audit).await?;
            Ok(true)
        })
    }

    async fn scim_tokens(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ScimToken>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let rows: Vec<TokenRow> = scim_tokens::table
                .filter(scim_tokens::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .order((scim_tokens::created_at.asc(), scim_tokens::id.asc()))
                .select(TokenRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?;
            rows.into_iter().map(TokenRow::into_domain).collect()
        })
    }

    async fn revoke_scim_token(
        &self,
        organization_id: OrganizationId,
        id: ScimTokenId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let deleted = diesel::delete(
                scim_tokens::table
                    .filter(scim_tokens::id.eq(DbUuid(id.as_uuid())))
                    .filter(scim_tokens::organization_id.eq(DbUuid(organization_id.as_uuid()))),
            )
            .execute(conn)
            .await?
                == 1;
            if deleted {
                insert_audit(conn, audit).await?;
            }
            Ok(deleted)
        })
    }

    async fn use_scim_token(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<ScimTokenAccess>, StoreError> {
        let hash = hash.as_hex().to_owned();
        let found: Option<(TokenRow, String)> = in_read!(self, async |conn: &mut Conn| {
            scim_tokens::table
                .inner_join(organizations::table)
                .filter(scim_tokens::token_hash.eq(&hash))
                .filter(organizations::is_active.eq(true))
                .select((TokenRow::as_select(), organizations::plan))
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)
        })?;
        let Some((row, plan)) = found else {
            return Ok(None);
        };
        // Marked as used at most once a minute: provisioning bursts write nothing more.
        if row
            .last_used_at
            .is_none_or(|used| now - used >= time::Duration::MINUTE)
        {
            let id = row.id;
            in_write_tx!(self, async |conn: &mut Conn| {
                diesel::update(scim_tokens::table.find(id))
                    .set(scim_tokens::last_used_at.eq(Some(now)))
                    .execute(conn)
                    .await
                    .map(|_| ())
            })?;
        }
        Ok(Some(ScimTokenAccess {
            token: row.into_domain()?,
            plan: plan.parse().map_err(|_| corrupt("organizations.plan"))?,
        }))
    }

    async fn group_roles(&self, organization_id: OrganizationId) -> Result<GroupRoles, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let organization = DbUuid(organization_id.as_uuid());
            let rows: Vec<(String, String)> = scim_group_roles::table
                .filter(scim_group_roles::organization_id.eq(organization))
                .order(scim_group_roles::group_name.asc())
                .select((scim_group_roles::group_name, scim_group_roles::role))
                .load(conn)
                .await
                .map_err(db_error)?;
            let roles = CustomRoles::of(
                conn,
                rows.iter().map(|(_, role)| (organization, role.as_str())),
            )
            .await?;
            let entries = rows
                .iter()
                .map(|(group, role)| {
                    Ok((
                        parse(group, "scim_group_roles.group_name")?,
                        roles.resolve(organization, role, "scim_group_roles.role")?,
                    ))
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            GroupRoles::new(entries).map_err(|_| corrupt("scim_group_roles"))
        })
    }

    async fn directory_users(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<DirectoryUser>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let rows: Vec<UserRow> = scim_users::table
                .filter(scim_users::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .order((scim_users::created_at.asc(), scim_users::id.asc()))
                .select(UserRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?;
            rows.into_iter().map(UserRow::into_domain).collect()
        })
    }

    async fn directory_user(
        &self,
        organization_id: OrganizationId,
        id: DirectoryUserId,
    ) -> Result<Option<DirectoryUser>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let row: Option<UserRow> = scim_users::table
                .filter(scim_users::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(scim_users::id.eq(DbUuid(id.as_uuid())))
                .select(UserRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            row.map(UserRow::into_domain).transpose()
        })
    }

    async fn groups_of(
        &self,
        organization_id: OrganizationId,
        id: DirectoryUserId,
    ) -> Result<Vec<DirectoryText>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let names: Vec<String> = scim_group_members::table
                .inner_join(scim_groups::table)
                .filter(scim_group_members::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(scim_group_members::user_id.eq(DbUuid(id.as_uuid())))
                .select(scim_groups::display_name)
                .load(conn)
                .await
                .map_err(db_error)?;
            names
                .iter()
                .map(|name| parse(name, "scim_groups.display_name"))
                .collect()
        })
    }

    async fn directory_groups(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<DirectoryGroup>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let rows: Vec<GroupRow> = scim_groups::table
                .filter(scim_groups::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .order((scim_groups::created_at.asc(), scim_groups::id.asc()))
                .select(GroupRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?;
            load_groups(conn, rows).await
        })
    }

    async fn directory_group(
        &self,
        organization_id: OrganizationId,
        id: DirectoryGroupId,
    ) -> Result<Option<DirectoryGroup>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let rows: Vec<GroupRow> = scim_groups::table
                .filter(scim_groups::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(scim_groups::id.eq(DbUuid(id.as_uuid())))
                .select(GroupRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?;
            Ok(load_groups(conn, rows).await?.pop())
        })
    }

    async fn write_directory(&self, change: DirectoryWrite) -> Result<bool, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let written = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    write(conn, &change).await
                })
                .await;
                match written {
                    Ok(()) => Ok(true),
                    Err(WriteError::Gone) => Ok(false),
                    Err(WriteError::Account(CreateError::EmailTaken)) => Err(StoreError::Conflict),
                    Err(WriteError::Account(CreateError::Db(error))) => Err(db_error(error)),
                }
            })
            .await
    }
}
