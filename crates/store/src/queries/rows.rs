//! Per table, a read struct and an insert struct, and their mapping to domain types.

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        ApiKey, ApiKeyName, Email, FullName, Membership, NewEvent, PasswordHash, Session, User,
        UserCredentials,
    },
    ports::{StoreError, StoredSigningKey},
};

use super::super::{
    schema::{api_keys, events, memberships, organizations, sessions, signing_keys, users},
    Db,
};
use crate::{corrupt, types::DbUuid};

#[derive(Queryable, Selectable)]
#[diesel(table_name = users, check_for_backend(Db))]
pub(super) struct UserRow {
    pub id: DbUuid,
    pub email: String,
    pub full_name: String,
    pub password_hash: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl UserRow {
    pub fn into_credentials(self) -> Result<UserCredentials, StoreError> {
        Ok(UserCredentials {
            user: User {
                id: self.id.0.into(),
                email: Email::parse(&self.email).map_err(|_| corrupt("users.email"))?,
                full_name: FullName::parse(&self.full_name)
                    .map_err(|_| corrupt("users.full_name"))?,
                created_at: self.created_at,
                updated_at: self.updated_at,
            },
            password_hash: PasswordHash::from_phc(self.password_hash),
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = users)]
pub(super) struct NewUserRow<'a> {
    pub id: DbUuid,
    pub email: &'a str,
    pub full_name: &'a str,
    pub password_hash: &'a str,
    pub password_changed_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Insertable)]
#[diesel(table_name = organizations)]
pub(super) struct NewOrganizationRow<'a> {
    pub id: DbUuid,
    pub name: &'a str,
    pub slug: &'a str,
    pub kind: &'a str,
    pub plan: &'a str,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Insertable)]
#[diesel(table_name = memberships)]
pub(super) struct NewMembershipRow<'a> {
    pub organization_id: DbUuid,
    pub user_id: DbUuid,
    pub role: &'a str,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Queryable)]
pub(super) struct MembershipRow {
    pub organization_id: DbUuid,
    pub user_id: DbUuid,
    pub role: String,
    pub plan: String,
}

impl MembershipRow {
    pub fn into_domain(self) -> Result<Membership, StoreError> {
        Ok(Membership {
            organization_id: self.organization_id.0.into(),
            user_id: self.user_id.0.into(),
            role: self.role.parse().map_err(|_| corrupt("memberships.role"))?,
            plan: self
                .plan
                .parse()
                .map_err(|_| corrupt("organizations.plan"))?,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = sessions)]
pub(super) struct NewSessionRow<'a> {
    pub id: DbUuid,
    pub user_id: DbUuid,
    pub refresh_token_hash: &'a str,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub last_used_at: DateTime<Utc>,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = sessions, check_for_backend(Db))]
pub(super) struct SessionRow {
    pub id: DbUuid,
    pub user_id: DbUuid,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub last_used_at: DateTime<Utc>,
}

impl From<SessionRow> for Session {
    fn from(row: SessionRow) -> Self {
        Self {
            id: row.id.0.into(),
            user_id: row.user_id.0.into(),
            created_at: row.created_at,
            expires_at: row.expires_at,
            last_used_at: row.last_used_at,
        }
    }
}

#[derive(Insertable)]
#[diesel(table_name = api_keys)]
pub(super) struct NewApiKeyRow<'a> {
    pub id: DbUuid,
    pub name: &'a str,
    pub prefix: &'a str,
    pub key_hash: &'a str,
    pub organization_id: DbUuid,
    pub user_id: DbUuid,
    pub created_at: DateTime<Utc>,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = api_keys, check_for_backend(Db))]
pub(super) struct ApiKeyRow {
    pub id: DbUuid,
    pub name: String,
    pub prefix: String,
    pub organization_id: DbUuid,
    pub user_id: DbUuid,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
}

impl ApiKeyRow {
    pub fn into_domain(self) -> Result<ApiKey, StoreError> {
        Ok(ApiKey {
            id: self.id.0.into(),
            name: ApiKeyName::parse(&self.name).map_err(|_| corrupt("api_keys.name"))?,
            prefix: self.prefix,
            organization_id: self.organization_id.0.into(),
            user_id: self.user_id.0.into(),
            created_at: self.created_at,
            last_used_at: self.last_used_at,
        })
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = signing_keys, check_for_backend(Db))]
pub(super) struct SigningKeyRow {
    pub kid: String,
    pub private_key_sealed: Vec<u8>,
    pub public_key_der: Vec<u8>,
    pub created_at: DateTime<Utc>,
}

impl From<SigningKeyRow> for StoredSigningKey {
    fn from(row: SigningKeyRow) -> Self {
        Self {
            kid: row.kid,
            private_key_sealed: row.private_key_sealed,
            public_key_der: row.public_key_der,
            created_at: row.created_at,
        }
    }
}

impl From<StoredSigningKey> for SigningKeyRow {
    fn from(key: StoredSigningKey) -> Self {
        Self {
            kid: key.kid,
            private_key_sealed: key.private_key_sealed,
            public_key_der: key.public_key_der,
            created_at: key.created_at,
        }
    }
}

#[derive(Insertable)]
#[diesel(table_name = events)]
pub(super) struct NewEventRow {
    pub id: DbUuid,
    pub event_type: &'static str,
    pub organization_id: Option<DbUuid>,
    pub user_id: Option<DbUuid>,
    pub data: serde_json::Value,
    pub occurred_at: DateTime<Utc>,
}

impl From<NewEvent> for NewEventRow {
    fn from(event: NewEvent) -> Self {
        Self {
            id: DbUuid(event.id.as_uuid()),
            event_type: event.event_type.as_str(),
            organization_id: event.organization_id.map(|id| DbUuid(id.as_uuid())),
            user_id: event.user_id.map(|id| DbUuid(id.as_uuid())),
            data: event.data,
            occurred_at: event.occurred_at,
        }
    }
}

/// Records events in the outbox, inside the caller's transaction.
pub(super) async fn record_events(
    conn: &mut super::super::Conn,
    events: Vec<NewEvent>,
) -> QueryResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let rows: Vec<NewEventRow> = events.into_iter().map(NewEventRow::from).collect();
    for row in rows {
        diesel::insert_into(events::table)
            .values(row)
            .execute(conn)
            .await?;
    }
    Ok(())
}
