//! Per table, a read struct and an insert struct, and their mapping to domain types.

use diesel::prelude::*;
use gatehouse_domain::{
    model::{
        Amr, ApiKey, ApiKeyName, ApplicationId, ClientGrant, ClientId, DefaultRole, Delivery,
        DeliveryId, DeliveryState, DeliveryStatus, Email, EndpointId, EventType, FullName,
        Invitation, KeyHolder, Member, MemberStatus, Membership, NewSession, Organization,
        OrganizationId, OrganizationName, OrganizationSettings, PasswordHash, Scope, Session, Slug,
        User, UserCredentials, WebhookEndpoint, WebhookUrl,
    },
    ports::{LeasedDelivery, PendingEvent, StoreError, StoredSigningKey},
};
use time::OffsetDateTime;

use super::backend::{
    schema::{
        api_keys, events, invitations, memberships, organizations, sessions, signing_keys, users,
        webhook_deliveries, webhook_endpoints,
    },
    Db,
};
use super::custom_roles::CustomRoles;

use crate::{
    corrupt,
    types::{DbStrings, DbUuid},
};

/// What `users.password_hash` holds for an account without a password (one that single
/// sign-on created): no PHC string is empty, so no password ever verifies against it.
pub(super) const NO_PASSWORD: &str = "";

#[derive(Queryable, Selectable)]
#[diesel(table_name = users, check_for_backend(Db))]
pub(super) struct UserRow {
    pub id: DbUuid,
    pub email: String,
    pub full_name: String,
    pub password_hash: String,
    pub password_changed_at: OffsetDateTime,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub email_verified: bool,
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
                email_verified: self.email_verified,
            },
            password_hash: (self.password_hash != NO_PASSWORD)
                .then(|| PasswordHash::from_phc(self.password_hash)),
            password_changed_at: self.password_changed_at,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = users, treat_none_as_default_value = false)]
pub(super) struct NewUserRow<'a> {
    pub id: DbUuid,
    pub email: &'a str,
    pub full_name: &'a str,
    pub password_hash: &'a str,
    pub password_changed_at: OffsetDateTime,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub email_verified: bool,
}

#[derive(Insertable)]
#[diesel(table_name = organizations, treat_none_as_default_value = false)]
pub(super) struct NewOrganizationRow<'a> {
    pub id: DbUuid,
    pub name: &'a str,
    pub slug: &'a str,
    pub kind: &'a str,
    pub plan: &'a str,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = organizations, check_for_backend(Db))]
pub(super) struct OrganizationRow {
    pub id: DbUuid,
    pub name: String,
    pub slug: String,
    pub kind: String,
    pub plan: String,
    pub default_role: String,
    pub allow_member_invite: bool,
    pub is_active: bool,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl OrganizationRow {
    pub fn into_domain(
        self,
        member_count: u64,
        application_count: u64,
    ) -> Result<Organization, StoreError> {
        Ok(Organization {
            id: self.id.0.into(),
            name: OrganizationName::parse(&self.name).map_err(|_| corrupt("organizations.name"))?,
            slug: Slug::parse(&self.slug).map_err(|_| corrupt("organizations.slug"))?,
            kind: self
                .kind
                .parse()
                .map_err(|_| corrupt("organizations.kind"))?,
            plan: self
                .plan
                .parse()
                .map_err(|_| corrupt("organizations.plan"))?,
            is_active: self.is_active,
            settings: OrganizationSettings {
                default_role: DefaultRole::parse(&self.default_role)
                    .map_err(|_| corrupt("organizations.default_role"))?,
                allow_member_invite: self.allow_member_invite,
            },
            member_count,
            application_count,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = memberships, treat_none_as_default_value = false)]
pub(super) struct NewMembershipRow<'a> {
    pub organization_id: DbUuid,
    pub user_id: DbUuid,
    pub role: &'a str,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
    pub invited_by: Option<DbUuid>,
    pub invited_at: Option<OffsetDateTime>,
}

/// An active member: a membership joined with its user.
#[derive(Queryable)]
pub(super) struct MemberRow {
    pub organization_id: DbUuid,
    pub user_id: DbUuid,
    pub email: String,
    pub full_name: String,
    pub role: String,
    pub invited_by: Option<DbUuid>,
    pub invited_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

impl MemberRow {
    pub fn into_domain(self, roles: &CustomRoles) -> Result<Member, StoreError> {
        Ok(Member {
            organization_id: self.organization_id.0.into(),
            user_id: Some(self.user_id.0.into()),
            email: Email::parse(&self.email).map_err(|_| corrupt("users.email"))?,
            full_name: Some(
                FullName::parse(&self.full_name).map_err(|_| corrupt("users.full_name"))?,
            ),
            role: roles.resolve(self.organization_id, &self.role, "memberships.role")?,
            status: MemberStatus::Active,
            invitation_id: None,
            invited_at: self.invited_at,
            invited_by: self.invited_by.map(|id| id.0.into()),
            accepted_at: Some(self.created_at),
            joined_at: self.created_at,
        })
    }
}

/// A pending invitation as the members list shows it.
#[derive(Queryable)]
pub(super) struct InvitedMemberRow {
    pub id: DbUuid,
    pub organization_id: DbUuid,
    pub email: String,
    pub role: String,
    pub invited_by: DbUuid,
    pub invited_at: OffsetDateTime,
}

impl InvitedMemberRow {
    pub fn into_domain(self, roles: &CustomRoles) -> Result<Member, StoreError> {
        Ok(Member {
            organization_id: self.organization_id.0.into(),
            user_id: None,
            email: Email::parse(&self.email).map_err(|_| corrupt("invitations.email"))?,
            full_name: None,
            role: roles.resolve(self.organization_id, &self.role, "invitations.role")?,
            status: MemberStatus::Pending,
            invitation_id: Some(self.id.0.into()),
            invited_at: Some(self.invited_at),
            invited_by: Some(self.invited_by.0.into()),
            accepted_at: None,
            joined_at: self.invited_at,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = invitations, treat_none_as_default_value = false)]
pub(super) struct NewInvitationRow<'a> {
    pub id: DbUuid,
    pub organization_id: DbUuid,
    pub email: &'a str,
    pub role: &'a str,
    pub token_hash: &'a str,
    pub invited_by: DbUuid,
    pub invited_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

/// A pending invitation joined with its organization.
#[derive(Queryable)]
pub(super) struct InvitationRow {
    pub id: DbUuid,
    pub organization_id: DbUuid,
    pub organization_name: String,
    pub organization_slug: String,
    pub email: String,
    pub role: String,
    pub invited_by: DbUuid,
    pub invited_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

impl InvitationRow {
    pub fn into_domain(self, roles: &CustomRoles) -> Result<Invitation, StoreError> {
        Ok(Invitation {
            id: self.id.0.into(),
            organization_id: self.organization_id.0.into(),
            organization_name: OrganizationName::parse(&self.organization_name)
                .map_err(|_| corrupt("organizations.name"))?,
            organization_slug: Slug::parse(&self.organization_slug)
                .map_err(|_| corrupt("organizations.slug"))?,
            email: Email::parse(&self.email).map_err(|_| corrupt("invitations.email"))?,
            role: roles.resolve(self.organization_id, &self.role, "invitations.role")?,
            invited_by: self.invited_by.0.into(),
            invited_at: self.invited_at,
            expires_at: self.expires_at,
        })
    }
}

#[derive(Queryable)]
pub(super) struct MembershipRow {
    pub organization_id: DbUuid,
    pub user_id: DbUuid,
    pub role: String,
    pub plan: String,
    pub joined_at: OffsetDateTime,
}

impl MembershipRow {
    pub fn into_domain(self, roles: &CustomRoles) -> Result<Membership, StoreError> {
        Ok(Membership {
            organization_id: self.organization_id.0.into(),
            user_id: self.user_id.0.into(),
            role: roles.resolve(self.organization_id, &self.role, "memberships.role")?,
            joined_at: self.joined_at,
            plan: self
                .plan
                .parse()
                .map_err(|_| corrupt("organizations.plan"))?,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = sessions, treat_none_as_default_value = false)]
pub(super) struct NewSessionRow<'a> {
    pub id: DbUuid,
    pub user_id: DbUuid,
    pub refresh_token_hash: &'a str,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub last_used_at: OffsetDateTime,
    pub application_id: Option<DbUuid>,
    pub client_id: Option<&'a str>,
    pub scope: Option<String>,
    pub amr: String,
    pub sso_organization_id: Option<DbUuid>,
    pub organization_id: Option<DbUuid>,
}

impl<'a> NewSessionRow<'a> {
    pub fn of(session: &'a NewSession) -> Self {
        let grant = session.grant.as_ref();
        Self {
            id: DbUuid(session.id.as_uuid()),
            user_id: DbUuid(session.user_id.as_uuid()),
            refresh_token_hash: session.refresh_token_hash.as_hex(),
            created_at: session.created_at,
            expires_at: session.expires_at,
            last_used_at: session.created_at,
            application_id: grant.map(|g| DbUuid(g.application_id.as_uuid())),
            client_id: grant.map(|g| g.client_id.as_str()),
            scope: grant.map(|g| g.scope.to_string()),
            amr: session.amr.stored(),
            sso_organization_id: session.sso_organization_id.map(|id| DbUuid(id.as_uuid())),
            organization_id: session.organization_id.map(|id| DbUuid(id.as_uuid())),
        }
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = sessions, check_for_backend(Db))]
pub(super) struct SessionRow {
    pub id: DbUuid,
    pub user_id: DbUuid,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub last_used_at: OffsetDateTime,
    pub application_id: Option<DbUuid>,
    pub client_id: Option<String>,
    pub scope: Option<String>,
    pub amr: String,
    pub sso_organization_id: Option<DbUuid>,
    pub organization_id: Option<DbUuid>,
}

impl SessionRow {
    pub fn into_domain(self) -> Result<Session, StoreError> {
        let grant = match (self.application_id, self.client_id, self.scope) {
            (Some(application), Some(client_id), Some(scope)) => Some(ClientGrant {
                application_id: ApplicationId::from_uuid(application.0),
                client_id: ClientId::parse(&client_id)
                    .ok_or_else(|| corrupt("sessions.client_id"))?,
                scope: Scope::parse(&scope).map_err(|_| corrupt("sessions.scope"))?,
            }),
            (None, None, None) => None,
            _ => return Err(corrupt("sessions.application_id")),
        };
        Ok(Session {
            id: self.id.0.into(),
            user_id: self.user_id.0.into(),
            created_at: self.created_at,
            expires_at: self.expires_at,
            last_used_at: self.last_used_at,
            grant,
            amr: Amr::from_stored(&self.amr).ok_or_else(|| corrupt("sessions.amr"))?,
            sso_organization_id: self
                .sso_organization_id
                .map(|id| OrganizationId::from_uuid(id.0)),
            organization_id: self
                .organization_id
                .map(|id| OrganizationId::from_uuid(id.0)),
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = api_keys, treat_none_as_default_value = false)]
pub(super) struct NewApiKeyRow<'a> {
    pub id: DbUuid,
    pub name: &'a str,
    pub prefix: &'a str,
    pub key_hash: &'a str,
    pub organization_id: DbUuid,
    pub user_id: Option<DbUuid>,
    pub service_account_id: Option<DbUuid>,
    pub created_at: OffsetDateTime,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = api_keys, check_for_backend(Db))]
pub(super) struct ApiKeyRow {
    pub id: DbUuid,
    pub name: String,
    pub prefix: String,
    pub organization_id: DbUuid,
    pub user_id: Option<DbUuid>,
    pub service_account_id: Option<DbUuid>,
    pub created_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
}

impl ApiKeyRow {
    pub fn into_domain(self) -> Result<ApiKey, StoreError> {
        let holder = match (self.user_id, self.service_account_id) {
            (Some(user), None) => KeyHolder::User(user.0.into()),
            (None, Some(account)) => KeyHolder::ServiceAccount(account.0.into()),
            _ => return Err(corrupt("api_keys.user_id")),
        };
        Ok(ApiKey {
            id: self.id.0.into(),
            name: ApiKeyName::parse(&self.name).map_err(|_| corrupt("api_keys.name"))?,
            prefix: self.prefix,
            organization_id: self.organization_id.0.into(),
            holder,
            created_at: self.created_at,
            last_used_at: self.last_used_at,
        })
    }
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = signing_keys, check_for_backend(Db), treat_none_as_default_value = false)]
pub(super) struct SigningKeyRow {
    pub kid: String,
    pub private_key_sealed: Vec<u8>,
    pub public_key_der: Vec<u8>,
    pub created_at: OffsetDateTime,
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

/// An outbox event not yet dispatched.
#[derive(Queryable, Selectable)]
#[diesel(table_name = events, check_for_backend(Db))]
pub(super) struct EventRow {
    pub id: DbUuid,
    pub event_type: String,
    pub organization_id: Option<DbUuid>,
    pub data: serde_json::Value,
    pub occurred_at: OffsetDateTime,
}

impl EventRow {
    pub fn into_domain(self) -> Result<PendingEvent, StoreError> {
        Ok(PendingEvent {
            id: self.id.0.into(),
            event_type: self
                .event_type
                .parse()
                .map_err(|()| corrupt("events.event_type"))?,
            organization_id: self.organization_id.map(|id| id.0.into()),
            data: self.data,
            occurred_at: self.occurred_at,
        })
    }
}

/// Event types as the endpoints' `events` column holds them.
pub(super) fn event_strings(events: &[EventType]) -> DbStrings {
    DbStrings(events.iter().map(|e| e.as_str().to_owned()).collect())
}

/// The event types of an endpoints' `events` column.
pub(super) fn event_types(strings: &DbStrings) -> Result<Vec<EventType>, StoreError> {
    strings
        .0
        .iter()
        .map(|s| s.parse().map_err(|()| corrupt("webhook_endpoints.events")))
        .collect()
}

#[derive(Insertable)]
#[diesel(table_name = webhook_endpoints, treat_none_as_default_value = false)]
pub(super) struct NewEndpointRow<'a> {
    pub id: DbUuid,
    pub organization_id: DbUuid,
    pub url: &'a str,
    pub description: &'a str,
    pub events: DbStrings,
    pub secret_sealed: &'a [u8],
    pub is_active: bool,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_endpoints, check_for_backend(Db))]
pub(super) struct EndpointRow {
    pub id: DbUuid,
    pub organization_id: DbUuid,
    pub url: String,
    pub description: String,
    pub events: DbStrings,
    pub is_active: bool,
    pub last_delivery_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

impl EndpointRow {
    pub fn into_domain(self) -> Result<WebhookEndpoint, StoreError> {
        Ok(WebhookEndpoint {
            id: EndpointId::from_uuid(self.id.0),
            organization_id: self.organization_id.0.into(),
            url: WebhookUrl::parse(&self.url).map_err(|_| corrupt("webhook_endpoints.url"))?,
            description: self.description,
            events: event_types(&self.events)?,
            is_active: self.is_active,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = webhook_deliveries, treat_none_as_default_value = false)]
pub(crate) struct NewDeliveryRow<'a> {
    pub id: DbUuid,
    pub endpoint_id: DbUuid,
    pub organization_id: DbUuid,
    pub event_id: DbUuid,
    pub event_type: &'a str,
    pub payload: &'a str,
    pub status: &'static str,
    pub attempt: i32,
    pub next_attempt_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_deliveries, check_for_backend(Db))]
pub(super) struct DeliveryRow {
    pub id: DbUuid,
    pub endpoint_id: DbUuid,
    pub organization_id: DbUuid,
    pub event_id: DbUuid,
    pub event_type: String,
    pub payload: String,
    pub status: String,
    pub attempt: i32,
    pub next_attempt_at: Option<OffsetDateTime>,
    pub http_status: Option<i32>,
    pub response_body: Option<String>,
    pub duration_ms: Option<i64>,
    pub delivered_at: Option<OffsetDateTime>,
    pub created_at: OffsetDateTime,
}

/// A delivery's state as stored, through the domain's one door for it.
pub(super) fn stored_state(
    status: &str,
    attempt: i32,
    next_attempt_at: Option<OffsetDateTime>,
) -> Result<DeliveryState, StoreError> {
    let status: DeliveryStatus = status
        .parse()
        .map_err(|_| corrupt("webhook_deliveries.status"))?;
    let attempt = u32::try_from(attempt).map_err(|_| corrupt("webhook_deliveries.attempt"))?;
    DeliveryState::restore(status, attempt, next_attempt_at)
        .map_err(|_| corrupt("webhook_deliveries.status"))
}

impl DeliveryRow {
    pub fn into_domain(self) -> Result<Delivery, StoreError> {
        let state = stored_state(&self.status, self.attempt, self.next_attempt_at)?;
        Ok(Delivery {
            id: DeliveryId::from_uuid(self.id.0),
            webhook_id: EndpointId::from_uuid(self.endpoint_id.0),
            organization_id: self.organization_id.0.into(),
            event_id: self.event_id.0.into(),
            event: self
                .event_type
                .parse()
                .map_err(|()| corrupt("webhook_deliveries.event_type"))?,
            status: state.status(),
            attempt: state.attempt(),
            http_status: self
                .http_status
                .map(u16::try_from)
                .transpose()
                .map_err(|_| corrupt("webhook_deliveries.http_status"))?,
            // What was sent; a body that is not JSON (never written so) shows as none.
            request_body: serde_json::from_str(&self.payload).ok(),
            response_body: self.response_body,
            duration_ms: self
                .duration_ms
                .map(u64::try_from)
                .transpose()
                .map_err(|_| corrupt("webhook_deliveries.duration_ms"))?,
            delivered_at: self.delivered_at,
            next_retry_at: state.next_retry_at(),
            created_at: self.created_at,
        })
    }
}

/// A leased delivery joined with its endpoint.
#[derive(Queryable)]
pub(super) struct LeasedRow {
    pub id: DbUuid,
    pub endpoint_id: DbUuid,
    pub organization_id: DbUuid,
    pub url: String,
    pub secret_sealed: Vec<u8>,
    pub event_type: String,
    pub payload: String,
    pub status: String,
    pub attempt: i32,
    pub next_attempt_at: Option<OffsetDateTime>,
    pub lease: Option<DbUuid>,
    pub created_at: OffsetDateTime,
}

impl LeasedRow {
    pub fn into_domain(self) -> Result<LeasedDelivery, StoreError> {
        let state = stored_state(&self.status, self.attempt, self.next_attempt_at)?;
        if state.attempt_due().is_none() {
            return Err(corrupt("webhook_deliveries.next_attempt_at"));
        }
        Ok(LeasedDelivery {
            id: DeliveryId::from_uuid(self.id.0),
            endpoint_id: EndpointId::from_uuid(self.endpoint_id.0),
            organization_id: self.organization_id.0.into(),
            url: WebhookUrl::parse(&self.url).map_err(|_| corrupt("webhook_endpoints.url"))?,
            secret_sealed: self.secret_sealed,
            event: self
                .event_type
                .parse()
                .map_err(|()| corrupt("webhook_deliveries.event_type"))?,
            payload: self.payload,
            state,
            lease: self.lease.ok_or(corrupt("webhook_deliveries.lease"))?.0,
            created_at: self.created_at,
        })
    }
}
