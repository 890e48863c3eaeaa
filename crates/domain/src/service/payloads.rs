//! Event payloads: one type per event type, each naming its [`EventType`] ([`Payload::TYPE`]),
//! so that an event's type and its data cannot disagree. The data is the resource as it stands
//! after the change, in its API shape, with no secret; an event about a change adds what
//! changed. Every payload is snapshotted (`payloads_tests.rs`, insta): the webhook contract is
//! locked by tests that show it.

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use crate::model::{
    timestamp, AssignedRole, Member, OrganizationDomain, OrganizationId, PermissionSet, Plan,
    ServiceAccount, SessionId, User, UserId,
};
use crate::model::{Application, CustomRole, EventType, MfaFactorId, Organization};

/// The data of one event type.
pub(crate) trait Payload: Serialize {
    /// The event type whose data this is.
    const TYPE: EventType;

    /// The data as stored in the outbox and sent.
    fn into_data(self) -> serde_json::Value
    where
        Self: Sized,
    {
        serde_json::to_value(&self).unwrap_or_else(|error| {
            // Every payload is plain data: serde_json cannot fail on it (the tests show each).
            tracing::error!(%error, event = Self::TYPE.as_str(), "an event payload did not serialize");
            serde_json::Value::Null
        })
    }
}

/// Names the event type of each payload type.
macro_rules! event_types {
    ($($payload:ty => $event:ident),+ $(,)?) => {
        $(
            impl Payload for $payload {
                const TYPE: EventType = EventType::$event;
            }
        )+
    };
}

/// A time as the API writes it (RFC 3339, UTC, microseconds).
fn at<S: Serializer>(time: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&timestamp::format(*time))
}

/// [`at`], or `null`.
#[allow(clippy::ref_option)] // serde's `serialize_with` hands over a reference to the field
fn at_or_null<S: Serializer>(
    time: &Option<OffsetDateTime>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => at(time, serializer),
        None => serializer.serialize_none(),
    }
}

// --- The resources, as the API shows them. ---

/// An organization.
#[derive(Serialize)]
pub(crate) struct OrganizationData<'a> {
    id: OrganizationId,
    name: &'a str,
    slug: &'a str,
    #[serde(rename = "type")]
    kind: crate::model::OrganizationType,
    plan: Plan,
    is_active: bool,
    settings: SettingsData,
    #[serde(serialize_with = "at")]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "at")]
    updated_at: OffsetDateTime,
}

/// An organization's settings.
#[derive(Serialize)]
struct SettingsData {
    default_role: crate::model::Role,
    allow_member_invite: bool,
}

/// The organization as it stands.
pub(crate) fn organization(org: &Organization) -> OrganizationData<'_> {
    OrganizationData {
        id: org.id,
        name: org.name.as_ref(),
        slug: org.slug.as_ref(),
        kind: org.kind,
        plan: org.plan,
        is_active: org.is_active,
        settings: SettingsData {
            default_role: org.settings.default_role.role(),
            allow_member_invite: org.settings.allow_member_invite,
        },
        created_at: org.created_at,
        updated_at: org.updated_at,
    }
}

/// A member, or an invitee (no user yet).
#[derive(Serialize)]
pub(crate) struct MemberData<'a> {
    organization_id: OrganizationId,
    user_id: Option<UserId>,
    email: &'a str,
    full_name: Option<&'a str>,
    role: &'a AssignedRole,
    status: &'static str,
    #[serde(serialize_with = "at_or_null")]
    invited_at: Option<OffsetDateTime>,
    invited_by: Option<UserId>,
    #[serde(serialize_with = "at_or_null")]
    accepted_at: Option<OffsetDateTime>,
}

/// The member as it stands.
pub(crate) fn member(member: &Member) -> MemberData<'_> {
    MemberData {
        organization_id: member.organization_id,
        user_id: member.user_id,
        email: member.email.as_ref(),
        full_name: member.full_name.as_ref().map(AsRef::as_ref),
        role: &member.role,
        status: member.status.as_str(),
        invited_at: member.invited_at,
        invited_by: member.invited_by,
        accepted_at: member.accepted_at,
    }
}

/// A user account.
#[derive(Serialize)]
pub(crate) struct UserData<'a> {
    id: UserId,
    email: &'a str,
    full_name: &'a str,
    #[serde(serialize_with = "at")]
    created_at: OffsetDateTime,
}

/// The user as they stand.
pub(crate) fn user(user: &User) -> UserData<'_> {
    UserData {
        id: user.id,
        email: user.email.as_ref(),
        full_name: user.full_name.as_ref(),
        created_at: user.created_at,
    }
}

/// An application (OAuth client), without its secret.
#[derive(Serialize)]
pub(crate) struct ApplicationData<'a> {
    id: crate::model::ApplicationId,
    organization_id: OrganizationId,
    name: &'a str,
    client_id: &'a str,
    redirect_uris: &'a crate::model::RedirectUris,
    is_active: bool,
    require_pkce: bool,
    #[serde(serialize_with = "at")]
    created_at: OffsetDateTime,
    #[serde(serialize_with = "at")]
    updated_at: OffsetDateTime,
}

/// The application as it stands.
pub(crate) fn application(app: &Application) -> ApplicationData<'_> {
    ApplicationData {
        id: app.id,
        organization_id: app.organization_id,
        name: app.name.as_ref(),
        client_id: app.client_id.as_str(),
        redirect_uris: &app.redirect_uris,
        is_active: app.is_active,
        require_pkce: app.require_pkce,
        created_at: app.created_at,
        updated_at: app.updated_at,
    }
}

/// A service account.
#[derive(Serialize)]
pub(crate) struct ServiceAccountData<'a> {
    id: crate::model::ServiceAccountId,
    organization_id: OrganizationId,
    name: &'a str,
    role: &'a AssignedRole,
    created_by: UserId,
    #[serde(serialize_with = "at")]
    created_at: OffsetDateTime,
}

/// The service account as it stands.
pub(crate) fn service_account(account: &ServiceAccount) -> ServiceAccountData<'_> {
    ServiceAccountData {
        id: account.id,
        organization_id: account.organization_id,
        name: account.name.as_ref(),
        role: &account.role,
        created_by: account.created_by,
        created_at: account.created_at,
    }
}

/// A custom role.
#[derive(Serialize)]
pub(crate) struct RoleData<'a> {
    organization_id: OrganizationId,
    key: &'a str,
    name: &'a str,
    description: &'a str,
    permissions: &'a PermissionSet,
}

/// The custom role as it stands.
pub(crate) fn role(role: &CustomRole) -> RoleData<'_> {
    RoleData {
        organization_id: role.organization_id,
        key: role.key.as_ref(),
        name: role.name.as_ref(),
        description: role.description.as_ref(),
        permissions: &role.permissions,
    }
}

/// An organization's email domain.
#[derive(Serialize)]
pub(crate) struct DomainData<'a> {
    id: crate::model::DomainId,
    organization_id: OrganizationId,
    domain: &'a str,
    status: &'static str,
}

/// The domain as it stands.
pub(crate) fn domain(domain: &OrganizationDomain) -> DomainData<'_> {
    DomainData {
        id: domain.id,
        organization_id: domain.organization_id,
        domain: domain.domain.as_str(),
        status: domain.status().as_str(),
    }
}

// --- One payload per event type. ---

/// `user.created`: the new account.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct UserCreated<'a>(pub UserData<'a>);

/// `user.updated`: the account, and which of its fields changed.
#[derive(Serialize)]
pub(crate) struct UserUpdated<'a> {
    #[serde(flatten)]
    pub user: UserData<'a>,
    pub changed: &'a [&'a str],
}

/// `user.deleted`: the account as it was.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct UserDeleted<'a>(pub UserData<'a>);

/// `organization.created`: the new organization.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct OrganizationCreated<'a>(pub OrganizationData<'a>);

/// `organization.updated`: the organization, which of its fields (or policies, branding, SSO)
/// changed, and when it was deleted, for a deletion.
#[derive(Serialize)]
pub(crate) struct OrganizationUpdated<'a> {
    #[serde(flatten)]
    pub organization: OrganizationData<'a>,
    pub changed: &'a [&'a str],
    #[serde(serialize_with = "at_or_null", skip_serializing_if = "Option::is_none")]
    pub deleted_at: Option<OffsetDateTime>,
}

/// `member.invited`: the invitee, pending.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct MemberInvited<'a>(pub MemberData<'a>);

/// `member.joined`: the new member.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct MemberJoined<'a>(pub MemberData<'a>);

/// `member.removed`: the member as they were, when, and whether they left by themselves.
#[derive(Serialize)]
pub(crate) struct MemberRemoved<'a> {
    #[serde(flatten)]
    pub member: MemberData<'a>,
    #[serde(serialize_with = "at")]
    pub removed_at: OffsetDateTime,
    pub left: bool,
}

/// `member.role_changed`: the member with their new role, and the role before.
#[derive(Serialize)]
pub(crate) struct MemberRoleChanged<'a> {
    #[serde(flatten)]
    pub member: MemberData<'a>,
    pub previous_role: &'a AssignedRole,
}

/// `application.created`: the new application.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct ApplicationCreated<'a>(pub ApplicationData<'a>);

/// `application.updated`: the application, and which of its fields changed
/// (`client_secret` for a rotated secret, never the secret).
#[derive(Serialize)]
pub(crate) struct ApplicationUpdated<'a> {
    #[serde(flatten)]
    pub application: ApplicationData<'a>,
    pub changed: &'a [&'a str],
}

/// `application.deleted`: the application as it was.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct ApplicationDeleted<'a>(pub ApplicationData<'a>);

/// `auth.login`: the session opened, and how the user proved who they are.
#[derive(Serialize)]
pub(crate) struct AuthLogin<'a> {
    pub user_id: UserId,
    pub session_id: SessionId,
    pub method: &'a str,
}

/// `auth.logout`: the session ended, and why when the user did not end it themselves.
#[derive(Serialize)]
pub(crate) struct AuthLogout<'a> {
    pub user_id: UserId,
    pub session_id: SessionId,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
}

/// `auth.password_changed`: the session kept (`null` when every session ended).
#[derive(Serialize)]
pub(crate) struct AuthPasswordChanged {
    pub user_id: UserId,
    pub session_id: Option<SessionId>,
}

/// `auth.mfa_enabled`: the user's first second factor.
#[derive(Serialize)]
pub(crate) struct AuthMfaEnabled<'a> {
    pub user_id: UserId,
    pub method: &'a str,
    pub factor_id: MfaFactorId,
}

/// `billing.subscription.updated` as the operator's `set-plan` emits it.
#[derive(Serialize)]
pub(crate) struct SubscriptionUpdated {
    pub organization_id: OrganizationId,
    pub plan: Plan,
    pub previous_plan: Plan,
}

/// `organization.domain_verified`: the domain, verified.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct DomainVerified<'a>(pub DomainData<'a>);

/// `organization.domain_removed`: the domain as it was.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct DomainRemoved<'a>(pub DomainData<'a>);

/// `service_account.created`: the new service account.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct ServiceAccountCreated<'a>(pub ServiceAccountData<'a>);

/// `service_account.updated`: the service account, and its role before.
#[derive(Serialize)]
pub(crate) struct ServiceAccountUpdated<'a> {
    #[serde(flatten)]
    pub account: ServiceAccountData<'a>,
    pub previous_role: &'a AssignedRole,
}

/// `service_account.deleted`: the service account as it was, and when.
#[derive(Serialize)]
pub(crate) struct ServiceAccountDeleted<'a> {
    #[serde(flatten)]
    pub account: ServiceAccountData<'a>,
    #[serde(serialize_with = "at")]
    pub deleted_at: OffsetDateTime,
}

/// `role.created`: the new custom role.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct RoleCreated<'a>(pub RoleData<'a>);

/// `role.updated`: the custom role, and its permissions before.
#[derive(Serialize)]
pub(crate) struct RoleUpdated<'a> {
    #[serde(flatten)]
    pub role: RoleData<'a>,
    pub previous_permissions: &'a PermissionSet,
}

/// `role.deleted`: the custom role as it was.
#[derive(Serialize)]
#[serde(transparent)]
pub(crate) struct RoleDeleted<'a>(pub RoleData<'a>);

/// `webhook.test`: what a test ping carries.
#[derive(Serialize)]
pub(crate) struct WebhookTest<'a> {
    pub message: &'a str,
    pub organization_id: OrganizationId,
}

/// What a test ping says.
pub(crate) const TEST_MESSAGE: &str =
    "A test event from Gatehouse: the endpoint is reachable and can verify the signature.";

event_types! {
    UserCreated<'_> => UserCreated,
    UserUpdated<'_> => UserUpdated,
    UserDeleted<'_> => UserDeleted,
    OrganizationCreated<'_> => OrganizationCreated,
    OrganizationUpdated<'_> => OrganizationUpdated,
    MemberInvited<'_> => MemberInvited,
    MemberJoined<'_> => MemberJoined,
    MemberRemoved<'_> => MemberRemoved,
    MemberRoleChanged<'_> => MemberRoleChanged,
    ApplicationCreated<'_> => ApplicationCreated,
    ApplicationUpdated<'_> => ApplicationUpdated,
    ApplicationDeleted<'_> => ApplicationDeleted,
    AuthLogin<'_> => AuthLogin,
    AuthLogout<'_> => AuthLogout,
    AuthPasswordChanged => AuthPasswordChanged,
    AuthMfaEnabled<'_> => AuthMfaEnabled,
    SubscriptionUpdated => BillingSubscriptionUpdated,
    DomainVerified<'_> => OrganizationDomainVerified,
    DomainRemoved<'_> => OrganizationDomainRemoved,
    ServiceAccountCreated<'_> => ServiceAccountCreated,
    ServiceAccountUpdated<'_> => ServiceAccountUpdated,
    ServiceAccountDeleted<'_> => ServiceAccountDeleted,
    RoleCreated<'_> => RoleCreated,
    RoleUpdated<'_> => RoleUpdated,
    RoleDeleted<'_> => RoleDeleted,
    WebhookTest<'_> => WebhookTest,
}
