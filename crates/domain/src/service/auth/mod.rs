//! Accounts and tokens: register, log in, refresh, log out, change password, profile.
//!
//! Here: [`AuthService`], its ports and settings, and what its use cases share: the tokens a
//! session gets, the session a sign-in opens and its access token, the policies a user is
//! under. Each use case is a file of its own, its error beside it:
//!
//! - `registration`: a new account and its personal workspace.
//! - `sign_in`: password sign-in, the records of refused ones, and the lockout after too many.
//! - `second_factor`: the second step of a sign-in, and who is signed in on the hosted pages.
//! - `refresh`: a new access token for a live session, and signing out.
//! - `password`: a new password, judged; changing and renewing it.
//! - `profile`: the caller's profile.
//! - `admission`: whether an organization lets a token speak for it, and where its single
//!   sign-on bars a sign-in.

mod admission;
mod password;
mod profile;
mod refresh;
mod registration;
mod second_factor;
mod sign_in;

pub(crate) use admission::Admitting;
pub use admission::OrganizationRefused;
pub use password::ChangePasswordError;
pub(crate) use password::{Changer, PasswordRefused};
pub use profile::{ProfileChange, UpdateProfileError};
pub use refresh::RefreshError;
pub use registration::{RegisterError, Registered};
pub use second_factor::SecondFactorNeeded;
pub(crate) use sign_in::CheckError;
pub use sign_in::{LockedOut, LoginError, SignIn, SSO_REQUIRED};

use super::payloads;
use serde::Serialize;
use time::{Duration, OffsetDateTime};

use super::{user_audit, user_event};
use crate::{
    model::{
        Amr, AuditAction, AuditRecord, ClientGrant, EffectivePolicies, NewEvent, NewSession,
        Origin, SecretToken, SessionId, TargetKind, TokenKind, TokenOrganization, User, UserId,
    },
    ports::{
        audience_of_grant, service_ports, AccessClaims, StoreError, TokenError, GATEHOUSE_AUDIENCE,
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

debug_showing!(AccessToken { expires_in });

debug_showing!(TokenPair {});

/// What a refused login or refresh says when the password has expired.
pub const PASSWORD_EXPIRED: &str = "the password has expired under your organization's \
    password policy; choose a new one with POST /api/v1/auth/password/renew";

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

    /// The lifetimes and issuer it issues tokens with.
    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// Writes a record that goes with no change (a refusal): it stands alone.
    pub(crate) async fn record_alone(&self, record: AuditRecord) -> Result<(), StoreError> {
        self.ports.audit.record_audit(record).await
    }

    /// A sign-in's record, for the transaction that makes its change.
    pub(crate) fn sign_in_record(
        &self,
        user_id: UserId,
        action: AuditAction,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> AuditRecord {
        user_audit(self.ports.random.as_ref(), now, user_id, action, origin)
            .on(TargetKind::User, user_id)
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
            password_checked: None,
        };
        let event = user_event(
            self.ports.random.as_ref(),
            now,
            user.id,
            payloads::AuthLogin {
                user_id: user.id,
                session_id: session.id,
                method: session.amr.event_method(),
            },
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

    /// What the user's organizations demand of them together.
    pub(crate) async fn policies_of(
        &self,
        user_id: UserId,
    ) -> Result<EffectivePolicies, StoreError> {
        Ok(fold(
            &self.ports.policies.policies_of_member(user_id).await?,
        ))
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
            aud: audience_of_grant(grant),
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
                .map(|o| o.permissions(grant.map(|g| &g.scope)))
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
