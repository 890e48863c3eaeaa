//! Value types and records of the domain.

mod account_token;
mod address;
mod amr;
mod api_key;
mod application;
mod audit;
mod branding;
mod consent;
mod custom_role;
mod delivery;
mod directory;
mod directory_query;
mod email;
mod event;
mod lockout;
mod member;
mod mfa;
mod network;
mod oauth;
mod operator;
mod organization;
mod outbox;
mod page;
mod password;
mod plan;
mod policy;
mod rate_limit;
mod saml;
mod secret;
mod service_account;
mod session;
mod sso;
mod text;
pub mod timestamp;
mod user;
mod verified_domain;
mod webhook;

pub use account_token::{AccountToken, AccountTokenPurpose};
pub use address::is_public_address;
pub use amr::{Amr, AuthMethod};
pub use api_key::{ApiKey, ApiKeyName, KeyHolder, NewApiKey, MAX_API_KEYS_PER_ORGANIZATION};
pub use application::{
    client_secret_matches, Application, ApplicationChange, ApplicationName, ClientId,
    NewApplication, RedirectUri, RedirectUriError, RedirectUris, RedirectUrisError,
};
pub use audit::{
    AuditAction, AuditActor, AuditFilter, AuditOutcome, AuditRecord, AuditTarget, Origin,
    TargetKind, MAX_USER_AGENT,
};
pub use branding::{
    AssetUrl, AssetUrlError, Branding, BrandingChange, CustomLogin, CustomLoginChange,
    EmailBranding, EmailBrandingChange, FooterText, HexColor, HexColorError, LoginSubtitle,
    LoginTitle, SenderName,
};
pub use consent::{Consent, GrantedConsent};
pub use custom_role::{
    custom_permissions, AssignedRole, CustomRole, ListedRole, PermissionSet, RoleDescription,
    RoleKey, RoleName, RoleRef,
};
pub use delivery::{
    DeliveryState, DueDelivery, DueKey, DueRule, FailureRun, InvalidDeliveryState, TimeBound,
    TransitionError,
};
pub use directory::{
    DirectoryEmail, DirectoryGroup, DirectoryName, DirectoryText, DirectoryUser, GroupAttributes,
    GroupRoles, GroupRolesError, ScimToken, ScimTokenName, UserAttributes, DIRECTORY_PERMISSIONS,
    MAX_DIRECTORY_EMAILS, MAX_DIRECTORY_TEXT, MAX_GROUP_MEMBERS, MAX_GROUP_ROLES, MAX_SCIM_TOKENS,
};
pub use directory_query::{
    Comparison, DirectoryAttribute, DirectoryCursor, DirectoryFilter, DirectoryPage,
    DirectorySelection, DirectoryWindow, ResourceCheck, TextMatch, DIRECTORY_BATCH,
};
pub use email::{Email, EmailError};
pub use event::{
    EventCategory, EventSource, EventType, NewEvent, PostedEventData, PostedEventDataError,
};
// What the products share with the server: `gatehouse-types`, re-exported where the rest of
// the domain's values are.
pub use gatehouse_types::{
    signature, signature_matches, ApiKeyId, ApiScope, ApiScopes, ApplicationId, DirectoryGroupId,
    DirectoryUserId, DomainId, EventId, InvitationId, MfaFactorId, OrganizationId, Permission,
    Role, ScimTokenId, Scope, ScopeError, ServiceAccountId, SessionId, UserId,
};
pub use lockout::{AccountKey, CheckAdmission, FailedSignIns, InvalidLockoutRule, LockoutRule};
pub use member::{
    InvitableRole, Invitation, InvitationRecord, InvitationState, Member, MemberFilter,
    MemberStatus, Membership, NewInvitation, OpenInvitation, INVITATION_TTL_DAYS,
};
pub use mfa::{
    normalise_recovery_code, MfaFactor, MfaLogin, TotpCode, TotpSecret, WebauthnRegistration,
    MFA_MAX_FAILURES, MFA_TOKEN_TTL, RECOVERY_CODES, WEBAUTHN_REGISTRATION_TTL,
};
pub use network::{ClientAddress, IpRange, IpRangeError};
pub use oauth::{
    at_hash, AuthorizationCode, CodeChallenge, CodeVerifier, NewAuthorizationCode, Nonce,
    OAuthError, OAuthErrorCode, State, StoredCode, UserClaims, AUTHORIZATION_CODE_SECONDS,
    EMAIL_SCOPE, OPENID, PROFILE_SCOPE,
};
pub use operator::{EmptyOperatorToken, Operator, OperatorToken};
pub use organization::{
    DefaultRole, NewOrganization, Organization, OrganizationChange, OrganizationFilter,
    OrganizationName, OrganizationSettings, OrganizationType, Slug, SlugError,
};
pub use page::{Page, PageRequest, PageRequestError, SearchTerm, SearchTermError, Slice};
pub use password::{
    password_user_inputs, NewPassword, PasswordCandidate, PasswordError, PasswordHash,
    PasswordStrength,
};
pub use plan::{Feature, Plan};
pub use policy::{
    Bounded, ConcurrentSessions, EffectivePolicies, GraceHours, IdleMinutes, IpAllowlist,
    IpAllowlistError, MaxAgeDays, MfaMethod, MfaPolicy, MfaPolicyError, MinLength,
    OrganizationPolicies, OutOfBounds, PasswordPolicy, ReuseCount, SessionHours, SessionPolicy,
};
pub use rate_limit::{unix_micros, Admission, Quota, RateLimits};
pub use saml::{
    ReturnPath, ReturnPathError, SamlAssertion, SamlRequest, SamlRequestId, SamlTrust,
    SAML_CLOCK_SKEW, SAML_REQUEST_TTL,
};
pub use secret::{SecretToken, TokenHash, TokenKind};
pub use service_account::{ServiceAccount, ServiceAccountName, MAX_SERVICE_ACCOUNTS};
pub use session::{
    ClientGrant, NewSession, OrganizationChoice, Session, TokenOrganization, SESSION_TOUCH_INTERVAL,
};
pub use sso::{
    sp_acs_url, sp_entity_id, CertificateError, DomainWhitelist, EmailDomain, EmailDomainError,
    IdpCertificate, IdpEntityId, IdpSsoUrl, ProvisionRole, ProvisionRoleError, SsoChange,
    SsoConfiguration, SsoProvider, SsoProviderError,
};
pub use text::{HttpsUrlError, TextError};
pub use user::{FullName, FullNameError, NewUser, User, UserCredentials};
pub use verified_domain::{
    ClaimableDomain, ClaimableDomainError, DomainStatus, OrganizationDomain, VerifiedDomains,
    DOMAIN_CHALLENGE_LABEL, FREE_MAIL_DOMAINS,
};
pub use webhook::{
    Delivery, DeliveryId, DeliveryStats, DeliveryStatus, EndpointDescription, EndpointId,
    LeaseRoom, RetrySchedule, Subscription, WebhookEndpoint, WebhookUrl, WebhookUrlError,
};

/// What the model's tests share.
#[cfg(test)]
mod testing {
    use std::fmt::Debug;

    use super::TextError;

    /// Asserts that `parse` refuses every one of `inputs`, each with `expected`; a failure names
    /// the input.
    #[track_caller]
    pub(crate) fn refuses_each<T, E>(
        parse: impl Fn(&str) -> Result<T, E>,
        inputs: &[&str],
        expected: E,
    ) where
        T: Debug + PartialEq,
        E: Clone + Debug + PartialEq,
    {
        for raw in inputs {
            assert_eq!(parse(raw), Err(expected.clone()), "{raw:?}");
        }
    }

    /// Asserts that `parse` takes `fill` repeated `max` times, and refuses one more with
    /// [`TextError::TooLong`].
    #[track_caller]
    pub(crate) fn holds_at_most<T>(
        parse: impl Fn(&str) -> Result<T, TextError>,
        fill: &str,
        max: usize,
    ) where
        T: Debug + PartialEq,
    {
        assert!(parse(&fill.repeat(max)).is_ok(), "{max} × {fill:?}");
        assert_eq!(
            parse(&fill.repeat(max + 1)),
            Err(TextError::TooLong { max })
        );
    }
}
