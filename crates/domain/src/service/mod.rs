//! The use cases, written against the ports.

/// `From` conversions of the refusals several use cases share into one use case's error, each
/// to the variant of the same meaning: `Admitting` to `NotAdmitted` or `Store`, `CheckError`
/// to `LockedOut` or `Internal`, `TokenError` to `Internal`, `PasswordRefused` to
/// `WeakPassword` or `Internal`. The refusals' names are the caller's imports:
/// `from_refusals!(LoginError: Admitting, TokenError);`
macro_rules! from_refusals {
    ($error:ty: $($refusal:ident),+ $(,)?) => {
        $(
            impl From<$refusal> for $error {
                fn from(refusal: $refusal) -> Self {
                    from_refusals!(@into refusal, $refusal)
                }
            }
        )+
    };
    (@into $refusal:ident, Admitting) => {
        match $refusal {
            Admitting::Refused(refused) => Self::NotAdmitted(refused),
            Admitting::Store(error) => Self::Store(error),
        }
    };
    (@into $refusal:ident, CheckError) => {
        match $refusal {
            CheckError::LockedOut(locked) => Self::LockedOut(locked),
            CheckError::Hasher(error) => Self::Internal(Box::new(error)),
        }
    };
    (@into $refusal:ident, TokenError) => {
        Self::Internal(Box::new($refusal))
    };
    (@into $refusal:ident, PasswordRefused) => {
        match $refusal {
            PasswordRefused::Weak(reason) => Self::WeakPassword(reason),
            PasswordRefused::Failed(error) => Self::Internal(Box::new(error)),
        }
    };
}

/// `Debug` that shows only the fields named: the others hold a secret (a token, a key, a
/// password) that must never reach a log. `debug_showing!(CreatedApiKey { id, prefix });`
macro_rules! debug_showing {
    ($type:ident { $($field:ident),* $(,)? }) => {
        impl std::fmt::Debug for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($type))
                    $(.field(stringify!($field), &self.$field))*
                    .finish_non_exhaustive()
            }
        }
    };
}

mod api_keys;
mod applications;
mod audit_log;
mod auth;
mod authenticator;
mod caller;
mod control;
mod delivery;
mod directory;
mod domains;
mod heavy;
mod iam;
mod invitation_link;
mod invitation_mail;
mod lifecycle;
mod links;
mod mail;
mod maker_right;
mod members;
mod mfa;
mod oauth;
mod organizations;
mod ownership;
mod payloads;
mod policies;
mod rate_limit;
mod reclaim;
mod saml;
mod sso;
mod sso_realm;
mod webhooks;

pub use api_keys::{
    ApiKeyPorts, ApiKeyService, CreateApiKeyError, CreatedApiKey, DeleteApiKeyError,
};
pub use applications::{
    ApplicationError, ApplicationPorts, ApplicationService, ApplicationWithSecret,
};
pub use audit_log::{AuditLogError, AuditLogPorts, AuditLogService};
pub use auth::{
    AccessToken, AuthPorts, AuthService, AuthSettings, ChangePasswordError, LockedOut, LoginError,
    OrganizationRefused, ProfileChange, RefreshError, RegisterError, Registered,
    SecondFactorNeeded, SignIn, TokenPair, UpdateProfileError, SSO_REQUIRED,
};
pub use authenticator::{AuthenticateError, Authenticator, AuthenticatorPorts, OrgAccessError};
pub use caller::{Actor, Forbidden};
pub use caller::{
    Agent, AppGrant, BrowserSession, DirectoryClient, IssuedToApplication, MachineClient,
    OnlyInsideOrganization, Principal, ServiceAccountKey,
};
pub use control::{
    ControlPorts, ControlService, PostEventError, PurgeSlice, ReplayError, MAX_REPLAY,
};
pub use delivery::{AttemptOutcome, DeliveryEngine, DeliveryPorts, DeliverySettings};
pub use directory::{
    CreatedScimToken, DirectoryError, DirectoryPorts, DirectoryService, PatchError,
};
pub use domains::{DomainError, DomainPorts, DomainService, MAX_DOMAINS};
pub use heavy::Busy;
pub use iam::{IamError, IamPorts, IamService, NewRole, ServiceAccountChange};
pub use invitation_link::{
    AnswerRefused, Answered, FormPosted, InvitationAnswer, InvitationLinkError,
    InvitationLinkService, InvitationStep, Opened, PendingInvitation,
};
pub use invitation_mail::{InvitationMailPorts, InvitationMails};
pub use lifecycle::MemberRule;
pub use links::{EmailLinkPorts, EmailLinkService, LinkError, LINKS_PER_CLIENT, LINKS_PER_EMAIL};
pub use mail::{
    mail_backoff, open as open_mail, seal as seal_mail, MailCourier, MailOutcome, MailPorts,
    MAIL_ATTEMPTS, MAIL_LEASE,
};
pub use members::{InvitationLink, MemberError, MemberPorts, MemberService, Removed, RoleChanged};
pub use mfa::{
    Confirmed, MfaError, MfaOverview, MfaPorts, MfaService, SecondFactorProof, TotpEnrolment,
    VerifyError, WebauthnRegistrationStart, MAX_FACTORS, TOTP_ISSUER,
};
pub use oauth::{
    ActiveToken, Authorization, AuthorizeError, AuthorizeRequest, ClientCredentials, Discovery,
    IntrospectedKind, Introspection, NotAdmitted, OAuthPorts, OAuthService, OAuthTokens,
    RevokeConsentError, TokenEndpointError, TokenGrant, MACHINE_TOKEN_SECONDS,
};
pub use organizations::{
    DeletedOrganization, OrganizationError, OrganizationPorts, OrganizationService, RETENTION_DAYS,
};
pub use ownership::{OwnershipPorts, OwnershipService, TransferError, Transferred};
pub use policies::{
    BrandingPorts, BrandingService, BrandingView, PolicyPorts, PolicyService, PolicyView,
    SettingsError,
};
pub use rate_limit::{RateLimitCheckError, RateLimitPorts, RateLimitService, Spender};
pub use saml::{SamlPorts, SamlService, SamlSignInError, SamlSignedIn};
pub use sso::{NewSsoConfiguration, SsoPorts, SsoService, SsoView};
pub use sso_realm::SsoLookup;
pub use webhooks::{
    CreatedEndpoint, EndpointUpdate, NewEndpointRequest, SecretRuleError, SigningSecret,
    TestOutcome, WebhookError, WebhookPorts, WebhookService, DISABLE_AFTER_FAILURES,
};

use time::OffsetDateTime;

use crate::{
    model::{AuditAction, AuditActor, AuditRecord, NewEvent, OrganizationId, Origin, UserId},
    ports::Random,
};

/// Builds an outbox event with a fresh id, stamped with the time of the change.
pub(crate) fn event<P: payloads::Payload>(
    random: &dyn Random,
    at: OffsetDateTime,
    organization_id: Option<OrganizationId>,
    user_id: Option<UserId>,
    payload: P,
) -> NewEvent {
    NewEvent {
        id: random.uuid().into(),
        event_type: P::TYPE,
        organization_id,
        user_id,
        data: payload.into_data(),
        occurred_at: at,
    }
}

/// Builds the outbox event of something that happens to a user's own account (signing in or
/// out, a profile, a password, a second factor): it names the user and no organization.
pub(crate) fn user_event<P: payloads::Payload>(
    random: &dyn Random,
    at: OffsetDateTime,
    user_id: UserId,
    payload: P,
) -> NewEvent {
    event(random, at, None, Some(user_id), payload)
}

/// Starts the audit record of something a user does as themselves (by their session, not as a
/// member of an organization nor through an API key).
pub(crate) fn user_audit(
    random: &dyn Random,
    at: OffsetDateTime,
    user_id: UserId,
    action: AuditAction,
    origin: &Origin,
) -> AuditRecord {
    audit(random, at, AuditActor::User(user_id), action, origin)
}

/// Starts an audit record with a fresh id, stamped with the time of the change.
pub(crate) fn audit(
    random: &dyn Random,
    at: OffsetDateTime,
    actor: AuditActor,
    action: AuditAction,
    origin: &Origin,
) -> AuditRecord {
    AuditRecord::new(random.uuid(), at, actor, action, origin)
}

#[cfg(test)]
mod application_tests;
#[cfg(test)]
mod control_tests;
#[cfg(test)]
mod directory_tests;
#[cfg(test)]
mod domain_tests;
#[cfg(test)]
mod heavy_tests;
#[cfg(test)]
mod iam_tests;
#[cfg(test)]
mod invitation_tests;
#[cfg(test)]
mod lifecycle_tests;
#[cfg(test)]
mod links_tests;
#[cfg(test)]
mod lockout_tests;
#[cfg(test)]
mod mail_tests;
#[cfg(test)]
mod members_tests;
#[cfg(test)]
mod mfa_tests;
#[cfg(test)]
mod org_token_tests;
#[cfg(test)]
mod payloads_tests;
#[cfg(test)]
mod policy_tests;
#[cfg(test)]
mod saml_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod webhook_tests;
