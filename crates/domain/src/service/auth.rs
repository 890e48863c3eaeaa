//! Accounts and tokens: register, log in, refresh, log out, change password, profile.

use serde::Serialize;
use serde_json::json;
use time::{Duration, OffsetDateTime};

use super::{
    audit, event, payloads,
    principal::{admit, OrgAccessError},
    sso_realm::Realms,
    Principal,
};
use crate::{
    model::{
        password_user_inputs, AccountKey, Amr, ApplicationId, AuditAction, AuditActor, AuditRecord,
        AuthMethod, ClientAddress, ClientGrant, EffectivePolicies, Email, EventType, Feature,
        FullName, LockoutRule, MfaFactor, MfaLogin, MfaMethod, NewEvent, NewOrganization,
        NewPassword, NewSession, NewUser, Organization, OrganizationChoice, OrganizationId,
        OrganizationName, OrganizationSettings, OrganizationType, Origin, PasswordCandidate,
        PasswordError, PasswordHash, PasswordPolicy, Plan, SecretToken, SessionId, Slug,
        TargetKind, TokenHash, TokenKind, TokenOrganization, User, UserCredentials, UserId,
        MFA_TOKEN_TTL, SESSION_TOUCH_INTERVAL,
    },
    ports::{
        service_ports, AccessClaims, Audience, BoxError, HashError, JudgeError, NewAccount,
        RefreshContext, StoreError, TokenError, WebauthnError, GATEHOUSE_AUDIENCE,
    },
};

/// A session about to open (see [`AuthService::opening`]).
pub(crate) struct Opening {
    pub session: NewSession,
    pub event: NewEvent,
    pub keep_at_most: Option<u32>,
    refresh_token: SecretToken,
    policies: EffectivePolicies,
    user: User,
    organization: Option<TokenOrganization>,
}

impl Opening {
    /// The same session, its tokens speaking for `organization` (admitted by the caller).
    pub(crate) fn for_organization(mut self, organization: Option<TokenOrganization>) -> Self {
        self.session.organization_id = organization.as_ref().map(|o| o.organization_id);
        self.organization = organization;
        self
    }
}

/// Who changes a password, for its audit record, and the session that stays open.
pub(crate) struct Changer<'a> {
    /// The actor of the record.
    pub actor: AuditActor,
    /// Where the request came from.
    pub origin: &'a Origin,
    /// The session that stays open (the caller's own), if any.
    pub keep: Option<SessionId>,
}

/// Lifetimes and names that go into tokens.
#[derive(Clone, Debug)]
pub struct AuthSettings {
    /// `iss` of access tokens: the public URL.
    pub issuer: String,
    /// How long an access token is valid (one hour by default).
    pub access_token_ttl: Duration,
    /// How long a refresh token is valid (30 days by default).
    pub refresh_token_ttl: Duration,
}

impl AuthSettings {
    /// `aud` of every access token Gatehouse issues.
    pub const AUDIENCE: &'static str = GATEHOUSE_AUDIENCE;

    /// The default lifetimes, for tokens issued by `issuer`.
    pub fn new(issuer: String) -> Self {
        Self {
            issuer,
            access_token_ttl: Duration::seconds(3600),
            refresh_token_ttl: Duration::days(30),
        }
    }
}

/// What registration returns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Registered {
    /// The new user.
    pub user_id: UserId,
    /// Their email, as registered (trimmed, lowercased).
    pub email: Email,
    /// Their personal workspace, created with them.
    pub organization_id: OrganizationId,
}

/// An access token and its lifetime (the refresh response).
#[derive(Clone, PartialEq, Serialize)]
pub struct AccessToken {
    /// The RS256 JWT.
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: &'static str,
    /// Seconds until the access token expires.
    pub expires_in: i64,
}

/// The login response.
#[derive(Clone, PartialEq, Serialize)]
pub struct TokenPair {
    /// The access token.
    #[serde(flatten)]
    pub access: AccessToken,
    /// The refresh token (`ghr_…`): shown in this response only, stored as its SHA-256.
    #[serde(serialize_with = "expose_secret")]
    pub refresh_token: SecretToken,
}

fn expose_secret<S: serde::Serializer>(secret: &SecretToken, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose())
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TokenPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenPair").finish_non_exhaustive()
    }
}

/// Who is signed in on the hosted pages, by their session cookie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrowserSession {
    /// The signed-in user.
    pub user_id: UserId,
    /// The session the cookie holds the refresh token of.
    pub session_id: SessionId,
    /// How the user signed in; an application's code, and the session it opens, say the same.
    pub amr: Amr,
    /// When the user signed in (the session opened): an ID token's `auth_time`.
    pub authenticated_at: OffsetDateTime,
}

impl BrowserSession {
    /// The user as a caller of the use cases (signing out, for one).
    pub fn principal(&self) -> Principal {
        Principal::User {
            user_id: self.user_id,
            session_id: self.session_id,
            amr: self.amr.clone(),
            application: None,
        }
    }
}

/// Why registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// An account has the email.
    #[error("an account with this email already exists")]
    EmailTaken,
    /// The password breaks a rule of the policies that apply, or is a common one.
    #[error("password {0}")]
    WeakPassword(#[source] PasswordError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing the password or signing the token failed.
    #[error("registration failed")]
    Internal(#[source] BoxError),
}

/// Why a typed password did not become a [`NewPassword`]: it breaks a rule, or the judge
/// failed. Each use case turns it into its own error.
#[derive(Debug)]
pub(crate) enum PasswordRefused {
    /// A rule of the policy, or too easy to guess.
    Weak(PasswordError),
    /// The judge could not say.
    Failed(JudgeError),
}

impl From<PasswordRefused> for RegisterError {
    fn from(refused: PasswordRefused) -> Self {
        match refused {
            PasswordRefused::Weak(reason) => Self::WeakPassword(reason),
            PasswordRefused::Failed(error) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<PasswordRefused> for ChangePasswordError {
    fn from(refused: PasswordRefused) -> Self {
        match refused {
            PasswordRefused::Weak(reason) => Self::WeakPassword(reason),
            PasswordRefused::Failed(error) => Self::Internal(Box::new(error)),
        }
    }
}

/// An account locked out after too many failed sign-ins (see [`LockoutRule`]): every attempt
/// is refused, a right password too, until `retry_after` has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("too many failed sign-ins for this account; try again in {} seconds", self.seconds())]
pub struct LockedOut {
    /// How long until sign-ins are accepted again.
    pub retry_after: Duration,
}

impl LockedOut {
    /// The wait in whole seconds, rounded up, at least 1: what `Retry-After` says.
    pub fn seconds(&self) -> i64 {
        let millis = self.retry_after.whole_milliseconds();
        i64::try_from((millis.saturating_add(999) / 1000).max(1)).unwrap_or(i64::MAX)
    }
}

/// What a right password leads to.
#[derive(Debug)]
pub enum SignIn {
    /// No second factor: the session is open.
    Tokens(TokenPair),
    /// The user has a second factor: the sign-in goes on at `POST /auth/mfa/verify`.
    SecondFactor(SecondFactorNeeded),
}

impl SignIn {
    /// The tokens, when no second step is needed.
    pub fn into_tokens(self) -> Option<TokenPair> {
        match self {
            Self::Tokens(pair) => Some(pair),
            Self::SecondFactor(_) => None,
        }
    }
}

/// The second step a sign-in waits for.
#[derive(Clone, PartialEq)]
pub struct SecondFactorNeeded {
    /// The token that names this sign-in at the second step (`ghm_…`): five minutes, five
    /// wrong factors, one use. Shown once, stored as its SHA-256.
    pub mfa_token: SecretToken,
    /// The kinds of the user's confirmed factors (recovery codes always work too).
    pub methods: Vec<MfaMethod>,
    /// The WebAuthn request options for the user's keys, when they have any.
    pub webauthn_options: Option<serde_json::Value>,
}

impl std::fmt::Debug for SecondFactorNeeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecondFactorNeeded")
            .field("methods", &self.methods)
            .finish_non_exhaustive()
    }
}

/// Why a password could not be checked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckError {
    #[error(transparent)]
    LockedOut(LockedOut),
    #[error(transparent)]
    Hasher(HashError),
}

/// Why a login failed.
#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Unknown email or wrong password: deliberately the same error.
    #[error("invalid email or password")]
    InvalidCredentials,
    /// Too many failed sign-ins: the account is locked for a while.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// The password is right but older than an organization's `max_age_days`.
    #[error("{}", PASSWORD_EXPIRED)]
    PasswordExpired,
    /// The address belongs to an organization's single sign-on: it signs in there, at this
    /// URL (the organization's IdP), not with a password.
    #[error("{}", SSO_REQUIRED)]
    SsoRequired(String),
    /// The sign-in named an organization that does not admit the user.
    #[error(transparent)]
    NotAdmitted(OrganizationRefused),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing or signing failed.
    #[error("login failed")]
    Internal(#[source] BoxError),
}

/// What an address that must sign in with single sign-on is told.
pub const SSO_REQUIRED: &str = "this account signs in with single sign-on";

/// Why an organization named at a sign-in or a refresh (`organization_id`) does not let the
/// user's tokens speak for it: the one admission's answer, at this way in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrganizationRefused {
    /// Not an active member of a live organization (or no such organization): one answer.
    #[error("you are not a member of this organization")]
    NotMember,
    /// The organization's IP allowlist does not hold the request's address.
    #[error("requests from {0} are not allowed by the organization's IP allowlist")]
    AddressNotAllowed(ClientAddress),
    /// The organization requires a second factor this sign-in did not use, and the member's
    /// grace period is over.
    #[error("organization requires multi-factor authentication")]
    MfaRequired,
    /// The address is of a domain whose organization signs its members in with single
    /// sign-on, and this sign-in was not through its identity provider: at this URL.
    #[error("organization requires single sign-on")]
    SsoRequired(String),
}

/// Why a token could not be made to speak for an organization.
#[derive(Debug)]
pub(crate) enum Admitting {
    Refused(OrganizationRefused),
    Store(StoreError),
}

impl From<StoreError> for Admitting {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl From<Admitting> for LoginError {
    fn from(error: Admitting) -> Self {
        match error {
            Admitting::Refused(refused) => Self::NotAdmitted(refused),
            Admitting::Store(error) => Self::Store(error),
        }
    }
}

impl From<Admitting> for RefreshError {
    fn from(error: Admitting) -> Self {
        match error {
            Admitting::Refused(refused) => Self::NotAdmitted(refused),
            Admitting::Store(error) => Self::Store(error),
        }
    }
}

/// Why a refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// Unknown, expired or revoked refresh token, or its session has ended.
    #[error("the refresh token is invalid, expired or revoked")]
    InvalidToken,
    /// Not refreshed within the idle timeout of the user's session policy.
    #[error("the session timed out after {0} minutes without a refresh; log in again")]
    Idle(u32),
    /// Older than the maximum session duration of the user's session policy.
    #[error("the session reached its maximum duration of {0} hours; log in again")]
    TooOld(u32),
    /// The password is older than an organization's `max_age_days`: change it first.
    #[error("{}", PASSWORD_EXPIRED)]
    PasswordExpired,
    /// The organization the token would speak for does not admit the user (any more).
    #[error(transparent)]
    NotAdmitted(OrganizationRefused),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Signing the new access token failed.
    #[error("refresh failed")]
    Internal(#[source] BoxError),
}

/// What a refused login or refresh says when the password has expired.
pub const PASSWORD_EXPIRED: &str = "the password has expired under your organization's \
    password policy; choose a new one with POST /api/v1/auth/password/renew";

/// Why a password change failed.
#[derive(Debug, thiserror::Error)]
pub enum ChangePasswordError {
    /// The current password given is wrong.
    #[error("current password is incorrect")]
    WrongPassword,
    /// Renewing by email and password: the pair does not match.
    #[error("invalid email or password")]
    InvalidCredentials,
    /// Too many failed sign-ins: the account is locked for a while.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// The new password breaks a rule of the policies that apply, or is a common one.
    #[error("new password {0}")]
    WeakPassword(#[source] PasswordError),
    /// The new password is the current one.
    #[error("new password must differ from the current one")]
    Unchanged,
    /// The new password is one of the last `n` the policies ask to remember.
    #[error("new password must differ from your last {0} passwords")]
    Reused(u32),
    /// The account was deleted meanwhile.
    #[error("the user no longer exists")]
    UserGone,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing failed.
    #[error("password change failed")]
    Internal(#[source] BoxError),
}

/// Why a profile change failed.
#[derive(Debug, thiserror::Error)]
pub enum UpdateProfileError {
    /// The account was deleted meanwhile.
    #[error("the user no longer exists")]
    UserGone,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The fields of `PATCH /users/me`; `None` leaves a field as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileChange {
    /// A new full name; `None` keeps it.
    pub full_name: Option<FullName>,
}

impl From<CheckError> for LoginError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::LockedOut(locked) => Self::LockedOut(locked),
            CheckError::Hasher(e) => Self::Internal(Box::new(e)),
        }
    }
}

impl From<CheckError> for ChangePasswordError {
    fn from(e: CheckError) -> Self {
        match e {
            CheckError::LockedOut(locked) => Self::LockedOut(locked),
            CheckError::Hasher(e) => Self::Internal(Box::new(e)),
        }
    }
}

impl From<TokenError> for LoginError {
    fn from(e: TokenError) -> Self {
        Self::Internal(Box::new(e))
    }
}

impl From<TokenError> for RefreshError {
    fn from(e: TokenError) -> Self {
        Self::Internal(Box::new(e))
    }
}

service_ports! {
    /// The ports [`AuthService`] uses.
    pub struct AuthPorts { accounts: AccountStore, sessions: SessionStore, policies: PolicyStore, sso: SsoStore, domains: DomainStore, organizations: OrganizationStore, memberships: MembershipStore, sign_in_attempts: SignInAttempts, hasher: PasswordHasher, judge: PasswordJudge, signer: TokenSigner, mfa: MfaStore, webauthn: Webauthn, clock: Clock, random: Random, audit: AuditStore }
}

/// The account use cases.
#[derive(Clone)]
pub struct AuthService {
    ports: AuthPorts,
    settings: AuthSettings,
}

impl AuthService {
    /// A service on these ports, issuing tokens by `settings`.
    pub fn new(ports: AuthPorts, settings: AuthSettings) -> Self {
        Self { ports, settings }
    }

    /// `raw` as a new password: `policy`'s length and composition rules first (cheap), then
    /// the judge's score with `user_inputs` (what the person is known by).
    pub(crate) async fn new_password(
        &self,
        raw: &str,
        policy: &PasswordPolicy,
        user_inputs: &[String],
    ) -> Result<NewPassword, PasswordRefused> {
        let candidate = PasswordCandidate::parse(raw, policy).map_err(PasswordRefused::Weak)?;
        let strength = self
            .ports
            .judge
            .strength(&candidate, user_inputs)
            .await
            .map_err(PasswordRefused::Failed)?;
        candidate.judged(strength).map_err(PasswordRefused::Weak)
    }

    /// The lifetimes and issuer it issues tokens with.
    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// Creates the user, their personal workspace and the owner membership, and records
    /// `user.created` and `organization.created`.
    pub async fn register(
        &self,
        email: Email,
        password: &str,
        full_name: FullName,
        origin: &Origin,
    ) -> Result<Registered, RegisterError> {
        // Every policy is at least as strict as the default: refuse what fails it first, judged
        // with what the person is known by.
        let user_inputs = password_user_inputs(email.as_ref(), full_name.as_ref());
        let password = self
            .new_password(password, &PasswordPolicy::default(), &user_inputs)
            .await?;
        // Refuse a taken email before paying for a hash; the unique index settles races.
        if self
            .ports
            .accounts
            .credentials_by_email(&email)
            .await?
            .is_some()
        {
            return Err(RegisterError::EmailTaken);
        }
        // Someone invited into organizations with policies meets them from the start.
        let now = self.ports.clock.now();
        let invited_by = self.ports.policies.policies_of_invitee(&email, now).await?;
        let policy = fold(&invited_by).password;
        password
            .meets(&policy)
            .map_err(RegisterError::WeakPassword)?;
        let password_hash = self
            .ports
            .hasher
            .hash(password)
            .await
            .map_err(|e| RegisterError::Internal(Box::new(e)))?;
        let account = self.new_account(email, full_name, Some(password_hash), false, now);
        let registered = Registered {
            user_id: account.user.id,
            email: account.user.email.clone(),
            organization_id: account.workspace.id,
        };
        let record =
            self.sign_in_record(registered.user_id, AuditAction::UserRegistered, origin, now);
        match self.ports.accounts.create_account(account, record).await {
            Ok(()) => Ok(registered),
            Err(StoreError::Conflict) => Err(RegisterError::EmailTaken),
            Err(e) => Err(e.into()),
        }
    }

    /// A new user with their personal workspace, and the `user.created` and
    /// `organization.created` events that announce them: what registration (and single
    /// sign-on's provisioning, without a password) hands the store.
    pub(crate) fn new_account(
        &self,
        email: Email,
        full_name: FullName,
        password_hash: Option<PasswordHash>,
        email_verified: bool,
        now: OffsetDateTime,
    ) -> NewAccount {
        let random = self.ports.random.as_ref();
        let user = NewUser {
            id: random.uuid().into(),
            email,
            full_name,
            password_hash,
            email_verified,
            created_at: now,
        };
        let name = OrganizationName::personal_workspace_of(user.full_name.as_ref());
        let workspace = NewOrganization {
            id: random.uuid().into(),
            slug: Slug::generate_from(name.as_ref()),
            slug_generated: true,
            name,
            kind: OrganizationType::Personal,
            plan: Plan::Free,
            created_at: now,
        };
        let user_data = payloads::user(&User {
            id: user.id,
            email: user.email.clone(),
            full_name: user.full_name.clone(),
            created_at: now,
            updated_at: now,
            email_verified,
        });
        let org_data = payloads::organization(&Organization {
            id: workspace.id,
            name: workspace.name.clone(),
            slug: workspace.slug.clone(),
            kind: workspace.kind,
            plan: workspace.plan,
            is_active: true,
            settings: OrganizationSettings::default(),
            member_count: 1,
            application_count: 0,
            created_at: now,
            updated_at: now,
        });
        let events = vec![
            event(
                random,
                now,
                EventType::UserCreated,
                None,
                Some(user.id),
                user_data,
            ),
            event(
                random,
                now,
                EventType::OrganizationCreated,
                Some(workspace.id),
                Some(user.id),
                org_data,
            ),
        ];
        NewAccount {
            user,
            workspace,
            events,
        }
    }

    /// Checks the password and opens a session (an access token and a refresh token), or, for a
    /// user with a confirmed second factor, starts the second step instead.
    ///
    /// Every attempt is audited: a refused one on its own (`auth.login_failed`, naming the
    /// account when there is one), an accepted one in the transaction that opens the session
    /// (`auth.login`) or starts the second step (`auth.mfa_required`).
    ///
    /// With `organization`, the tokens speak for that organization (`org_id`, `org_role`,
    /// `org_permissions`) once it admits the user as every way into it does; a user with a
    /// second factor names it again at the second step.
    pub async fn login(
        &self,
        email: &str,
        password: String,
        organization: Option<OrganizationId>,
        origin: &Origin,
    ) -> Result<SignIn, LoginError> {
        // An email that does not parse cannot have an account; it still costs a verification.
        let parsed = Email::parse(email).ok();
        let credentials = match &parsed {
            Some(email) => self.ports.accounts.credentials_by_email(email).await?,
            None => None,
        };
        let actor = credentials
            .as_ref()
            .map_or(AuditActor::UnknownUser, |c| AuditActor::User(c.user.id));
        let barred = match &parsed {
            Some(email) => {
                self.sso_realm_barring(email, credentials.as_ref().map(|c| c.user.id))
                    .await?
            }
            None => None,
        };
        let signed_in = match barred {
            Some(login_url) => Err(LoginError::SsoRequired(login_url)),
            None => {
                self.login_as(credentials, email, password, organization, origin)
                    .await
            }
        };
        if let Err(
            LoginError::InvalidCredentials
            | LoginError::LockedOut(_)
            | LoginError::PasswordExpired
            | LoginError::SsoRequired(_)
            | LoginError::NotAdmitted(_),
        ) = &signed_in
        {
            self.refused(actor, origin).await?;
        }
        signed_in
    }

    /// Where the address must sign in instead, when an organization's single sign-on bars it
    /// from a password, a sign-in link or a password reset (its owner excepted): the IdP's
    /// sign-in URL.
    pub(crate) async fn sso_realm_barring(
        &self,
        email: &Email,
        user: Option<UserId>,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .realms()
            .enforced(email, user, &self.settings.issuer)
            .await?
            .map(|realm| realm.login_url))
    }

    /// Writes a record that goes with no change (a refusal): it stands alone.
    pub(crate) async fn record_alone(&self, record: AuditRecord) -> Result<(), StoreError> {
        self.ports.audit.record_audit(record).await
    }

    /// Writes the record of a refused sign-in: it changed nothing, so the record stands alone.
    pub(crate) async fn refused(
        &self,
        actor: AuditActor,
        origin: &Origin,
    ) -> Result<(), StoreError> {
        self.refused_in(actor, origin, None).await
    }

    /// [`Self::refused`], for a sign-in into one organization (SAML).
    pub(crate) async fn refused_in(
        &self,
        actor: AuditActor,
        origin: &Origin,
        organization: Option<OrganizationId>,
    ) -> Result<(), StoreError> {
        let mut record = audit(
            self.ports.random.as_ref(),
            self.ports.clock.now(),
            actor,
            AuditAction::LoginFailed,
            origin,
        )
        .failed();
        if let AuditActor::User(user_id) = actor {
            record = record.on(TargetKind::User, user_id);
        }
        if let Some(organization) = organization {
            record = record.in_organization(organization);
        }
        self.record_alone(record).await
    }

    /// A sign-in's record, for the transaction that makes its change.
    pub(crate) fn sign_in_record(
        &self,
        user_id: UserId,
        action: AuditAction,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> AuditRecord {
        audit(
            self.ports.random.as_ref(),
            now,
            AuditActor::User(user_id),
            action,
            origin,
        )
        .on(TargetKind::User, user_id)
    }

    async fn login_as(
        &self,
        credentials: Option<UserCredentials>,
        email: &str,
        password: String,
        organization: Option<OrganizationId>,
        origin: &Origin,
    ) -> Result<SignIn, LoginError> {
        let factors = match &credentials {
            Some(credentials) => self.confirmed_factors(credentials.user.id).await?,
            None => Vec::new(),
        };
        let hash = credentials.as_ref().and_then(|c| c.password_hash.clone());
        // With a second step to come, a right password does not clear the failed sign-ins:
        // only the whole sign-in does.
        let matches = self
            .check_password(
                &AccountKey::for_email(email),
                password,
                hash,
                factors.is_empty(),
            )
            .await?;
        let credentials = match credentials {
            Some(credentials) if matches => credentials,
            _ => return Err(LoginError::InvalidCredentials),
        };
        let now = self.ports.clock.now();
        let policies = self.policies_of(credentials.user.id).await?;
        if policies
            .password
            .is_expired(credentials.password_changed_at, now)
        {
            return Err(LoginError::PasswordExpired);
        }
        if !factors.is_empty() {
            return Ok(SignIn::SecondFactor(
                self.second_step(credentials.user.id, &factors, Amr::password(), now, origin)
                    .await?,
            ));
        }
        Ok(SignIn::Tokens(
            self.open_session(
                credentials.user,
                policies,
                Amr::password(),
                organization,
                now,
                origin,
            )
            .await?,
        ))
    }

    /// Opens a session for a sign-in that is complete (no second step to come): stored with
    /// its `auth.login`, then its tokens; with `organization`, once it admits the user, and
    /// its tokens speak for it. A refusal opens nothing.
    pub(crate) async fn open_session(
        &self,
        user: User,
        policies: EffectivePolicies,
        amr: Amr,
        organization: Option<OrganizationId>,
        now: OffsetDateTime,
        origin: &Origin,
    ) -> Result<TokenPair, LoginError> {
        let record = self.sign_in_record(user.id, AuditAction::LoginSucceeded, origin, now);
        let opening = self.opening(user, policies, None, amr, now);
        let opening = self
            .admitted_opening(opening, organization, Some(origin.client()))
            .await?;
        self.ports
            .sessions
            .create_session(
                opening.session.clone(),
                opening.event.clone(),
                opening.keep_at_most,
                record,
            )
            .await?;
        Ok(self.tokens_for(opening).await?)
    }

    /// The user's confirmed second factors.
    pub(crate) async fn confirmed_factors(
        &self,
        user_id: UserId,
    ) -> Result<Vec<MfaFactor>, StoreError> {
        let mut factors = self.ports.mfa.mfa_factors(user_id).await?;
        factors.retain(|factor| factor.confirmed_at.is_some());
        Ok(factors)
    }

    /// Starts the second step of a sign-in: a fresh `mfa_token`, and, when the user has
    /// security keys, the WebAuthn ceremony for them.
    pub(crate) async fn second_step(
        &self,
        user_id: UserId,
        factors: &[MfaFactor],
        first_factor: Amr,
        now: OffsetDateTime,
        origin: &Origin,
    ) -> Result<SecondFactorNeeded, LoginError> {
        let mut methods: Vec<MfaMethod> = Vec::new();
        for factor in factors {
            if !methods.contains(&factor.kind) {
                methods.push(factor.kind);
            }
        }
        let ceremony = if methods.contains(&MfaMethod::Webauthn) {
            let keys: Vec<_> = self
                .ports
                .mfa
                .webauthn_factors(user_id)
                .await?
                .into_iter()
                .filter(|key| key.factor.confirmed_at.is_some())
                .map(|key| key.passkey)
                .collect();
            match self.ports.webauthn.start_authentication(&keys) {
                Ok(ceremony) => Some(ceremony),
                // Keys registered before the public URL changed: codes still work.
                Err(error @ WebauthnError::Unavailable(_)) => {
                    tracing::warn!(%error, "a user's security keys cannot be offered");
                    None
                }
                Err(error) => return Err(LoginError::Internal(Box::new(error))),
            }
        } else {
            None
        };
        let token = self.ports.random.secret(TokenKind::MfaToken);
        let (options, state) = match ceremony {
            Some(ceremony) => (Some(ceremony.options), Some(ceremony.state)),
            None => (None, None),
        };
        self.ports
            .mfa
            .create_mfa_login(
                token.hash(),
                MfaLogin {
                    user_id,
                    first_factor,
                    created_at: now,
                    expires_at: now + MFA_TOKEN_TTL,
                    failures: 0,
                    webauthn_state: state,
                },
                self.sign_in_record(user_id, AuditAction::MfaRequired, origin, now),
            )
            .await?;
        Ok(SecondFactorNeeded {
            mfa_token: token,
            methods,
            webauthn_options: options,
        })
    }

    /// The session a sign-in opens for the user under their policies (and, through OAuth, for
    /// an application): what the store records, in whichever transaction the caller opens it.
    pub(crate) fn opening(
        &self,
        user: User,
        policies: EffectivePolicies,
        grant: Option<ClientGrant>,
        amr: Amr,
        now: OffsetDateTime,
    ) -> Opening {
        let refresh_token = self.ports.random.secret(TokenKind::Refresh);
        let mut expires_at = now + self.settings.refresh_token_ttl;
        if let Some(session) = &policies.session {
            expires_at = expires_at.min(now + session.max_duration());
        }
        let session = NewSession {
            id: self.ports.random.uuid().into(),
            user_id: user.id,
            refresh_token_hash: refresh_token.hash(),
            created_at: now,
            expires_at,
            grant,
            amr,
            sso_organization_id: None,
            organization_id: None,
        };
        let event = event(
            self.ports.random.as_ref(),
            now,
            EventType::AuthLogin,
            None,
            Some(user.id),
            json!({
                "user_id": user.id,
                "session_id": session.id,
                "method": session.amr.event_method(),
            }),
        );
        let keep_at_most = policies
            .session
            .map(|policy| policy.max_concurrent_sessions.get());
        Opening {
            session,
            event,
            keep_at_most,
            refresh_token,
            policies,
            user,
            organization: None,
        }
    }

    /// The opening, its tokens speaking for `organization` when one is named and it admits
    /// the user (from `client`: see [`Self::admit_token`]).
    pub(crate) async fn admitted_opening(
        &self,
        opening: Opening,
        organization: Option<OrganizationId>,
        client: Option<ClientAddress>,
    ) -> Result<Opening, Admitting> {
        let Some(organization) = organization else {
            return Ok(opening);
        };
        let admitted = self
            .admit_token(
                &opening.user,
                opening.session.id,
                &opening.session.amr,
                opening.session.sso_organization_id,
                organization,
                client,
                opening.session.created_at,
            )
            .await?;
        Ok(opening.for_organization(Some(admitted)))
    }

    /// The one admission, for a token that is to speak for an organization: the user is an
    /// active member of it, from an address its IP allowlist holds (`client`; `None` where the
    /// request is an application's server's, whose user was admitted at `/oauth/authorize`),
    /// with the second factor its MFA policy requires after the member's grace (its single
    /// sign-on is [`Self::sso_admits`]'s). What the token then says: the organization and the
    /// member's role.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn admit_token(
        &self,
        user: &User,
        session_id: SessionId,
        amr: &Amr,
        sso_organization: Option<OrganizationId>,
        organization_id: OrganizationId,
        client: Option<ClientAddress>,
        now: OffsetDateTime,
    ) -> Result<TokenOrganization, Admitting> {
        let refused = |why| Err(Admitting::Refused(why));
        let Some(membership) = self
            .ports
            .memberships
            .membership(user.id, organization_id)
            .await?
        else {
            return refused(OrganizationRefused::NotMember);
        };
        let policies = match membership.plan.includes(Feature::Policies) {
            true => self.ports.policies.policies(organization_id).await?,
            false => None,
        };
        let principal = Principal::User {
            user_id: user.id,
            session_id,
            amr: amr.clone(),
            application: None,
        };
        let admitted = admit(
            principal,
            membership.clone(),
            policies,
            sso_organization,
            client,
            now,
        );
        match admitted {
            Ok(_) => {}
            Err(OrgAccessError::AddressNotAllowed(address)) => {
                return refused(OrganizationRefused::AddressNotAllowed(address))
            }
            Err(OrgAccessError::MfaRequired) => return refused(OrganizationRefused::MfaRequired),
            Err(OrgAccessError::NotFound | OrgAccessError::NoApiScope) => {
                return refused(OrganizationRefused::NotMember)
            }
            Err(OrgAccessError::Store(error)) => return Err(error.into()),
        }
        Ok(TokenOrganization::of(&membership))
    }

    /// The organization's single sign-on, for a session that is to speak for it: when the
    /// organization signs the user's email domain in with its identity provider, only that
    /// IdP's sign-in (`ext` of this organization) will do, the owner's break-glass password
    /// excepted. A new sign-in met this rule at its first step (password, sign-in link:
    /// [`Self::sso_realm_barring`]); a refresh asks again, for a session opened before the
    /// organization turned single sign-on on.
    async fn sso_admits(
        &self,
        user: &User,
        amr: &Amr,
        sso_organization: Option<OrganizationId>,
        organization_id: OrganizationId,
    ) -> Result<(), Admitting> {
        if amr.includes(AuthMethod::External) && sso_organization == Some(organization_id) {
            return Ok(());
        }
        let realm = self
            .realms()
            .enforced(&user.email, Some(user.id), &self.settings.issuer)
            .await?;
        match realm {
            Some(realm) if realm.organization_id == organization_id => Err(Admitting::Refused(
                OrganizationRefused::SsoRequired(realm.login_url),
            )),
            _ => Ok(()),
        }
    }

    /// The stores single sign-on realms are read from.
    fn realms(&self) -> Realms<'_> {
        Realms {
            sso: self.ports.sso.as_ref(),
            domains: self.ports.domains.as_ref(),
            organizations: self.ports.organizations.as_ref(),
            memberships: self.ports.memberships.as_ref(),
        }
    }

    /// The tokens of a session that opened.
    pub(crate) async fn tokens_for(&self, opening: Opening) -> Result<TokenPair, TokenError> {
        let now = opening.session.created_at;
        let not_after = access_token_bound(&opening.policies, now, opening.session.expires_at);
        let access = self
            .issue_access_token(
                &opening.user,
                opening.session.id,
                opening.session.grant.as_ref(),
                &opening.session.amr,
                opening.organization.as_ref(),
                now,
                not_after,
            )
            .await?;
        Ok(TokenPair {
            access,
            refresh_token: opening.refresh_token,
        })
    }

    /// A new access token for a live session. The refresh token itself is not rotated (spec).
    /// The user's session policy is checked as it stands now: a session idle for longer than the
    /// idle timeout, or older than the maximum duration, is refused. `application` is the
    /// client refreshing through OAuth: a session an application was granted refreshes only
    /// for that application, and a password login's session only outside OAuth.
    ///
    /// `organization` chooses the organization the new token speaks for (the session keeps
    /// the choice for later refreshes); it is admitted again on every refresh, from `client`
    /// (the caller's address; `None` for an application's server), so that a removal, a role
    /// change or a new policy reaches the next token.
    pub async fn refresh(
        &self,
        refresh_token: &str,
        application: Option<ApplicationId>,
        organization: OrganizationChoice,
        client: Option<ClientAddress>,
    ) -> Result<AccessToken, RefreshError> {
        self.refresh_session(refresh_token, application, organization, client)
            .await
            .map(|(access, _)| access)
    }

    /// [`Self::refresh`], with what the session was granted (`None` for a sign-in of the
    /// user's own): the OAuth token endpoint answers with its scope, read in the same round trip.
    pub(crate) async fn refresh_session(
        &self,
        refresh_token: &str,
        application: Option<ApplicationId>,
        organization: OrganizationChoice,
        client: Option<ClientAddress>,
    ) -> Result<(AccessToken, Option<ClientGrant>), RefreshError> {
        let now = self.ports.clock.now();
        let hash = TokenHash::of(refresh_token);
        // The session, its user and the user's policies in one read: one round trip.
        let RefreshContext {
            session,
            credentials,
            policies,
        } = self
            .ports
            .sessions
            .refresh_context(&hash, now)
            .await?
            .filter(|found| found.session.grant.as_ref().map(|g| g.application_id) == application)
            .ok_or(RefreshError::InvalidToken)?;
        let policies = fold(&policies);
        if let Some(policy) = &policies.session {
            if now - session.last_used_at >= policy.idle_timeout() {
                return Err(RefreshError::Idle(policy.idle_timeout_minutes.get()));
            }
            if now - session.created_at >= policy.max_duration() {
                return Err(RefreshError::TooOld(
                    policy.max_session_duration_hours.get(),
                ));
            }
        }
        // Only a password sign-in's session depends on the password being current.
        if session.amr.includes(AuthMethod::Password)
            && policies
                .password
                .is_expired(credentials.password_changed_at, now)
        {
            return Err(RefreshError::PasswordExpired);
        }
        let scoped = organization.applied_to(session.organization_id);
        let speaks_for = match scoped {
            // An application's session: its organization admitted the member at
            // /oauth/authorize (from the member's own address, which this request, from the
            // application's server, is not), and every use of its tokens inside Gatehouse is
            // admitted again; the token says the member's role as it is now.
            Some(organization_id) if session.grant.is_some() => Some(
                self.ports
                    .memberships
                    .membership(credentials.user.id, organization_id)
                    .await?
                    .map(|membership| TokenOrganization::of(&membership))
                    .ok_or(RefreshError::NotAdmitted(OrganizationRefused::NotMember))?,
            ),
            Some(organization_id) => {
                let admitted = self
                    .admit_token(
                        &credentials.user,
                        session.id,
                        &session.amr,
                        session.sso_organization_id,
                        organization_id,
                        client,
                        now,
                    )
                    .await?;
                self.sso_admits(
                    &credentials.user,
                    &session.amr,
                    session.sso_organization_id,
                    organization_id,
                )
                .await?;
                Some(admitted)
            }
            None => None,
        };
        // The session was live when read; a revocation since then stops the access token at
        // its first use (every authenticated request checks the session).
        let still_live = if scoped != session.organization_id {
            self.ports
                .sessions
                .scope_session(session.id, scoped, now)
                .await?
        } else {
            now - session.last_used_at < SESSION_TOUCH_INTERVAL
                || self.ports.sessions.touch_session(session.id, now).await?
        };
        if !still_live {
            return Err(RefreshError::InvalidToken);
        }
        let mut ends_at = session.expires_at;
        if let Some(policy) = &policies.session {
            ends_at = ends_at.min(session.created_at + policy.max_duration());
        }
        let not_after = access_token_bound(&policies, now, ends_at);
        let access = self
            .issue_access_token(
                &credentials.user,
                session.id,
                session.grant.as_ref(),
                &session.amr,
                speaks_for.as_ref(),
                now,
                not_after,
            )
            .await?;
        Ok((access, session.grant))
    }

    /// Who is signed in on the hosted pages: the user of the live session whose refresh token
    /// the browser's session cookie holds (a sign-in on the pages, not a session an
    /// application was granted).
    pub async fn signed_in(
        &self,
        session_token: &str,
    ) -> Result<Option<BrowserSession>, StoreError> {
        let now = self.ports.clock.now();
        Ok(self
            .ports
            .sessions
            .session_by_refresh_token(&TokenHash::of(session_token), now)
            .await?
            .filter(|session| session.grant.is_none())
            .map(|session| BrowserSession {
                user_id: session.user_id,
                session_id: session.id,
                amr: session.amr,
                authenticated_at: session.created_at,
            }))
    }

    /// Ends the caller's session: its refresh token and every access token it issued stop
    /// working at once.
    pub async fn logout(&self, principal: &Principal, origin: &Origin) -> Result<(), StoreError> {
        let Principal::User {
            user_id,
            session_id,
            ..
        } = principal
        else {
            // An API key has no session to end.
            return Ok(());
        };
        let now = self.ports.clock.now();
        let logout_event = event(
            self.ports.random.as_ref(),
            now,
            EventType::AuthLogout,
            None,
            Some(*user_id),
            json!({ "user_id": user_id, "session_id": session_id }),
        );
        let record = self.sign_in_record(*user_id, AuditAction::Logout, origin, now);
        self.ports
            .sessions
            .end_session(*session_id, now, logout_event, record)
            .await?;
        Ok(())
    }

    /// Changes the caller's password after checking the current one; every other session of
    /// the user ends.
    pub async fn change_password(
        &self,
        principal: &Principal,
        current_password: String,
        new_password: &str,
        origin: &Origin,
    ) -> Result<(), ChangePasswordError> {
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(principal.user_id())
            .await?
            .ok_or(ChangePasswordError::UserGone)?;
        // Through an API key no session is current: every session ends.
        let changed_by = Changer {
            actor: AuditActor::of(principal),
            origin,
            keep: principal.session_id(),
        };
        self.set_password(credentials, current_password, new_password, changed_by)
            .await
    }

    /// Sets a new password for someone who cannot get a token because theirs has expired:
    /// authenticated by email and current password, it ends every session of the user.
    pub async fn renew_password(
        &self,
        email: &str,
        current_password: String,
        new_password: &str,
        origin: &Origin,
    ) -> Result<(), ChangePasswordError> {
        let credentials = match Email::parse(email) {
            Ok(email) => self.ports.accounts.credentials_by_email(&email).await?,
            Err(_) => None,
        };
        let Some(credentials) = credentials else {
            // The same work and counting as a wrong password: nothing reveals the account.
            self.check_password(&AccountKey::for_email(email), current_password, None, true)
                .await?;
            return Err(ChangePasswordError::InvalidCredentials);
        };
        let changed_by = Changer {
            actor: AuditActor::User(credentials.user.id),
            origin,
            keep: None,
        };
        match self
            .set_password(credentials, current_password, new_password, changed_by)
            .await
        {
            Err(ChangePasswordError::WrongPassword) => Err(ChangePasswordError::InvalidCredentials),
            other => other,
        }
    }

    /// Checks the current password and the policies of every organization the user belongs to
    /// (the strictest of them), then stores the new hash, ending every session but `keep`.
    async fn set_password(
        &self,
        credentials: UserCredentials,
        current_password: String,
        new_password: &str,
        changed_by: Changer<'_>,
    ) -> Result<(), ChangePasswordError> {
        let user_id = credentials.user.id;
        let policy = self.policies_of(user_id).await?.password;
        let user_inputs = password_user_inputs(
            credentials.user.email.as_ref(),
            credentials.user.full_name.as_ref(),
        );
        let new_password = self
            .new_password(new_password, &policy, &user_inputs)
            .await?;
        let unchanged = new_password.expose() == current_password;
        let account = AccountKey::for_email(credentials.user.email.as_ref());
        let matches = self
            .check_password(&account, current_password, credentials.password_hash, true)
            .await?;
        if !matches {
            return Err(ChangePasswordError::WrongPassword);
        }
        if unchanged {
            return Err(ChangePasswordError::Unchanged);
        }
        self.store_new_password(user_id, new_password, &policy, changed_by)
            .await
    }

    /// Stores a new password the policy admitted, unless it is one of the last ones the policy
    /// remembers: the old hash joins the history, every session but the changer's `keep` ends,
    /// and `auth.password_changed` is recorded and audited as the changer's.
    pub(crate) async fn store_new_password(
        &self,
        user_id: UserId,
        new_password: NewPassword,
        policy: &PasswordPolicy,
        changed_by: Changer<'_>,
    ) -> Result<(), ChangePasswordError> {
        let keep = changed_by.keep;
        let internal = |e| ChangePasswordError::Internal(Box::new(e));
        let remembered = policy.prevent_reuse_count.get();
        if remembered > 0 {
            let previous = self
                .ports
                .accounts
                .previous_password_hashes(user_id, remembered)
                .await?;
            for hash in previous {
                let reused = self
                    .ports
                    .hasher
                    .verify(new_password.expose().to_owned(), Some(hash))
                    .await
                    .map_err(internal)?;
                if reused {
                    return Err(ChangePasswordError::Reused(remembered));
                }
            }
        }
        let hash = self
            .ports
            .hasher
            .hash(new_password)
            .await
            .map_err(internal)?;
        let now = self.ports.clock.now();
        let changed = event(
            self.ports.random.as_ref(),
            now,
            EventType::AuthPasswordChanged,
            None,
            Some(user_id),
            json!({ "user_id": user_id, "session_id": keep }),
        );
        let record = audit(
            self.ports.random.as_ref(),
            now,
            changed_by.actor,
            AuditAction::PasswordChanged,
            changed_by.origin,
        )
        .on(TargetKind::User, user_id);
        self.ports
            .accounts
            .change_password(user_id, hash, keep, now, changed, record)
            .await?;
        Ok(())
    }

    /// Whether `password` is the account's: the one place where a password is checked for
    /// someone signing in. Refused while the account is locked out (a right password too);
    /// a wrong one counts towards a lockout, a right one ends the count. `hash` is `None` when
    /// the email names no account: the same work and the same counting, so that neither the
    /// answer nor its timing tells the two apart. A password longer than any that can be set
    /// is wrong without hashing it. A right password clears the count only when `clear` (not
    /// when a second step is still to come).
    pub(crate) async fn check_password(
        &self,
        account: &AccountKey,
        password: String,
        hash: Option<PasswordHash>,
        clear: bool,
    ) -> Result<bool, CheckError> {
        let attempts = &self.ports.sign_in_attempts;
        let now = self.ports.clock.now();
        match attempts.failed_sign_ins(account, now).await {
            Ok(run) => {
                if let Some(retry_after) = run.retry_after(now) {
                    return Err(CheckError::LockedOut(LockedOut { retry_after }));
                }
            }
            // Fail open: an unreachable counter store must not lock everybody out.
            Err(error) => tracing::warn!(%error, "failed sign-ins not checked"),
        }
        let matches = if password.chars().count() > NewPassword::MAX_CHARS {
            false
        } else {
            self.ports
                .hasher
                .verify(password, hash.clone())
                .await
                .map_err(CheckError::Hasher)?
        };
        let counted = if matches && hash.is_some() {
            if clear {
                attempts.clear(account).await
            } else {
                Ok(())
            }
        } else {
            attempts
                .record_failure(account, now, &LockoutRule::DEFAULT)
                .await
                .map(|_| ())
        };
        if let Err(error) = counted {
            tracing::warn!(%error, "a sign-in attempt was not counted");
        }
        Ok(matches && hash.is_some())
    }

    /// What the user's organizations demand of them together.
    pub(crate) async fn policies_of(
        &self,
        user_id: UserId,
    ) -> Result<EffectivePolicies, StoreError> {
        Ok(fold(
            &self.ports.policies.policies_of_member(user_id).await?,
        ))
    }

    /// The caller's profile.
    pub async fn me(&self, principal: &Principal) -> Result<Option<User>, StoreError> {
        Ok(self
            .ports
            .accounts
            .credentials_by_id(principal.user_id())
            .await?
            .map(|c| c.user))
    }

    /// Changes the caller's profile and records `user.updated` (only when something changed).
    pub async fn update_me(
        &self,
        principal: &Principal,
        change: ProfileChange,
        origin: &Origin,
    ) -> Result<User, UpdateProfileError> {
        let mut user = self
            .me(principal)
            .await?
            .ok_or(UpdateProfileError::UserGone)?;
        let mut changed = Vec::new();
        if let Some(full_name) = change.full_name {
            if full_name != user.full_name {
                user.full_name = full_name;
                changed.push("full_name");
            }
        }
        if changed.is_empty() {
            return Ok(user);
        }
        let now = self.ports.clock.now();
        user.updated_at = now;
        let mut data = payloads::user(&user);
        data["changed"] = json!(changed);
        let updated = event(
            self.ports.random.as_ref(),
            now,
            EventType::UserUpdated,
            None,
            Some(user.id),
            data,
        );
        if !self
            .ports
            .accounts
            .update_user(
                user.clone(),
                updated,
                audit(
                    self.ports.random.as_ref(),
                    now,
                    AuditActor::of(principal),
                    AuditAction::ProfileUpdated,
                    origin,
                )
                .on(TargetKind::User, user.id),
            )
            .await?
        {
            return Err(UpdateProfileError::UserGone);
        }
        Ok(user)
    }

    /// An access token for the session, expiring after the configured lifetime or at
    /// `not_after`, whichever comes first.
    #[allow(clippy::too_many_arguments)]
    async fn issue_access_token(
        &self,
        user: &User,
        session_id: SessionId,
        grant: Option<&ClientGrant>,
        amr: &Amr,
        organization: Option<&TokenOrganization>,
        now: OffsetDateTime,
        not_after: OffsetDateTime,
    ) -> Result<AccessToken, TokenError> {
        let expires_at = (now + self.settings.access_token_ttl).min(not_after);
        let claims = AccessClaims {
            iss: self.settings.issuer.clone(),
            sub: user.id,
            aud: match grant {
                Some(grant) => Audience::gatehouse_and(grant.client_id.as_str()),
                None => Audience::gatehouse(),
            },
            iat: now.unix_timestamp(),
            nbf: now.unix_timestamp(),
            exp: expires_at.unix_timestamp(),
            jti: self.ports.random.uuid(),
            sid: session_id,
            email: user.email.as_ref().to_owned(),
            client_id: grant.map(|g| g.client_id.as_str().to_owned()),
            scope: grant.map(|g| g.scope.to_string()),
            amr: amr.claim(),
            org_id: organization.as_ref().map(|o| o.organization_id),
            org_role: organization.as_ref().map(|o| o.role.name().to_owned()),
            org_permissions: organization
                .as_ref()
                .map(|o| o.permissions())
                .unwrap_or_default(),
        };
        Ok(AccessToken {
            access_token: self.ports.signer.sign(&claims).await?,
            token_type: "Bearer",
            expires_in: (expires_at - now).whole_seconds(),
        })
    }
}

/// The policies that apply to a member of these organizations.
pub(crate) fn fold(organizations: &[crate::ports::PlanPolicies]) -> EffectivePolicies {
    EffectivePolicies::of(
        organizations
            .iter()
            .map(|(plan, policies)| (*plan, policies.as_ref())),
    )
}

/// When an access token must expire at the latest: with the session (`session_ends`), and,
/// under a session policy, within the idle timeout, so that a client idle for longer holds no
/// working token and its next refresh is refused.
fn access_token_bound(
    policies: &EffectivePolicies,
    now: OffsetDateTime,
    session_ends: OffsetDateTime,
) -> OffsetDateTime {
    match &policies.session {
        Some(policy) => session_ends.min(now + policy.idle_timeout()),
        None => session_ends,
    }
}
