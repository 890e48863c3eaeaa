//! Password sign-in: checking the password (and the lockout after too many wrong ones),
//! recording refused sign-ins, opening the session of a complete one, and starting the second
//! step of one that needs it.

use time::{Duration, OffsetDateTime};

use super::{
    Admitting, AuthService, Opening, OrganizationRefused, SecondFactorNeeded, TokenPair,
    PASSWORD_EXPIRED,
};
use crate::{
    model::{
        AccountKey, Amr, AuditAction, AuditActor, AuditRecord, CheckAdmission, EffectivePolicies,
        Email, LockoutRule, MfaFactor, MfaLogin, MfaMethod, NewPassword, OrganizationId, Origin,
        PasswordHash, TargetKind, TokenKind, User, UserCredentials, UserId, MFA_TOKEN_TTL,
    },
    ports::{BoxError, HashError, StoreError, TokenError, WebauthnError},
    service::audit,
};

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

from_refusals!(LoginError: Admitting, CheckError, TokenError);

impl AuthService {
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
                self.second_step(
                    credentials.user.id,
                    &factors,
                    Amr::password(),
                    credentials.password_hash,
                    now,
                    origin,
                )
                .await?,
            ));
        }
        let (mut opening, record) = self
            .admitted_session(
                credentials.user,
                policies,
                Amr::password(),
                organization,
                now,
                origin,
            )
            .await?;
        // Opened only while the password checked is still the account's: a reset or a change
        // that lands meanwhile ends this sign-in too.
        opening.session.password_checked = credentials.password_hash;
        match self.open((opening, record)).await {
            Err(LoginError::Store(StoreError::Conflict)) => Err(LoginError::InvalidCredentials),
            opened => Ok(SignIn::Tokens(opened?)),
        }
    }

    /// The session a sign-in of `user` opens (with its `auth.login` record), its tokens
    /// speaking for `organization` when one is named and it admits the user from the request's
    /// address: decided before anything is written, so that a refusal spends nothing (a mailed
    /// link stays usable). [`Self::open`] writes it.
    pub(crate) async fn admitted_session(
        &self,
        user: User,
        policies: EffectivePolicies,
        amr: Amr,
        organization: Option<OrganizationId>,
        now: OffsetDateTime,
        origin: &Origin,
    ) -> Result<(Opening, AuditRecord), LoginError> {
        let record = self.sign_in_record(user.id, AuditAction::LoginSucceeded, origin, now);
        let opening = self.opening(user, policies, None, amr, now);
        let opening = self
            .admitted_opening(opening, organization, Some(origin.client()))
            .await?;
        Ok((opening, record))
    }

    /// Opens an admitted session ([`Self::admitted_session`]) and signs its tokens.
    pub(crate) async fn open(
        &self,
        (opening, record): (Opening, AuditRecord),
    ) -> Result<TokenPair, LoginError> {
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

    /// Whether `password` is the account's: the one place where a password is checked for
    /// someone signing in. A check slot is taken first ([`LockoutRule::admit`]): refused while
    /// the account is locked out (a right password too) or while as many checks are under way
    /// as may fail before the lockout, on every replica together; a wrong password keeps its
    /// slot as a failure towards a lockout, a right one ends the count. `hash` is `None` when
    /// the email names no account: the same work and the same counting, so that neither the
    /// answer nor its timing tells the two apart. A password longer than any that can be set
    /// is wrong without hashing it. A right password clears the count only when `clear` (not
    /// when a second step is still to come: its slot is given back).
    pub(crate) async fn check_password(
        &self,
        account: &AccountKey,
        password: String,
        hash: Option<PasswordHash>,
        clear: bool,
    ) -> Result<bool, CheckError> {
        let attempts = &self.ports.sign_in_attempts;
        let rule = LockoutRule::DEFAULT;
        let now = self.ports.clock.now();
        match attempts.begin_check(account, now, &rule).await {
            Ok(CheckAdmission::Admitted) => {}
            Ok(CheckAdmission::Refused(retry_after)) => {
                return Err(CheckError::LockedOut(LockedOut { retry_after }))
            }
            // Fail open: an unreachable counter store must not lock everybody out.
            Err(error) => tracing::warn!(%error, "failed sign-ins not checked"),
        }
        let verified = if password.chars().count() > NewPassword::MAX_CHARS {
            Ok(false)
        } else {
            self.ports.hasher.verify(password, hash.clone()).await
        };
        let matches = match verified {
            Ok(matches) => matches && hash.is_some(),
            Err(error) => {
                if let Err(error) = attempts.release(account).await {
                    tracing::warn!(%error, "a sign-in's check slot was not given back");
                }
                return Err(CheckError::Hasher(error));
            }
        };
        let counted = match (matches, clear) {
            (true, true) => attempts.clear(account).await,
            (true, false) => attempts.release(account).await,
            (false, _) => attempts
                .record_failure(account, now, &rule)
                .await
                .map(|_| ()),
        };
        if let Err(error) = counted {
            tracing::warn!(%error, "a sign-in attempt was not counted");
        }
        Ok(matches)
    }
}

impl AuthService {
    /// Starts the second step of a sign-in: a fresh `mfa_token`, and, when the user has
    /// security keys, the WebAuthn ceremony for them.
    pub(crate) async fn second_step(
        &self,
        user_id: UserId,
        factors: &[MfaFactor],
        first_factor: Amr,
        password_checked: Option<PasswordHash>,
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
                    password_checked,
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
}
