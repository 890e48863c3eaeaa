//! The audit log: who did what, to what, from where, and whether it worked. A record is written
//! in the same transaction as the change it describes, so that a change that rolled back leaves
//! no record and a committed one always has its record. A sign-in that fails changes nothing:
//! its record is written on its own.
//!
//! Nothing secret goes in: a record names ids, an action, the client's address, user agent and
//! request id, never a password, token, key or code.

use std::{fmt, net::IpAddr, str::FromStr};

use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    text::display_as_str, ApiKeyId, ApplicationId, ClientAddress, OrganizationId, ScimTokenId,
    ServiceAccountId, UserId,
};

/// The longest user agent kept, in characters; the rest is cut.
pub const MAX_USER_AGENT: usize = 512;

/// Where a request came from: what the audit log keeps of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The client's address (through trusted proxies).
    pub ip: Option<IpAddr>,
    /// The `User-Agent` header, cut to [`MAX_USER_AGENT`] characters.
    pub user_agent: Option<String>,
    /// The request's id (`X-Request-ID`).
    pub request_id: Option<String>,
}

impl Origin {
    /// The origin of a request, the user agent cut to its maximum length.
    pub fn new(ip: IpAddr, user_agent: Option<&str>, request_id: Option<&str>) -> Self {
        Self {
            ip: Some(ip),
            user_agent: user_agent
                .filter(|ua| !ua.is_empty())
                .map(|ua| ua.chars().take(MAX_USER_AGENT).collect()),
            request_id: request_id.map(str::to_owned),
        }
    }

    /// No request: a background job's change.
    pub fn system() -> Self {
        Self::default()
    }

    /// The client's address, as an organization's IP allowlist judges it; an origin with no
    /// address (the system's) is the unspecified address, which no allowlist holds.
    pub fn client(&self) -> ClientAddress {
        ClientAddress(
            self.ip
                .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)),
        )
    }
}

/// Who acted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditActor {
    /// A signed-in user (or someone signing in as them).
    User(UserId),
    /// Someone signing in as an account that does not exist: no id.
    UnknownUser,
    /// An API key (acting as its creator).
    ApiKey(ApiKeyId),
    /// A service account, by one of its API keys.
    ServiceAccount(ServiceAccountId),
    /// The organization's identity provider, by one of its SCIM tokens.
    Scim(ScimTokenId),
    /// An application (OAuth client) at an OAuth endpoint, by the client id it gave (a
    /// refusal may be someone else's guess of its secret).
    Application(ApplicationId),
    /// The operator, with `GATEHOUSE_CONTROL_TOKEN`.
    Operator,
    /// Gatehouse itself: a background job.
    System,
}

impl AuditActor {
    /// `user`, `api_key`, `service_account`, `scim`, `application`, `operator` or `system`.
    pub const fn kind(self) -> &'static str {
        match self {
            Self::User(_) | Self::UnknownUser => "user",
            Self::ApiKey(_) => "api_key",
            Self::ServiceAccount(_) => "service_account",
            Self::Scim(_) => "scim",
            Self::Application(_) => "application",
            Self::Operator => "operator",
            Self::System => "system",
        }
    }

    /// The actor's id, as the API shows it; `None` for the operator, the system and an unknown
    /// user.
    pub fn id(self) -> Option<String> {
        match self {
            Self::User(id) => Some(id.to_string()),
            Self::ApiKey(id) => Some(id.to_string()),
            Self::ServiceAccount(id) => Some(id.to_string()),
            Self::Scim(id) => Some(id.to_string()),
            Self::Application(id) => Some(id.to_string()),
            Self::UnknownUser | Self::Operator | Self::System => None,
        }
    }

    /// Back from [`kind`](Self::kind) and [`id`](Self::id), as stored.
    pub fn restore(kind: &str, id: Option<&str>) -> Option<Self> {
        match (kind, id) {
            ("user", None) => Some(Self::UnknownUser),
            ("user", Some(id)) => Uuid::parse_str(id).ok().map(|id| Self::User(id.into())),
            ("api_key", Some(id)) => Uuid::parse_str(id).ok().map(|id| Self::ApiKey(id.into())),
            ("service_account", Some(id)) => Uuid::parse_str(id)
                .ok()
                .map(|id| Self::ServiceAccount(id.into())),
            ("scim", Some(id)) => Uuid::parse_str(id).ok().map(|id| Self::Scim(id.into())),
            ("application", Some(id)) => Uuid::parse_str(id)
                .ok()
                .map(|id| Self::Application(id.into())),
            ("operator", None) => Some(Self::Operator),
            ("system", None) => Some(Self::System),
            _ => None,
        }
    }
}

macro_rules! audit_actions {
    ($($variant:ident => $name:literal, $doc:literal;)+) => {
        /// What was done: the record's `action`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum AuditAction {
            $(#[doc = $doc] $variant,)+
        }

        impl AuditAction {
            /// Every action, in the documented order.
            pub const ALL: &'static [AuditAction] = &[$(Self::$variant,)+];

            /// The dotted name (`member.role_changed`).
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $name,)+ }
            }

            /// What the action means, for the documentation.
            pub const fn description(self) -> &'static str {
                match self { $(Self::$variant => $doc,)+ }
            }
        }

        impl FromStr for AuditAction {
            type Err = ();

            fn from_str(s: &str) -> Result<Self, ()> {
                match s { $($name => Ok(Self::$variant),)+ _ => Err(()) }
            }
        }
    };
}

audit_actions! {
    UserRegistered => "user.registered", "Someone registered an account (with its personal workspace).";
    ProfileUpdated => "user.updated", "A user changed their profile.";
    PasswordChanged => "auth.password_changed", "A password was changed: by the user, renewed after it expired, or reset by a mailed link.";
    UserDeleted => "user.deleted", "A user deleted their account.";
    UserReclaimed => "user.reclaimed", "An identity provider or a directory linked an address whose account was never verified: the account's password, sessions, API keys, mailed links, second factors and consents ended, and the address is verified now.";
    Logout => "auth.logout", "A user signed out: the session and its tokens ended.";
    SessionRevoked => "auth.session_revoked", "Gatehouse ended a session itself: its authorization code was presented twice.";
    LoginSucceeded => "auth.login", "A sign-in completed and opened a session (password, second factor, SAML or mailed link).";
    LoginFailed => "auth.login_failed", "A sign-in was refused: wrong credentials, a refused assertion, a wrong second factor, or a locked account.";
    MfaRequired => "auth.mfa_required", "A password was right and a second factor is asked for.";
    OrganizationCreated => "organization.created", "An organization was created.";
    OrganizationUpdated => "organization.updated", "An organization's name, slug or settings changed.";
    OrganizationDeleted => "organization.deleted", "An organization was deleted (its members lost access at once).";
    PlanChanged => "organization.plan_changed", "The operator moved an organization to another plan (`gatehouse orgs set-plan`).";
    BillingEventPosted => "organization.billing_event_posted", "The billing system posted a billing event for an organization (`POST /control/events`).";
    MemberInvited => "member.invited", "Someone was invited to the organization.";
    InvitationRevoked => "invitation.revoked", "A pending invitation was revoked.";
    MemberJoined => "member.joined", "An invitation was accepted: the invitee is a member now.";
    MemberRoleChanged => "member.role_changed", "A member's role was changed.";
    MemberRemoved => "member.removed", "A member was removed from the organization.";
    OwnershipTransferred => "organization.ownership_transferred", "The owner handed the organization to another member (with their password): the new owner is `owner`, the old one `admin`.";
    ApplicationCreated => "application.created", "An application (OAuth client) was registered.";
    ApplicationUpdated => "application.updated", "An application's name, redirect URIs or active flag changed.";
    ApplicationSecretRotated => "application.secret_rotated", "An application's client secret was replaced.";
    ApplicationDeleted => "application.deleted", "An application was deleted.";
    PoliciesChanged => "organization.policies_changed", "The organization's security policies were replaced.";
    BrandingChanged => "organization.branding_changed", "The organization's branding changed.";
    SsoConfigured => "sso.configured", "The organization's SAML configuration was created or changed.";
    DomainAdded => "organization.domain_added", "An email domain was claimed for the organization (pending until its TXT record is found).";
    DomainVerified => "organization.domain_verified", "The organization proved it holds an email domain: its TXT record was found.";
    DomainRemoved => "organization.domain_removed", "An email domain of the organization was removed.";
    ApiKeyCreated => "api_key.created", "An API key was created.";
    ApiKeyRevoked => "api_key.revoked", "An API key was revoked: by its user, or by an owner or admin of its organization.";
    ServiceAccountCreated => "service_account.created", "A service account was created.";
    ServiceAccountUpdated => "service_account.updated", "A service account's name or role changed.";
    ServiceAccountDeleted => "service_account.deleted", "A service account was deleted: its keys stopped at once.";
    RoleCreated => "role.created", "A custom role was defined.";
    RoleUpdated => "role.updated", "A custom role's name, description or permissions changed: its holders act with them at once.";
    RoleDeleted => "role.deleted", "A custom role nobody held was deleted.";
    ScimTokenCreated => "scim_token.created", "A SCIM token was created for the organization's identity provider.";
    ScimTokenRevoked => "scim_token.revoked", "A SCIM token was revoked: it stopped at once.";
    GroupRolesChanged => "scim.group_roles_changed", "The map from directory groups to roles was replaced (and the directory's members got their roles under it).";
    EndpointCreated => "webhook_endpoint.created", "A webhook endpoint was created.";
    EndpointUpdated => "webhook_endpoint.updated", "A webhook endpoint was changed (turned on or off included).";
    EndpointDeleted => "webhook_endpoint.deleted", "A webhook endpoint was deleted, with its deliveries.";
    DeliveryRetried => "webhook.delivery_retried", "A failed delivery was retried by hand.";
    WebhookTested => "webhook.tested", "A test ping was sent to an endpoint.";
    DeadLettersReplayed => "webhook.dead_letters_replayed", "The operator replayed dead letters.";
    EmailVerified => "user.email_verified", "A user verified their address with a mailed link.";
    LinkMailed => "auth.link_mailed", "A sign-in, password-reset or address-verification link was mailed to an account.";
    MfaFactorAdded => "mfa.factor_added", "A second factor was confirmed: an authenticator app or a security key.";
    MfaFactorRemoved => "mfa.factor_removed", "A user removed one of their second factors (with their password).";
    RecoveryCodesRegenerated => "mfa.recovery_codes_regenerated", "A user replaced their recovery codes (with their password): the old ones stopped working.";
    OAuthAuthorized => "oauth.authorized", "A signed-in user was sent back to an application with an authorization code.";
    OAuthConsentGranted => "oauth.consent_granted", "A signed-in user allowed an application the API scopes it asked for, on the consent page.";
    OAuthConsentRevoked => "oauth.consent_revoked", "A user took back their consent to an application: its sessions of theirs ended.";
    OAuthTokenIssued => "oauth.token_issued", "An application exchanged an authorization code for a user's tokens: the session opened.";
    OAuthTokenRefused => "oauth.token_refused", "An OAuth endpoint refused an application: a wrong client secret (at the token, revocation or introspection endpoint), a code or refresh token that is unknown, expired, reused or not its own, or client credentials it may not have.";
    OAuthClientCredentialsIssued => "oauth.client_credentials_issued", "An application got a machine token for its organization (client credentials).";
    OAuthTokenRevoked => "oauth.token_revoked", "An application revoked a token of a user's session it was granted: the session ended.";
}

display_as_str!(AuditAction);

/// The kind of thing an action was done to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    /// A user account.
    User,
    /// A user's membership of the organization.
    Member,
    /// An API key.
    ApiKey,
    /// A webhook endpoint.
    WebhookEndpoint,
    /// An organization.
    Organization,
    /// An invitation.
    Invitation,
    /// A webhook delivery.
    Delivery,
    /// An application (OAuth client).
    Application,
    /// One of a user's second factors.
    MfaFactor,
    /// An email domain the organization claimed.
    Domain,
    /// A service account.
    ServiceAccount,
    /// A custom role, by its key.
    Role,
    /// A SCIM token.
    ScimToken,
}

impl TargetKind {
    /// Every kind.
    pub const ALL: [Self; 13] = [
        Self::User,
        Self::Member,
        Self::ApiKey,
        Self::WebhookEndpoint,
        Self::Organization,
        Self::Invitation,
        Self::Delivery,
        Self::Application,
        Self::MfaFactor,
        Self::Domain,
        Self::ServiceAccount,
        Self::Role,
        Self::ScimToken,
    ];

    /// `user`, `member`, `api_key`, `webhook_endpoint`, `organization`, `invitation`,
    /// `delivery`, `application`, `mfa_factor`, `domain`, `service_account`, `role`, `scim_token`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Member => "member",
            Self::ApiKey => "api_key",
            Self::WebhookEndpoint => "webhook_endpoint",
            Self::Organization => "organization",
            Self::Invitation => "invitation",
            Self::Delivery => "delivery",
            Self::Application => "application",
            Self::MfaFactor => "mfa_factor",
            Self::Domain => "domain",
            Self::ServiceAccount => "service_account",
            Self::Role => "role",
            Self::ScimToken => "scim_token",
        }
    }
}

impl FromStr for TargetKind {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        Self::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
            .ok_or(())
    }
}

/// What an action was done to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditTarget {
    /// What kind of thing.
    pub kind: TargetKind,
    /// Its id.
    pub id: String,
}

impl AuditTarget {
    /// A target of this kind and id.
    pub fn new(kind: TargetKind, id: impl fmt::Display) -> Self {
        Self {
            kind,
            id: id.to_string(),
        }
    }
}

/// Whether the action worked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuditOutcome {
    /// It was done.
    Success,
    /// It was refused.
    Failure,
}

impl AuditOutcome {
    /// `success` or `failure`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Failure => "failure",
        }
    }
}

impl FromStr for AuditOutcome {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "success" => Ok(Self::Success),
            "failure" => Ok(Self::Failure),
            _ => Err(()),
        }
    }
}

/// One record of the audit log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    /// The record's id.
    pub id: Uuid,
    /// When it happened (the change's time).
    pub occurred_at: OffsetDateTime,
    /// Who acted.
    pub actor: AuditActor,
    /// The organization it happened in; `None` for a user's own account (a sign-in).
    pub organization_id: Option<OrganizationId>,
    /// What was done.
    pub action: AuditAction,
    /// What it was done to.
    pub target: Option<AuditTarget>,
    /// Where the request came from.
    pub origin: Origin,
    /// Whether it worked.
    pub outcome: AuditOutcome,
}

impl AuditRecord {
    /// A successful action by `actor`, outside any organization and on no target until
    /// [`in_organization`](Self::in_organization) and [`on`](Self::on) say otherwise.
    pub fn new(
        id: Uuid,
        occurred_at: OffsetDateTime,
        actor: AuditActor,
        action: AuditAction,
        origin: &Origin,
    ) -> Self {
        Self {
            id,
            occurred_at,
            actor,
            organization_id: None,
            action,
            target: None,
            origin: origin.clone(),
            outcome: AuditOutcome::Success,
        }
    }

    /// In this organization.
    pub fn in_organization(mut self, organization_id: OrganizationId) -> Self {
        self.organization_id = Some(organization_id);
        self
    }

    /// Done to this target.
    pub fn on(mut self, kind: TargetKind, id: impl fmt::Display) -> Self {
        self.target = Some(AuditTarget::new(kind, id));
        self
    }

    /// Refused.
    pub fn failed(mut self) -> Self {
        self.outcome = AuditOutcome::Failure;
        self
    }
}

/// The filters of an audit log listing; each one narrows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this organization's records (an organization's own log always sets it).
    pub organization_id: Option<OrganizationId>,
    /// Only this actor's (a user's or an API key's id).
    pub actor_id: Option<String>,
    /// Only this action.
    pub action: Option<AuditAction>,
    /// At or after this time.
    pub since: Option<OffsetDateTime>,
    /// Before this time.
    pub until: Option<OffsetDateTime>,
}

impl AuditFilter {
    /// Whether it narrows the log by more than its organization: an actor, an action or a time.
    pub fn narrows(&self) -> bool {
        self.actor_id.is_some()
            || self.action.is_some()
            || self.since.is_some()
            || self.until.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_actor_is_stored_and_restored() {
        let user = UserId::from_uuid(Uuid::from_u128(7));
        for actor in [
            AuditActor::User(user),
            AuditActor::UnknownUser,
            AuditActor::ApiKey(ApiKeyId::from_uuid(Uuid::from_u128(8))),
            AuditActor::Application(ApplicationId::from_uuid(Uuid::from_u128(9))),
            AuditActor::Operator,
            AuditActor::System,
        ] {
            let id = actor.id();
            assert_eq!(
                AuditActor::restore(actor.kind(), id.as_deref()),
                Some(actor)
            );
        }
        assert_eq!(AuditActor::restore("operator", Some("x")), None);
        assert_eq!(AuditActor::restore("root", None), None);
    }

    #[test]
    fn an_action_parses_from_its_name() {
        for action in AuditAction::ALL {
            assert_eq!(action.as_str().parse(), Ok(*action));
        }
        assert_eq!("member.exploded".parse::<AuditAction>(), Err(()));
    }

    #[test]
    fn every_action_is_in_the_operators_guide() {
        let guide = include_str!("../../../../docs/operations.md");
        for action in AuditAction::ALL {
            assert!(
                guide.contains(&format!("| `{}` |", action.as_str())),
                "docs/operations.md does not list {action}"
            );
        }
    }

    #[test]
    fn a_long_user_agent_is_cut() {
        let long = "x".repeat(2 * MAX_USER_AGENT);
        let origin = Origin::new([127, 0, 0, 1].into(), Some(&long), Some("req-1"));
        assert_eq!(origin.user_agent.map(|ua| ua.len()), Some(MAX_USER_AGENT));
    }
}
