//! Directory sync: SCIM tokens, the directory's users and groups, the group-to-role map, and
//! the membership changes provisioning makes, written in one transaction.

use std::collections::{BTreeMap, BTreeSet};

use async_trait::async_trait;
use diesel::{
    prelude::*,
    sql_types::{Bool, Text},
};
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        AssignedRole, AuditRecord, Comparison, DirectoryAttribute, DirectoryCursor, DirectoryEmail,
        DirectoryFilter, DirectoryGroup, DirectoryGroupId, DirectoryName, DirectoryPage,
        DirectoryText, DirectoryUser, DirectoryUserId, GroupAttributes, GroupRoles, OrganizationId,
        ScimToken, ScimTokenId, ScimTokenName, Slice, TextMatch, TokenHash, UserAttributes,
        MAX_SCIM_TOKENS,
    },
    ports::{
        DirectoryChange, DirectoryStore, DirectoryWrite, GroupMembers, GroupOfUser, MemberEffect,
        ScimTokenAccess, StoreError,
    },
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use super::{
    accounts::{insert_account_rows, reclaim, CreateError},
    audit::insert_audit,
    backend::{
        self,
        schema::{
            invitations, organizations, scim_group_members, scim_group_roles, scim_groups,
            scim_tokens, scim_user_emails, scim_users,
        },
        Conn, Db, DbStore,
    },
    contains_pattern,
    custom_roles::CustomRoles,
    events::record_events,
    grants::{hold_role, revoke_scim_tokens},
    mail::queue_mail,
    members::{add_membership, end_membership, insert_invitation, open_invitations, set_role},
};
use crate::{corrupt, db_error, types::DbUuid};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = scim_tokens, check_for_backend(Db), treat_none_as_default_value = false)]
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
#[diesel(table_name = scim_users, check_for_backend(Db), treat_none_as_null = true, treat_none_as_default_value = false)]
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
    display_name_key: Option<String>,
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
            display_name_key: a
                .display_name
                .as_ref()
                .map(|name| DirectoryAttribute::DisplayName.key(name.as_str())),
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
#[diesel(table_name = scim_groups, check_for_backend(Db), treat_none_as_null = true, treat_none_as_default_value = false)]
struct GroupRow {
    id: DbUuid,
    organization_id: DbUuid,
    display_name: String,
    external_id: Option<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    display_name_key: String,
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
            display_name_key: DirectoryAttribute::DisplayName
                .key(group.attributes.display_name.as_str()),
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

/// The groups' rows with their members (read for these groups only), or with none.
async fn load_groups(
    conn: &mut Conn,
    rows: Vec<GroupRow>,
    members: GroupMembers,
) -> Result<Vec<DirectoryGroup>, StoreError> {
    let mut of: BTreeMap<uuid::Uuid, Vec<DirectoryUserId>> = BTreeMap::new();
    if members == GroupMembers::Read && !rows.is_empty() {
        let ids: Vec<DbUuid> = rows.iter().map(|row| row.id).collect();
        for chunk in ids.chunks(IDS_A_STATEMENT) {
            let found: Vec<(DbUuid, DbUuid)> = scim_group_members::table
                .filter(scim_group_members::group_id.eq_any(chunk))
                .select((scim_group_members::group_id, scim_group_members::user_id))
                .load(conn)
                .await
                .map_err(db_error)?;
            for (group, user) in found {
                of.entry(group.0).or_default().push(user.0.into());
            }
        }
    }
    rows.into_iter()
        .map(|row| {
            let members = of.remove(&row.id.0).unwrap_or_default();
            row.into_domain(members)
        })
        .collect()
}

/// The most ids one statement binds (`IN (...)`): far below either backend's limit.
const IDS_A_STATEMENT: usize = 1000;

/// The smallest text after every text that starts with `prefix`, in code point order (what
/// SQLite's `BINARY` and PostgreSQL's `"C"` collations compare by): `prefix` with its last
/// character (that has one) followed by the next. `None` when every character is the last
/// (then every text from `prefix` on starts with it).
fn after_prefix(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = (u32::from(last) + 1..=u32::from(char::MAX)).find_map(char::from_u32);
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

diesel::define_sql_function! {
    /// SQL `replace(text, from, to)`: both backends have it, and both compare with case.
    fn replace(text: Text, from: Text, to: Text) -> Text;
}

/// A filter's condition on one table's rows.
type Condition<T> = Box<dyn BoxableExpression<T, Db, SqlType = Bool>>;

/// A constant condition.
fn constant<T>(value: bool) -> Condition<T> {
    Box::new(diesel::dsl::sql::<Bool>(if value {
        "1 = 1"
    } else {
        "1 = 0"
    }))
}

/// The condition that `$column` (text, possibly null: a null compares as nothing) compares so
/// with the comparison's operand: `=`; a range of the key order for a prefix (an index
/// range); `LIKE` for a part, and for a column that compares with case (`$exact`), the same
/// `replace` test too (SQLite's `LIKE` ignores ASCII case; keys are lowercase already).
macro_rules! text_matches {
    ($column:expr, $comparison:expr, $exact:expr) => {{
        let column = $column;
        let operand = $comparison.operand().to_owned();
        let condition: Box<dyn BoxableExpression<_, Db, SqlType = Bool>> = match $comparison.how() {
            TextMatch::Equals => Box::new(column.eq(operand)),
            TextMatch::StartsWith => match after_prefix(&operand) {
                Some(end) => Box::new(column.ge(operand).and(column.lt(end))),
                None => Box::new(column.ge(operand)),
            },
            TextMatch::Contains if $exact => Box::new(
                column
                    .like(contains_pattern(&operand))
                    .escape('\\')
                    .and(replace(column, operand, "").ne(column)),
            ),
            TextMatch::Contains => Box::new(column.like(contains_pattern(&operand)).escape('\\')),
        };
        condition
    }};
}

/// The rows of `$table` after the cursor in the order (`created_at`, `id`): `created_at >= t`
/// bounds the index range, the rest leaves out what was read.
macro_rules! after_cursor {
    ($table:ident, $after:expr) => {{
        let after: DirectoryCursor = $after;
        $table::created_at.ge(after.created_at).and(
            $table::created_at
                .gt(after.created_at)
                .or($table::id.gt(DbUuid(after.id))),
        )
    }};
}

/// Whether the filter selects a few resources by an index (an `eq` or an id in every branch):
/// then SQLite is to find them by that index and sort them, not walk the organization's
/// resources in order (without statistics, its planner prefers the walk that needs no sort;
/// PostgreSQL weighs both with its own). See [`sorted_page_order`].
fn selective(filter: &DirectoryFilter) -> bool {
    match filter {
        DirectoryFilter::Id(_) | DirectoryFilter::Nothing => true,
        DirectoryFilter::Compare(comparison) => comparison.how() == TextMatch::Equals,
        DirectoryFilter::And(a, b) => selective(a) || selective(b),
        DirectoryFilter::Or(a, b) => selective(a) && selective(b),
        DirectoryFilter::All | DirectoryFilter::Present(_) => false,
    }
}

/// At most this many rows a page's query sorts, rather than walk the organization in order.
const SORTED_AT_MOST: i64 = 2000;

/// Whether a page of the `total` resources the filter selects is ordered by expressions
/// (`+created_at`, `+id`: SQLite's way to say that no index is to give the order) rather than
/// by the columns: on SQLite, for a selective filter or few matches (a `co` that matches a
/// handful is found through its key's index, not by reading every row of the organization).
fn sorted_page_order(filter: &DirectoryFilter, total: i64) -> bool {
    backend::BACKEND == crate::Backend::Sqlite && (selective(filter) || total <= SORTED_AT_MOST)
}

/// The rows of one page, `$query` (a closure making the boxed query) ordered by `$table`'s
/// `created_at` and `id`, or by the same as expressions where [`sorted_page_order`] says so.
macro_rules! directory_page {
    ($conn:expr, $slice:expr, $total:expr, $filter:expr, $query:expr, $table:literal, $created:expr, $id:expr) => {{
        if sorted_page_order($filter, $total) {
            page_rows!(
                $conn,
                $slice,
                $total,
                $query(),
                asc / desc(
                    diesel::dsl::sql::<Text>(concat!("+\"", $table, "\".\"created_at\"")),
                    diesel::dsl::sql::<Text>(concat!("+\"", $table, "\".\"id\""))
                )
            )
        } else {
            page_rows!($conn, $slice, $total, $query(), asc / desc($created, $id))
        }
    }};
}

/// A directory filter as a condition on the organization's users.
fn user_condition(organization: DbUuid, filter: &DirectoryFilter) -> Condition<scim_users::table> {
    use DirectoryAttribute as A;
    let emails = || {
        scim_user_emails::table
            .filter(scim_user_emails::organization_id.eq(organization))
            .into_boxed()
    };
    match filter {
        DirectoryFilter::All | DirectoryFilter::Present(A::UserName) => constant(true),
        DirectoryFilter::Nothing => constant(false),
        DirectoryFilter::Id(id) => Box::new(scim_users::id.eq(DbUuid(*id))),
        DirectoryFilter::Present(A::ExternalId) => Box::new(scim_users::external_id.is_not_null()),
        DirectoryFilter::Present(A::DisplayName) => {
            Box::new(scim_users::display_name_key.is_not_null())
        }
        DirectoryFilter::Present(A::Email) => {
            Box::new(scim_users::id.eq_any(emails().select(scim_user_emails::user_id)))
        }
        DirectoryFilter::Compare(comparison) => user_comparison(comparison, emails()),
        DirectoryFilter::And(a, b) => {
            Box::new(user_condition(organization, a).and(user_condition(organization, b)))
        }
        DirectoryFilter::Or(a, b) => {
            Box::new(user_condition(organization, a).or(user_condition(organization, b)))
        }
    }
}

/// One comparison on users; `emails` the organization's addresses.
fn user_comparison(
    comparison: &Comparison,
    emails: scim_user_emails::BoxedQuery<'static, Db>,
) -> Condition<scim_users::table> {
    match comparison.attribute() {
        DirectoryAttribute::UserName => {
            text_matches!(scim_users::user_name_key, comparison, false)
        }
        DirectoryAttribute::ExternalId => {
            text_matches!(scim_users::external_id.assume_not_null(), comparison, true)
        }
        DirectoryAttribute::DisplayName => text_matches!(
            scim_users::display_name_key.assume_not_null(),
            comparison,
            false
        ),
        DirectoryAttribute::Email => {
            let matching: Condition<scim_user_emails::table> =
                text_matches!(scim_user_emails::value_key, comparison, false);
            Box::new(
                scim_users::id.eq_any(emails.filter(matching).select(scim_user_emails::user_id)),
            )
        }
    }
}

/// A directory filter as a condition on the organization's groups: a user's attribute
/// (`userName`, addresses) is no group's.
fn group_condition(filter: &DirectoryFilter) -> Condition<scim_groups::table> {
    use DirectoryAttribute as A;
    match filter {
        DirectoryFilter::All | DirectoryFilter::Present(A::DisplayName) => constant(true),
        DirectoryFilter::Nothing | DirectoryFilter::Present(A::UserName | A::Email) => {
            constant(false)
        }
        DirectoryFilter::Id(id) => Box::new(scim_groups::id.eq(DbUuid(*id))),
        DirectoryFilter::Present(A::ExternalId) => Box::new(scim_groups::external_id.is_not_null()),
        DirectoryFilter::Compare(comparison) => match comparison.attribute() {
            A::UserName | A::Email => constant(false),
            A::ExternalId => {
                text_matches!(scim_groups::external_id.assume_not_null(), comparison, true)
            }
            A::DisplayName => text_matches!(scim_groups::display_name_key, comparison, false),
        },
        DirectoryFilter::And(a, b) => Box::new(group_condition(a).and(group_condition(b))),
        DirectoryFilter::Or(a, b) => Box::new(group_condition(a).or(group_condition(b))),
    }
}

/// Replaces the user's rows of addresses (lowercase, each once).
async fn insert_emails(conn: &mut Conn, user: &DirectoryUser) -> Result<(), WriteError> {
    let id = DbUuid(user.id.as_uuid());
    diesel::delete(scim_user_emails::table.filter(scim_user_emails::user_id.eq(id)))
        .execute(conn)
        .await?;
    let keys: BTreeSet<String> = user
        .attributes
        .emails
        .iter()
        .map(|email| DirectoryAttribute::Email.key(email.value.as_str()))
        .collect();
    for key in keys {
        diesel::insert_into(scim_user_emails::table)
            .values((
                scim_user_emails::organization_id.eq(DbUuid(user.organization_id.as_uuid())),
                scim_user_emails::user_id.eq(id),
                scim_user_emails::value_key.eq(key),
            ))
            .execute(conn)
            .await?;
    }
    Ok(())
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
            insert_emails(conn, user).await?;
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
            insert_emails(conn, user).await?;
        }
        DirectoryChange::DeleteUser(id) => {
            let id = DbUuid(id.as_uuid());
            diesel::delete(scim_group_members::table.filter(scim_group_members::user_id.eq(id)))
                .execute(conn)
                .await?;
            diesel::delete(scim_user_emails::table.filter(scim_user_emails::user_id.eq(id)))
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
            add_membership(conn, organization, *user_id, role.name(), at, None).await?;
        }
        MemberEffect::Reclaim(reclaiming) => {
            reclaim(conn, reclaiming, at).await?;
        }
        MemberEffect::Invite(invitation) => {
            held(conn, organization, invitation.role.role()).await?;
            insert_invitation(conn, invitation).await?;
        }
        MemberEffect::ChangeRole { user_id, role } => {
            held(conn, organization, role).await?;
            // Never the owner's: a member who became the owner meanwhile makes the whole write
            // change nothing.
            if !set_role(conn, organization, *user_id, role, at).await? {
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
    queue_mail(conn, &write.mails, at).await?;
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

    async fn directory_users_page(
        &self,
        organization_id: OrganizationId,
        filter: DirectoryFilter,
        slice: Slice,
    ) -> Result<DirectoryPage<DirectoryUser>, StoreError> {
        let organization = DbUuid(organization_id.as_uuid());
        // Its count grows with the directory: off the caller's thread.
        in_read!(self, long, async |conn: &mut Conn| {
            let total: i64 = scim_users::table
                .filter(scim_users::organization_id.eq(organization))
                .filter(user_condition(organization, &filter))
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let query = || {
                scim_users::table
                    .filter(scim_users::organization_id.eq(organization))
                    .filter(user_condition(organization, &filter))
                    .into_boxed()
                    .select(UserRow::as_select())
            };
            let rows: Vec<UserRow> = directory_page!(
                conn,
                slice,
                total,
                &filter,
                query,
                "scim_users",
                scim_users::created_at,
                scim_users::id
            );
            Ok(DirectoryPage {
                resources: rows
                    .into_iter()
                    .map(UserRow::into_domain)
                    .collect::<Result<_, _>>()?,
                total: u64::try_from(total).unwrap_or(0),
            })
        })
    }

    async fn directory_users_after(
        &self,
        organization_id: OrganizationId,
        after: Option<DirectoryCursor>,
        limit: u32,
    ) -> Result<Vec<DirectoryUser>, StoreError> {
        let organization = DbUuid(organization_id.as_uuid());
        in_read!(self, async |conn: &mut Conn| {
            let mut query = scim_users::table
                .filter(scim_users::organization_id.eq(organization))
                .into_boxed();
            if let Some(after) = after {
                query = query.filter(after_cursor!(scim_users, after));
            }
            let rows: Vec<UserRow> = query
                .order((scim_users::created_at.asc(), scim_users::id.asc()))
                .limit(i64::from(limit))
                .select(UserRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?;
            rows.into_iter().map(UserRow::into_domain).collect()
        })
    }

    async fn directory_users_with_ids(
        &self,
        organization_id: OrganizationId,
        ids: Vec<DirectoryUserId>,
    ) -> Result<Vec<DirectoryUser>, StoreError> {
        let organization = DbUuid(organization_id.as_uuid());
        let ids: Vec<DbUuid> = ids.iter().map(|id| DbUuid(id.as_uuid())).collect();
        in_read!(self, async |conn: &mut Conn| {
            let mut users = Vec::new();
            for chunk in ids.chunks(IDS_A_STATEMENT) {
                let rows: Vec<UserRow> = scim_users::table
                    .filter(scim_users::organization_id.eq(organization))
                    .filter(scim_users::id.eq_any(chunk))
                    .select(UserRow::as_select())
                    .load(conn)
                    .await
                    .map_err(db_error)?;
                for row in rows {
                    users.push(row.into_domain()?);
                }
            }
            Ok(users)
        })
    }

    async fn groups_of_users(
        &self,
        organization_id: OrganizationId,
        ids: Vec<DirectoryUserId>,
    ) -> Result<Vec<GroupOfUser>, StoreError> {
        let organization = DbUuid(organization_id.as_uuid());
        let ids: Vec<DbUuid> = ids.iter().map(|id| DbUuid(id.as_uuid())).collect();
        in_read!(self, async |conn: &mut Conn| {
            let mut groups = Vec::new();
            for chunk in ids.chunks(IDS_A_STATEMENT) {
                let rows: Vec<(DbUuid, DbUuid, String)> = scim_group_members::table
                    .inner_join(scim_groups::table)
                    .filter(scim_group_members::organization_id.eq(organization))
                    .filter(scim_group_members::user_id.eq_any(chunk))
                    .select((
                        scim_group_members::user_id,
                        scim_group_members::group_id,
                        scim_groups::display_name,
                    ))
                    .load(conn)
                    .await
                    .map_err(db_error)?;
                for (user, group, name) in rows {
                    groups.push(GroupOfUser {
                        user_id: user.0.into(),
                        group_id: group.0.into(),
                        display_name: parse(&name, "scim_groups.display_name")?,
                    });
                }
            }
            Ok(groups)
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

    async fn directory_groups_page(
        &self,
        organization_id: OrganizationId,
        filter: DirectoryFilter,
        slice: Slice,
        members: GroupMembers,
    ) -> Result<DirectoryPage<DirectoryGroup>, StoreError> {
        let organization = DbUuid(organization_id.as_uuid());
        // Its count grows with the directory: off the caller's thread.
        in_read!(self, long, async |conn: &mut Conn| {
            let total: i64 = scim_groups::table
                .filter(scim_groups::organization_id.eq(organization))
                .filter(group_condition(&filter))
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let query = || {
                scim_groups::table
                    .filter(scim_groups::organization_id.eq(organization))
                    .filter(group_condition(&filter))
                    .into_boxed()
                    .select(GroupRow::as_select())
            };
            let rows: Vec<GroupRow> = directory_page!(
                conn,
                slice,
                total,
                &filter,
                query,
                "scim_groups",
                scim_groups::created_at,
                scim_groups::id
            );
            Ok(DirectoryPage {
                resources: load_groups(conn, rows, members).await?,
                total: u64::try_from(total).unwrap_or(0),
            })
        })
    }

    async fn directory_groups_after(
        &self,
        organization_id: OrganizationId,
        after: Option<DirectoryCursor>,
        limit: u32,
        members: GroupMembers,
    ) -> Result<Vec<DirectoryGroup>, StoreError> {
        let organization = DbUuid(organization_id.as_uuid());
        in_read!(self, async |conn: &mut Conn| {
            let mut query = scim_groups::table
                .filter(scim_groups::organization_id.eq(organization))
                .into_boxed();
            if let Some(after) = after {
                query = query.filter(after_cursor!(scim_groups, after));
            }
            let rows: Vec<GroupRow> = query
                .order((scim_groups::created_at.asc(), scim_groups::id.asc()))
                .limit(i64::from(limit))
                .select(GroupRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?;
            load_groups(conn, rows, members).await
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
            Ok(load_groups(conn, rows, GroupMembers::Read).await?.pop())
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
