//! The ports: everything the use cases need from the outside world, as traits.
//!
//! Adapters live elsewhere: `gatehouse-store` implements the store ports on PostgreSQL and
//! SQLite, `gatehouse-server` the clock, randomness, password hashing and token signing.
//! Every store method that writes is one transaction: it commits everything it was given,
//! the outbox events included, or nothing.
//!
//! Ports are object safe (`async_trait`) because the backend is picked at run time from
//! `GATEHOUSE_DATABASE_URL`; the services hold them as `Arc<dyn Port>`.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use uuid::Uuid;

use crate::model::{
    AccountKey, ApiKey, ApiKeyId, Application, ApplicationId, Branding, ClientId, Delivery,
    DeliveryId, DeliveryStats, DeliveryStatus, Email, EndpointId, EventId, EventType,
    FailedSignIns, Invitation, InvitationId, LeaseRoom, LockoutRule, Member, MemberFilter,
    Membership, NewApiKey, NewApplication, NewAuthorizationCode, NewEvent, NewInvitation,
    NewOrganization, NewPassword, NewSession, NewUser, Organization, OrganizationChange,
    OrganizationFilter, OrganizationId, OrganizationPolicies, Page, PageRequest, PasswordHash,
    Plan, Role, SecretToken, Session, SessionId, Slug, SsoConfiguration, StoredCode, TokenHash,
    TokenKind, User, UserCredentials, UserId, WebhookEndpoint, WebhookUrl,
};

/// The source of an unexpected failure, kept for the log.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// How a store operation can fail.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or the pool is exhausted: worth retrying (HTTP 503).
    #[error("the store is unavailable")]
    Unavailable(#[source] BoxError),
    /// A uniqueness rule was violated by a concurrent or repeated write. Each method's docs say
    /// which rule can be violated, so the caller knows what the conflict means.
    #[error("a uniqueness rule was violated")]
    Conflict,
    /// Anything else: a bug or a corrupt row.
    #[error("the store failed")]
    Failed(#[source] BoxError),
}

/// A user's account as registration creates it: the user, their personal workspace and the
/// owner membership, with the events that announce them.
#[derive(Clone, Debug, PartialEq)]
pub struct NewAccount {
    pub user: NewUser,
    pub workspace: NewOrganization,
    pub events: Vec<NewEvent>,
}

/// Users and their credentials.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait AccountStore: Send + Sync + 'static {
    /// Creates the user, the personal workspace (taking the first free slug candidate), the
    /// owner membership and the events, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the email belongs to another user.
    async fn create_account(&self, account: NewAccount) -> Result<(), StoreError>;

    /// The user with this (normalised) email and their password hash.
    async fn credentials_by_email(
        &self,
        email: &Email,
    ) -> Result<Option<UserCredentials>, StoreError>;

    /// The user with this id and their password hash.
    async fn credentials_by_id(&self, id: UserId) -> Result<Option<UserCredentials>, StoreError>;

    /// Saves a changed profile (name) with its event. Returns false when the user is gone.
    async fn update_user(&self, user: User, event: NewEvent) -> Result<bool, StoreError>;

    /// The hashes of the user's previous passwords (not the current one), newest first, at most
    /// `limit`.
    async fn previous_password_hashes(
        &self,
        user_id: UserId,
        limit: u32,
    ) -> Result<Vec<PasswordHash>, StoreError>;

    /// Replaces the password hash (the old one joins the user's password history, which keeps
    /// the 24 newest), ends every session of the user but `keep`, and records the event, in one
    /// transaction.
    async fn change_password(
        &self,
        user_id: UserId,
        hash: PasswordHash,
        keep: Option<SessionId>,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<(), StoreError>;
}

/// Login sessions.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SessionStore: Send + Sync + 'static {
    /// Stores a new session and its `auth.login` event. With `keep_at_most`, the user's oldest
    /// live sessions are revoked in the same transaction until at most that many remain live,
    /// the new one included.
    async fn create_session(
        &self,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
    ) -> Result<(), StoreError>;

    /// The session whose refresh token has this hash, if it is neither revoked nor expired at
    /// `now`, as it stands (its `last_used_at` unchanged).
    async fn session_by_refresh_token(
        &self,
        hash: &TokenHash,
        now: DateTime<Utc>,
    ) -> Result<Option<Session>, StoreError>;

    /// Marks a live session used at `now`. Returns false when it is no longer live.
    async fn touch_session(&self, id: SessionId, now: DateTime<Utc>) -> Result<bool, StoreError>;

    /// Whether the session is neither revoked nor expired at `now`: one indexed read, done on
    /// every authenticated request so that a logout takes effect at once on every replica.
    async fn is_live(&self, id: SessionId, now: DateTime<Utc>) -> Result<bool, StoreError>;

    /// Revokes the session and records the event. Returns false when it was not live.
    async fn end_session(
        &self,
        id: SessionId,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;
}

/// API keys.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait ApiKeyStore: Send + Sync + 'static {
    async fn create_api_key(&self, key: NewApiKey) -> Result<ApiKey, StoreError>;

    /// The keys a user created, newest first.
    async fn api_keys_of(&self, user_id: UserId) -> Result<Vec<ApiKey>, StoreError>;

    /// Deletes one of the user's keys. Returns false when the user has no such key.
    async fn delete_api_key(&self, user_id: UserId, id: ApiKeyId) -> Result<bool, StoreError>;

    /// The key with this hash, when its organization is live; marks it used at `now`.
    async fn use_api_key(
        &self,
        hash: &TokenHash,
        now: DateTime<Utc>,
    ) -> Result<Option<ApiKey>, StoreError>;
}

/// Who belongs where, with which role.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait MembershipStore: Send + Sync + 'static {
    /// The user's active membership in the organization, when the organization is live.
    async fn membership(
        &self,
        user_id: UserId,
        organization_id: OrganizationId,
    ) -> Result<Option<Membership>, StoreError>;

    /// The highest plan among the user's live organizations (what sizes the rate limit of a
    /// request made outside any organization).
    async fn highest_plan(&self, user_id: UserId) -> Result<Option<Plan>, StoreError>;
}

/// Organizations.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait OrganizationStore: Send + Sync + 'static {
    /// The first of `base`'s candidates (`base`, `base-2`, ...) that no organization uses.
    async fn first_free_slug(&self, base: &Slug) -> Result<Slug, StoreError>;

    /// Creates the organization with `owner` as its owner, and records the events.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the slug is taken.
    async fn create_organization(
        &self,
        organization: NewOrganization,
        owner: UserId,
        events: Vec<NewEvent>,
    ) -> Result<(), StoreError>;

    /// The live organizations the user is an active member of, filtered, newest first.
    async fn organizations_of(
        &self,
        user_id: UserId,
        filter: OrganizationFilter,
        page: PageRequest,
    ) -> Result<Page<Organization>, StoreError>;

    /// A live organization, with its counts.
    async fn organization(&self, id: OrganizationId) -> Result<Option<Organization>, StoreError>;

    /// Saves the changed fields and records the event. Returns false when the organization is
    /// not live.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the new slug is taken.
    async fn update_organization(
        &self,
        id: OrganizationId,
        change: OrganizationChange,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// Soft-deletes: `is_active = false`, `deleted_at = at`. Its members lose access at once.
    /// Returns false when it was not live.
    async fn delete_organization(
        &self,
        id: OrganizationId,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// Removes for good the organizations soft-deleted before `deleted_before`, with everything
    /// that belongs to them. Returns how many went.
    async fn purge_organizations(&self, deleted_before: DateTime<Utc>) -> Result<u64, StoreError>;

    /// Sets the plan of a live organization and records the event. Returns false when it is not
    /// live.
    async fn set_plan(
        &self,
        id: OrganizationId,
        plan: Plan,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;
}

/// An organization's saved policies and when they were saved.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedPolicies {
    pub policies: OrganizationPolicies,
    pub updated_at: DateTime<Utc>,
}

/// An organization's plan and its saved policies (`None` when it never saved any): what
/// [`crate::model::EffectivePolicies::of`] folds.
pub type PlanPolicies = (Plan, Option<OrganizationPolicies>);

/// Organization policies.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait PolicyStore: Send + Sync + 'static {
    /// The organization's saved policies, `None` when it never saved any.
    async fn policies(&self, id: OrganizationId) -> Result<Option<SavedPolicies>, StoreError>;

    /// Replaces the policies of a live organization and records the event. Returns false when
    /// the organization is not live.
    async fn save_policies(
        &self,
        id: OrganizationId,
        policies: OrganizationPolicies,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// The plans and policies of the live organizations the user is an active member of.
    async fn policies_of_member(&self, user_id: UserId) -> Result<Vec<PlanPolicies>, StoreError>;

    /// The plans and policies of the live organizations holding a pending invitation for the
    /// email that has not expired at `now`.
    async fn policies_of_invitee(
        &self,
        email: &Email,
        now: DateTime<Utc>,
    ) -> Result<Vec<PlanPolicies>, StoreError>;
}

/// An organization's saved branding and when it was saved.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedBranding {
    pub branding: Branding,
    pub updated_at: DateTime<Utc>,
}

/// White-label branding.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait BrandingStore: Send + Sync + 'static {
    /// The organization's saved branding, `None` when it never saved any.
    async fn branding(&self, id: OrganizationId) -> Result<Option<SavedBranding>, StoreError>;

    /// Replaces the branding of a live organization and records the event. Returns false when
    /// the organization is not live.
    async fn save_branding(
        &self,
        id: OrganizationId,
        branding: Branding,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;
}

/// SAML single sign-on configurations, one per organization.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SsoStore: Send + Sync + 'static {
    async fn sso_configuration(
        &self,
        id: OrganizationId,
    ) -> Result<Option<SsoConfiguration>, StoreError>;

    /// Stores the configuration of a live organization and records the event. Returns false
    /// when the organization is not live.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the organization has a configuration already.
    async fn create_sso_configuration(
        &self,
        configuration: SsoConfiguration,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// Replaces the organization's configuration and records the event. Returns false when it
    /// has none or is not live.
    async fn update_sso_configuration(
        &self,
        configuration: SsoConfiguration,
        event: NewEvent,
    ) -> Result<bool, StoreError>;
}

/// Applications (OAuth clients). Every read and write of an organization's applications takes
/// the organization id: tenancy is in the query.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait ApplicationStore: Send + Sync + 'static {
    /// Stores the application of a live organization and records the event, in one
    /// transaction. Returns false when the organization is not live.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the client id is taken (a collision of 128 random bits).
    async fn create_application(
        &self,
        new: NewApplication,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// The organization's applications, newest first.
    async fn applications(
        &self,
        organization_id: OrganizationId,
        page: PageRequest,
    ) -> Result<Page<Application>, StoreError>;

    async fn application(
        &self,
        organization_id: OrganizationId,
        id: ApplicationId,
    ) -> Result<Option<Application>, StoreError>;

    /// Saves the application's name, redirect URIs, active flag and `updated_at` as given, and
    /// the secret's hash when one is given, with the event, in one transaction. Returns false
    /// when the organization has no such application.
    async fn update_application(
        &self,
        application: Application,
        secret_hash: Option<TokenHash>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// Deletes the application and records the event. Returns false when the organization has
    /// no such application.
    async fn delete_application(
        &self,
        organization_id: OrganizationId,
        id: ApplicationId,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// The application with this client id, in whichever organization, and its secret's hash:
    /// for the OAuth flow, which the client id alone identifies.
    async fn application_by_client_id(
        &self,
        client_id: &ClientId,
    ) -> Result<Option<(Application, TokenHash)>, StoreError>;
}

/// Authorization codes of the OAuth flow.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait AuthorizationCodeStore: Send + Sync + 'static {
    async fn save_authorization_code(&self, new: NewAuthorizationCode) -> Result<(), StoreError>;

    async fn authorization_code(&self, hash: &TokenHash) -> Result<Option<StoredCode>, StoreError>;

    /// Marks the code used at `at` by the session, and opens the session (recording its
    /// event; `keep_at_most` as for [`SessionStore::create_session`]), in one transaction.
    /// Returns false, writing nothing, when the code was used already (by a concurrent
    /// exchange) or is gone.
    async fn redeem_authorization_code(
        &self,
        hash: &TokenHash,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
}

/// Members and invitations.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait MemberStore: Send + Sync + 'static {
    /// Active members first (by join time), then pending invitations that have not expired at
    /// `now` (by invitation time), filtered and paginated.
    async fn members(
        &self,
        organization_id: OrganizationId,
        filter: MemberFilter,
        page: PageRequest,
        now: DateTime<Utc>,
    ) -> Result<Page<Member>, StoreError>;

    /// An active member.
    async fn member(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
    ) -> Result<Option<Member>, StoreError>;

    /// Whether someone with this email is an active member.
    async fn is_member_email(
        &self,
        organization_id: OrganizationId,
        email: &Email,
    ) -> Result<bool, StoreError>;

    /// Stores the invitation and its event. An earlier invitation of the same email that has
    /// expired at `invitation.invited_at` is closed first.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a live invitation for the email exists.
    async fn create_invitation(
        &self,
        invitation: NewInvitation,
        event: NewEvent,
    ) -> Result<(), StoreError>;

    /// The pending (not accepted, not revoked) invitation, even if expired.
    async fn invitation(&self, id: InvitationId) -> Result<Option<Invitation>, StoreError>;

    /// The pending invitation whose token has this hash, even if expired.
    async fn invitation_by_token(&self, hash: &TokenHash)
        -> Result<Option<Invitation>, StoreError>;

    /// Pending invitations addressed to the email that have not expired at `now`, in live
    /// organizations.
    async fn invitations_for(
        &self,
        email: &Email,
        now: DateTime<Utc>,
    ) -> Result<Vec<Invitation>, StoreError>;

    /// Turns the invitation into an active membership of `user_id`, and records the event.
    /// Returns false when the invitation is no longer pending.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the user is already a member.
    async fn accept_invitation(
        &self,
        id: InvitationId,
        user_id: UserId,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// Revokes a pending invitation of the organization. Returns false when there is none.
    async fn revoke_invitation(
        &self,
        organization_id: OrganizationId,
        id: InvitationId,
        at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;

    /// Changes an active member's role and records the event. Returns false when not a member.
    async fn change_role(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
        role: Role,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// Ends an active membership (the user's API keys for the organization go with it) and
    /// records the event. Returns false when not a member.
    async fn remove_member(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
        event: NewEvent,
    ) -> Result<bool, StoreError>;

    /// Live team organizations the user owns that have other active members.
    async fn owned_teams_with_members(
        &self,
        user_id: UserId,
    ) -> Result<Vec<OrganizationId>, StoreError>;

    /// Deletes the user, the organizations they own (personal workspaces, and teams where they
    /// are the only member) and their memberships, and records the events (recorded first, so
    /// that they still reach the user's organizations).
    async fn delete_user(&self, user_id: UserId, events: Vec<NewEvent>) -> Result<(), StoreError>;
}

/// A token-signing key pair at rest: the private key encrypted by the server's secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSigningKey {
    pub kid: String,
    /// The encrypted private key; only the signer adapter can open it.
    pub private_key_sealed: Vec<u8>,
    /// The public key, DER (PKCS#1), for the key set.
    pub public_key_der: Vec<u8>,
    pub created_at: DateTime<Utc>,
}

impl std::fmt::Debug for StoredSigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSigningKey")
            .field("kid", &self.kid)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

/// Token-signing keys, shared by every replica through the store.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SigningKeyStore: Send + Sync + 'static {
    /// Every stored key, newest first.
    async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>, StoreError>;

    async fn add_signing_key(&self, key: StoredSigningKey) -> Result<(), StoreError>;
}

/// The store's liveness, for `/readyz`.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait HealthStore: Send + Sync + 'static {
    /// One round trip to the database.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// The time.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

/// Identifiers and secrets from a cryptographically secure source.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Random: Send + Sync + 'static {
    /// A fresh, time-ordered id.
    fn uuid(&self) -> Uuid;
    /// A fresh 256-bit secret with the kind's prefix.
    fn secret(&self, kind: TokenKind) -> SecretToken;
}

#[derive(Debug, thiserror::Error)]
#[error("password hashing failed")]
pub struct HashError(#[source] pub BoxError);

/// Password hashing (argon2id). Implementations do the work off the async workers.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait PasswordHasher: Send + Sync + 'static {
    async fn hash(&self, password: NewPassword) -> Result<PasswordHash, HashError>;

    /// Whether `presented` matches `hash`. With no hash (unknown user) it still does the work of
    /// one verification and answers false, so that timing does not tell whether an account
    /// exists.
    async fn verify(
        &self,
        presented: String,
        hash: Option<PasswordHash>,
    ) -> Result<bool, HashError>;
}

/// The claims of an access token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct AccessClaims {
    pub iss: String,
    pub sub: UserId,
    pub aud: String,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
    pub jti: Uuid,
    pub sid: SessionId,
    pub email: String,
    /// The application, for a token issued through the OAuth flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The scope granted to that application (space-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Malformed, badly signed, expired, not yet valid, or for another issuer or audience.
    #[error("the token is not valid")]
    Invalid,
    #[error("token signing failed")]
    Failed(#[source] BoxError),
}

/// One public key of the JSON Web Key Set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PublicJwk {
    pub kty: &'static str,
    #[serde(rename = "use")]
    pub use_: &'static str,
    pub alg: &'static str,
    pub kid: String,
    pub n: String,
    pub e: String,
}

/// Issues and checks access tokens (RS256 JWTs).
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait TokenSigner: Send + Sync + 'static {
    async fn sign(&self, claims: &AccessClaims) -> Result<String, TokenError>;
    /// Checks signature, `iss`, `aud`, `exp` and `nbf`, and returns the claims.
    async fn verify(&self, token: &str) -> Result<AccessClaims, TokenError>;
    /// The public keys that verify tokens still in circulation.
    async fn public_keys(&self) -> Result<Vec<PublicJwk>, TokenError>;
}

/// The outcome of counting one request against a rate limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateDecision {
    /// Whether the request is within the limit.
    pub allowed: bool,
    /// Requests allowed per window.
    pub limit: u32,
    /// Requests left in the current window after this one (0 when refused).
    pub remaining: u32,
    /// When the current window ends and the count starts again.
    pub reset_at: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error)]
#[error("the rate limiter is unavailable")]
pub struct RateLimitError(#[source] pub BoxError);

/// Request counters in fixed one-minute windows, per key (a principal or a client address).
/// In-process by default; shared by every replica when backed by Redis.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait RateLimiter: Send + Sync + 'static {
    /// Counts one request for `key` in the window that contains `now`, allowing `limit` per
    /// window. A refused request is not counted against later windows.
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached; callers let the request through.
    async fn hit(
        &self,
        key: &str,
        limit: u32,
        now: DateTime<Utc>,
    ) -> Result<RateDecision, RateLimitError>;
}

/// Failed sign-ins per account, for brute-force protection (see [`LockoutRule`]): in-process
/// for a single replica, shared by every replica through Redis.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SignInAttempts: Send + Sync + 'static {
    /// The account's run of failures as it stands at `now`; no run is the default (zero
    /// failures, not locked).
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached; callers let the attempt through.
    async fn failed_sign_ins(
        &self,
        account: &AccountKey,
        now: DateTime<Utc>,
    ) -> Result<FailedSignIns, RateLimitError>;

    /// Counts one failure in the account's run (a new run when none is going at `now`), locks
    /// the account for what `rule` says the new count earns, and returns the run as it now
    /// stands. Concurrent failures each count.
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached.
    async fn record_failure(
        &self,
        account: &AccountKey,
        now: DateTime<Utc>,
        rule: &LockoutRule,
    ) -> Result<FailedSignIns, RateLimitError>;

    /// Forgets the account's run: its password was right.
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached.
    async fn clear(&self, account: &AccountKey) -> Result<(), RateLimitError>;
}

/// An email about to be sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Mail {
    pub to: Email,
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// The sender's display name in place of the configured one (an organization's branding);
    /// the sending address stays the configured one.
    pub sender_name: Option<String>,
    pub reply_to: Option<Email>,
}

impl Mail {
    /// A mail from the service as configured.
    pub fn new(to: Email, subject: String, text: String) -> Self {
        Self {
            to,
            subject,
            text,
            sender_name: None,
            reply_to: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("sending mail failed")]
pub struct MailError(#[source] pub BoxError);

/// Outgoing email: SMTP, a mail directory, or the log.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Mailer: Send + Sync + 'static {
    async fn send(&self, mail: Mail) -> Result<(), MailError>;
}

/// A webhook endpoint about to be stored, with its signing secret sealed.
#[derive(Clone, PartialEq)]
pub struct NewEndpoint {
    pub endpoint: WebhookEndpoint,
    pub secret_sealed: Vec<u8>,
}

impl std::fmt::Debug for NewEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewEndpoint")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// A change to an endpoint: only the `Some` fields change.
#[derive(Clone, Default, PartialEq)]
pub struct EndpointChange {
    pub url: Option<WebhookUrl>,
    pub description: Option<String>,
    pub events: Option<Vec<EventType>>,
    /// A rotated signing secret, sealed.
    pub secret_sealed: Option<Vec<u8>>,
    pub is_active: Option<bool>,
}

impl std::fmt::Debug for EndpointChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointChange")
            .field("url", &self.url)
            .field("events", &self.events)
            .field("rotates_secret", &self.secret_sealed.is_some())
            .field("is_active", &self.is_active)
            .finish_non_exhaustive()
    }
}

/// An endpoint with what its detail view shows.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointDetail {
    pub endpoint: WebhookEndpoint,
    pub last_delivery_at: Option<DateTime<Utc>>,
    pub stats: DeliveryStats,
}

/// Filters of the delivery log.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeliveryFilter {
    pub status: Option<DeliveryStatus>,
    pub event: Option<EventType>,
}

/// What a manual retry found.
#[derive(Clone, Debug, PartialEq)]
pub enum RetryOutcome {
    NotFound,
    AlreadyPending,
    /// Re-queued for now; the delivery as it stands.
    Queued(Delivery),
}

/// An event of the outbox not yet turned into deliveries.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingEvent {
    pub id: EventId,
    pub event_type: EventType,
    /// The organization the event goes to (`None`: a user's event from before they belonged to
    /// any organization; it is kept, and delivered nowhere).
    pub organization_id: Option<OrganizationId>,
    pub data: serde_json::Value,
    pub occurred_at: DateTime<Utc>,
}

/// A delivery about to be created by the dispatcher.
#[derive(Clone, Debug, PartialEq)]
pub struct NewDelivery {
    pub id: DeliveryId,
    pub endpoint_id: EndpointId,
    /// The exact JSON body every attempt sends and signs.
    pub payload: String,
}

/// A delivery leased by a worker for one attempt.
#[derive(Clone, PartialEq)]
pub struct LeasedDelivery {
    pub id: DeliveryId,
    pub endpoint_id: EndpointId,
    pub organization_id: OrganizationId,
    pub url: WebhookUrl,
    pub secret_sealed: Vec<u8>,
    pub event: EventType,
    pub payload: String,
    /// The number of the attempt being made (1 for the first).
    pub attempt: u32,
    /// Proves the lease when the attempt is recorded.
    pub lease: Uuid,
}

impl std::fmt::Debug for LeasedDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedDelivery")
            .field("id", &self.id)
            .field("endpoint_id", &self.endpoint_id)
            .field("event", &self.event)
            .field("attempt", &self.attempt)
            .finish_non_exhaustive()
    }
}

/// The result of one attempt, to record.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptRecord {
    pub delivery_id: DeliveryId,
    pub endpoint_id: EndpointId,
    pub lease: Uuid,
    pub attempt: u32,
    pub succeeded: bool,
    pub http_status: Option<u16>,
    pub response_body: Option<String>,
    pub duration_ms: u64,
    pub attempted_at: DateTime<Utc>,
    /// When a failed attempt is retried; `None` after a success or a last failure.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Consecutive failures at which the endpoint is deactivated.
    pub disable_after_failures: u32,
}

/// What recording an attempt changed beyond the delivery.
#[derive(Clone, Debug, PartialEq)]
pub struct AttemptEffects {
    /// This failure was the one that made the endpoint inactive.
    pub endpoint_disabled: bool,
}

/// Webhook endpoints, deliveries and the outbox's dispatch. Every read and write of an
/// organization's webhooks takes the organization id: tenancy is in the query.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait WebhookStore: Send + Sync + 'static {
    async fn create_endpoint(&self, endpoint: NewEndpoint) -> Result<(), StoreError>;

    /// The organization's endpoints, newest first.
    async fn endpoints(
        &self,
        organization_id: OrganizationId,
        is_active: Option<bool>,
        page: PageRequest,
    ) -> Result<Page<WebhookEndpoint>, StoreError>;

    async fn endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
    ) -> Result<Option<EndpointDetail>, StoreError>;

    /// Changes the endpoint; turning it back on also clears its run of failures. `None` when
    /// the organization has no such endpoint.
    async fn update_endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
        change: EndpointChange,
        at: DateTime<Utc>,
    ) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// Removes the endpoint and its deliveries: nothing pending is sent any more.
    async fn delete_endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
    ) -> Result<bool, StoreError>;

    /// The endpoint's deliveries, newest first; `None` when there is no such endpoint.
    async fn deliveries(
        &self,
        organization_id: OrganizationId,
        endpoint_id: EndpointId,
        filter: DeliveryFilter,
        page: PageRequest,
    ) -> Result<Option<Page<Delivery>>, StoreError>;

    /// Re-queues a delivery that is not pending, for now, as a new attempt.
    async fn retry_delivery(
        &self,
        organization_id: OrganizationId,
        id: DeliveryId,
        at: DateTime<Utc>,
    ) -> Result<RetryOutcome, StoreError>;

    /// Outbox events not yet dispatched, oldest first.
    async fn pending_events(&self, limit: i64) -> Result<Vec<PendingEvent>, StoreError>;

    /// The organization's active endpoints subscribed to the event type.
    async fn subscribed_endpoints(
        &self,
        organization_id: OrganizationId,
        event: EventType,
    ) -> Result<Vec<EndpointId>, StoreError>;

    /// Creates each event's deliveries (due at `at`) and marks it dispatched, all in one
    /// transaction, in order. A delivery for an (event, endpoint) pair that exists already is
    /// skipped, so a dispatch repeated after a crash never doubles deliveries.
    async fn dispatch_events(
        &self,
        events: Vec<(EventId, Vec<NewDelivery>)>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;

    /// [`Self::dispatch_events`] of one event.
    async fn dispatch_event(
        &self,
        event_id: EventId,
        deliveries: Vec<NewDelivery>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.dispatch_events(vec![(event_id, deliveries)], at).await
    }

    /// Leases due deliveries of active endpoints, oldest due first, as many as fit in `room`
    /// (in all and at each endpoint), until `lease_until`. A lease is exclusive: no other
    /// worker in any process gets the same delivery until it expires or the attempt is
    /// recorded.
    async fn lease_deliveries(
        &self,
        now: DateTime<Utc>,
        lease_until: DateTime<Utc>,
        room: LeaseRoom,
    ) -> Result<Vec<LeasedDelivery>, StoreError>;

    /// Gives leases back unused (their deliveries are due again at once). Leases that no
    /// longer hold are ignored.
    async fn release_deliveries(&self, leases: Vec<(DeliveryId, Uuid)>) -> Result<(), StoreError>;

    /// Records attempts, in one transaction and in order: each if its lease still holds (`None`
    /// in its place otherwise: the attempt was taken over or the endpoint deleted), updating
    /// its endpoint's run of failures. One answer per record, in the records' order.
    async fn record_attempts(
        &self,
        records: Vec<AttemptRecord>,
    ) -> Result<Vec<Option<AttemptEffects>>, StoreError>;

    /// [`Self::record_attempts`] of one record.
    async fn record_attempt(
        &self,
        record: AttemptRecord,
    ) -> Result<Option<AttemptEffects>, StoreError> {
        Ok(self.record_attempts(vec![record]).await?.pop().flatten())
    }
}

/// Seals and opens secrets at rest (AES-256-GCM under the server's secret key).
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SecretCipher: Send + Sync + 'static {
    fn seal(&self, plaintext: &[u8], context: &[u8]) -> Result<Vec<u8>, CipherError>;
    fn open(&self, sealed: &[u8], context: &[u8]) -> Result<Vec<u8>, CipherError>;
}

#[derive(Debug, thiserror::Error)]
#[error("sealing or opening a secret failed")]
pub struct CipherError(#[source] pub BoxError);

/// A signed webhook request, ready to send.
#[derive(Clone, PartialEq, Eq)]
pub struct WebhookRequest {
    pub url: WebhookUrl,
    /// Header names and values, in order (the signature among them).
    pub headers: Vec<(&'static str, String)>,
    /// The exact bytes that were signed.
    pub body: Vec<u8>,
}

impl std::fmt::Debug for WebhookRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may carry a token in its query; the signature header is a secret's output.
        f.debug_struct("WebhookRequest")
            .field("body_bytes", &self.body.len())
            .finish_non_exhaustive()
    }
}

/// What came of one attempt to send a webhook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookResponse {
    /// The receiver answered (any status; 2xx is a success).
    Answered {
        status: u16,
        /// The start of the response body, at most a few KiB, lossily decoded.
        body: String,
        duration_ms: u64,
    },
    /// No answer: refused target, DNS failure, connection or TLS error, timeout.
    Failed { error: String, duration_ms: u64 },
}

/// Sends webhook requests over HTTPS: no redirects followed, a hard timeout, private and
/// loopback targets refused unless allowed.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait WebhookSender: Send + Sync + 'static {
    async fn send(&self, request: WebhookRequest) -> WebhookResponse;
}

/// Every port, as the services take them.
#[derive(Clone)]
pub struct Ports {
    pub accounts: Arc<dyn AccountStore>,
    pub sessions: Arc<dyn SessionStore>,
    pub api_keys: Arc<dyn ApiKeyStore>,
    pub memberships: Arc<dyn MembershipStore>,
    pub organizations: Arc<dyn OrganizationStore>,
    pub members: Arc<dyn MemberStore>,
    pub policies: Arc<dyn PolicyStore>,
    pub branding: Arc<dyn BrandingStore>,
    pub sso: Arc<dyn SsoStore>,
    pub applications: Arc<dyn ApplicationStore>,
    pub authorization_codes: Arc<dyn AuthorizationCodeStore>,
    pub health: Arc<dyn HealthStore>,
    pub clock: Arc<dyn Clock>,
    pub random: Arc<dyn Random>,
    pub hasher: Arc<dyn PasswordHasher>,
    pub signer: Arc<dyn TokenSigner>,
    pub mailer: Arc<dyn Mailer>,
    pub rate_limiter: Arc<dyn RateLimiter>,
    pub sign_in_attempts: Arc<dyn SignInAttempts>,
    pub webhooks: Arc<dyn WebhookStore>,
    pub cipher: Arc<dyn SecretCipher>,
    pub sender: Arc<dyn WebhookSender>,
}
