//! Multi-factor authentication: enrolling authenticator apps (TOTP) and security keys
//! (WebAuthn), recovery codes, removing a factor, and the second step of a sign-in.
//!
//! A factor counts once confirmed (a TOTP secret by its first code, a key by its registration).
//! Each TOTP code works once per factor (its time step must be later than the last one taken),
//! each recovery code once. The second step of a sign-in is named by an `mfa_token` that lives
//! five minutes, survives four wrong factors and works once; wrong factors also count against
//! the account's lockout (see [`LockoutRule`](crate::model::LockoutRule)).

use super::payloads;
use time::OffsetDateTime;

use super::{
    audit,
    auth::{Admitting, CheckError, LockedOut, OrganizationRefused},
    user_event, AuthService, Principal, TokenPair,
};
use crate::{
    model::{
        normalise_recovery_code, AccountKey, AuditAction, AuditActor, AuditRecord, AuthMethod,
        LockoutRule, MfaFactor, MfaFactorId, MfaLogin, MfaMethod, NewEvent, OrganizationId, Origin,
        SecretToken, TargetKind, TokenHash, TotpCode, TotpSecret, UserCredentials, UserId,
        WebauthnRegistration, RECOVERY_CODES, WEBAUTHN_REGISTRATION_TTL,
    },
    ports::{
        service_ports, BoxError, SecondFactorUse, StoreError, StoredTotp, WebauthnError,
        WebauthnUser,
    },
};

service_ports! {
    /// The ports [`MfaService`] uses.
    pub struct MfaPorts { mfa: MfaStore, accounts: AccountStore, totp: Totp, webauthn: Webauthn, cipher: SecretCipher, sign_in_attempts: SignInAttempts, clock: Clock, random: Random }
}

/// The name authenticator apps show for Gatehouse's codes.
pub const TOTP_ISSUER: &str = "Gatehouse";

/// The most factors (pending ones included) a user may hold.
pub const MAX_FACTORS: usize = 10;

/// A user's second factors as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MfaOverview {
    /// The confirmed factors, oldest first.
    pub methods: Vec<MfaFactor>,
    /// The recovery codes not used yet.
    pub recovery_codes_left: u32,
}

/// A TOTP enrolment, pending until a code confirms it: what an authenticator app needs.
#[derive(Clone, PartialEq, Eq)]
pub struct TotpEnrolment {
    /// The factor's id, to confirm it with.
    pub id: MfaFactorId,
    /// The secret, base32: shown this once.
    pub secret: String,
    /// The `otpauth://` URI holding the secret (for a QR code).
    pub otpauth_uri: String,
}

debug_showing!(TotpEnrolment { id });

/// A WebAuthn registration handed to the browser.
#[derive(Clone, Debug, PartialEq)]
pub struct WebauthnRegistrationStart {
    /// What the browser's answer names.
    pub challenge_id: MfaFactorId,
    /// The `PublicKeyCredentialCreationOptions`, as JSON.
    pub options: serde_json::Value,
}

/// A factor that was confirmed, and the recovery codes when it was the user's first (shown
/// once; empty otherwise).
#[derive(Debug)]
pub struct Confirmed {
    /// The factor.
    pub id: MfaFactorId,
    /// Ten fresh recovery codes on the first confirmed factor, else none.
    pub recovery_codes: Vec<SecretToken>,
}

/// What completes a sign-in's second step.
#[derive(Clone, PartialEq)]
pub enum SecondFactorProof {
    /// A code from an authenticator app.
    Code(String),
    /// One of the user's recovery codes.
    RecoveryCode(String),
    /// A WebAuthn assertion (`PublicKeyCredential` as JSON).
    Webauthn(serde_json::Value),
}

impl std::fmt::Debug for SecondFactorProof {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Code(_) => "Code(..)",
            Self::RecoveryCode(_) => "RecoveryCode(..)",
            Self::Webauthn(_) => "Webauthn(..)",
        })
    }
}

/// Why managing a factor failed.
#[derive(Debug, thiserror::Error)]
pub enum MfaError {
    /// The user has no such factor (or registration under way).
    #[error("no such second factor")]
    NotFound,
    /// The code does not match the factor at this time.
    #[error("the code is not valid")]
    WrongCode,
    /// The factor is confirmed already.
    #[error("this factor is confirmed already")]
    AlreadyConfirmed,
    /// The password given is wrong.
    #[error("password is incorrect")]
    WrongPassword,
    /// Too many failed sign-ins: the account is locked for a while.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// Removing the user's last factor while an organization of theirs requires one.
    #[error("an organization you belong to requires multi-factor authentication: add another method before removing this one")]
    RequiredByOrganization,
    /// Recovery codes without a confirmed factor.
    #[error("multi-factor authentication is not enabled: confirm a method first")]
    NotEnabled,
    /// More factors than [`MAX_FACTORS`].
    #[error("at most {MAX_FACTORS} second factors per user")]
    TooMany,
    /// The key is registered already.
    #[error("this security key is registered already")]
    KeyTaken,
    /// The browser's WebAuthn answer was refused.
    #[error("{0}")]
    WebauthnRefused(String),
    /// The server cannot do WebAuthn (its public URL); the message says why.
    #[error("{0}")]
    WebauthnUnavailable(String),
    /// The user is gone.
    #[error("the user no longer exists")]
    UserGone,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An adapter failed.
    #[error("multi-factor authentication failed")]
    Internal(#[source] BoxError),
}

/// Why the second step of a sign-in failed.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The `mfa_token` is unknown, expired, used, or has failed five times.
    #[error("the mfa_token is invalid, expired or used up; sign in again")]
    InvalidToken,
    /// The factor is wrong (or a code was used before).
    #[error("the code is not valid")]
    WrongFactor,
    /// Too many failed sign-ins: the account is locked for a while.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// The sign-in named an organization that does not admit the user; the `mfa_token` is
    /// not spent (another organization, or none, may still be named with it).
    #[error(transparent)]
    NotAdmitted(OrganizationRefused),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An adapter failed.
    #[error("verifying the second factor failed")]
    Internal(#[source] BoxError),
}

from_refusals!(VerifyError: Admitting);

from_refusals!(MfaError: CheckError);

/// Second factors and the second step of sign-ins.
#[derive(Clone)]
pub struct MfaService {
    ports: MfaPorts,
    /// Checks passwords and opens sessions the way a password login does.
    auth: AuthService,
}

/// What a TOTP secret is sealed under: the factor it belongs to.
fn totp_context(id: MfaFactorId) -> Vec<u8> {
    format!("mfa-totp:{id}").into_bytes()
}

impl MfaService {
    /// A service on these ports.
    pub fn new(ports: MfaPorts, auth: AuthService) -> Self {
        Self { ports, auth }
    }

    /// The caller's confirmed factors and how many recovery codes are left.
    pub async fn overview(&self, principal: &Principal) -> Result<MfaOverview, MfaError> {
        let user = principal.user_id();
        let mut methods = self.ports.mfa.mfa_factors(user).await?;
        methods.retain(|factor| factor.confirmed_at.is_some());
        Ok(MfaOverview {
            methods,
            recovery_codes_left: self.ports.mfa.recovery_codes_left(user).await?,
        })
    }

    async fn credentials(&self, user: UserId) -> Result<UserCredentials, MfaError> {
        self.ports
            .accounts
            .credentials_by_id(user)
            .await?
            .ok_or(MfaError::UserGone)
    }

    /// Starts a TOTP enrolment: a new secret for an authenticator app, pending until a code
    /// confirms it. An earlier pending TOTP enrolment of the user is dropped.
    pub async fn enroll_totp(&self, principal: &Principal) -> Result<TotpEnrolment, MfaError> {
        let user = principal.user_id();
        let credentials = self.credentials(user).await?;
        let factors = self.ports.mfa.mfa_factors(user).await?;
        for pending in factors
            .iter()
            .filter(|f| f.kind == MfaMethod::Totp && f.confirmed_at.is_none())
        {
            self.ports.mfa.remove_factor(user, pending.id, None).await?;
        }
        let kept = factors.iter().filter(|f| f.confirmed_at.is_some()).count();
        if kept >= MAX_FACTORS {
            return Err(MfaError::TooMany);
        }
        let id: MfaFactorId = self.ports.random.uuid().into();
        let secret = self.ports.totp.generate();
        let sealed = self
            .ports
            .cipher
            .seal(secret.expose(), &totp_context(id))
            .map_err(|e| MfaError::Internal(Box::new(e)))?;
        let now = self.ports.clock.now();
        self.ports
            .mfa
            .add_totp_factor(
                MfaFactor {
                    id,
                    user_id: user,
                    kind: MfaMethod::Totp,
                    created_at: now,
                    confirmed_at: None,
                    last_used_at: None,
                },
                sealed,
            )
            .await?;
        Ok(TotpEnrolment {
            id,
            secret: self.ports.totp.base32(&secret),
            otpauth_uri: self.ports.totp.provisioning_uri(
                &secret,
                TOTP_ISSUER,
                credentials.user.email.as_ref(),
            ),
        })
    }

    fn open(&self, stored: &StoredTotp) -> Result<TotpSecret, BoxError> {
        let bytes = self
            .ports
            .cipher
            .open(&stored.sealed_secret, &totp_context(stored.factor.id))?;
        Ok(TotpSecret::from_bytes(bytes))
    }

    /// Whether the user has a confirmed factor; when not, ten new recovery codes (and their
    /// hashes) and the `auth.mfa_enabled` event for the factor being confirmed.
    async fn first_factor(
        &self,
        user: UserId,
        factor: MfaFactorId,
        method: MfaMethod,
        now: OffsetDateTime,
    ) -> Result<(Vec<SecretToken>, Vec<TokenHash>, Vec<NewEvent>), MfaError> {
        let factors = self.ports.mfa.mfa_factors(user).await?;
        if factors
            .iter()
            .any(|f| f.confirmed_at.is_some() && f.id != factor)
        {
            return Ok((Vec::new(), Vec::new(), Vec::new()));
        }
        let codes = self.recovery_codes();
        let hashes = codes.iter().map(|c| TokenHash::of(c.expose())).collect();
        let enabled = user_event(
            self.ports.random.as_ref(),
            now,
            user,
            payloads::AuthMfaEnabled {
                user_id: user,
                method: method.as_str(),
                factor_id: factor,
            },
        );
        Ok((codes, hashes, vec![enabled]))
    }

    fn recovery_codes(&self) -> Vec<SecretToken> {
        (0..RECOVERY_CODES)
            .map(|_| self.ports.random.recovery_code())
            .collect()
    }

    /// The audit record of a change to the caller's factors.
    fn record(
        &self,
        principal: &Principal,
        action: AuditAction,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> AuditRecord {
        audit(
            self.ports.random.as_ref(),
            now,
            principal.audit_actor(),
            action,
            origin,
        )
    }

    /// Confirms a pending TOTP enrolment with a code of the app. The user's first confirmed
    /// factor brings ten recovery codes and `auth.mfa_enabled`. Audited: `mfa.factor_added`.
    pub async fn confirm_totp(
        &self,
        principal: &Principal,
        id: MfaFactorId,
        code: &str,
        origin: &Origin,
    ) -> Result<Confirmed, MfaError> {
        let user = principal.user_id();
        let stored = self
            .ports
            .mfa
            .totp_factor(user, id)
            .await?
            .ok_or(MfaError::NotFound)?;
        if stored.factor.confirmed_at.is_some() {
            return Err(MfaError::AlreadyConfirmed);
        }
        let code = TotpCode::parse(code).ok_or(MfaError::WrongCode)?;
        let secret = self.open(&stored).map_err(MfaError::Internal)?;
        let now = self.ports.clock.now();
        let step = self
            .ports
            .totp
            .matching_step(&secret, &code, now)
            .ok_or(MfaError::WrongCode)?;
        let (codes, hashes, events) = self.first_factor(user, id, MfaMethod::Totp, now).await?;
        let record = self
            .record(principal, AuditAction::MfaFactorAdded, origin, now)
            .on(TargetKind::MfaFactor, id);
        if !self
            .ports
            .mfa
            .confirm_totp_factor(user, id, step, now, hashes, events, record)
            .await?
        {
            return Err(MfaError::NotFound);
        }
        Ok(Confirmed {
            id,
            recovery_codes: codes,
        })
    }

    /// Starts registering a security key or passkey.
    pub async fn start_webauthn_registration(
        &self,
        principal: &Principal,
    ) -> Result<WebauthnRegistrationStart, MfaError> {
        let user = principal.user_id();
        let credentials = self.credentials(user).await?;
        let keys = self.ports.mfa.webauthn_factors(user).await?;
        let confirmed = self
            .ports
            .mfa
            .mfa_factors(user)
            .await?
            .iter()
            .filter(|f| f.confirmed_at.is_some())
            .count();
        if confirmed >= MAX_FACTORS {
            return Err(MfaError::TooMany);
        }
        let existing: Vec<_> = keys.into_iter().map(|key| key.passkey).collect();
        let ceremony = self
            .ports
            .webauthn
            .start_registration(
                &WebauthnUser {
                    id: user,
                    email: credentials.user.email.as_ref().to_owned(),
                    display_name: credentials.user.full_name.as_ref().to_owned(),
                },
                &existing,
            )
            .map_err(webauthn_error)?;
        let now = self.ports.clock.now();
        let id: MfaFactorId = self.ports.random.uuid().into();
        self.ports
            .mfa
            .save_webauthn_registration(WebauthnRegistration {
                id,
                user_id: user,
                state: ceremony.state,
                created_at: now,
                expires_at: now + WEBAUTHN_REGISTRATION_TTL,
            })
            .await?;
        Ok(WebauthnRegistrationStart {
            challenge_id: id,
            options: ceremony.options,
        })
    }

    /// Finishes a registration with the browser's answer: the key is a confirmed factor. The
    /// user's first confirmed factor brings ten recovery codes and `auth.mfa_enabled`. Audited:
    /// `mfa.factor_added`.
    pub async fn finish_webauthn_registration(
        &self,
        principal: &Principal,
        challenge_id: MfaFactorId,
        credential: &serde_json::Value,
        origin: &Origin,
    ) -> Result<Confirmed, MfaError> {
        let user = principal.user_id();
        let now = self.ports.clock.now();
        let registration = self
            .ports
            .mfa
            .take_webauthn_registration(user, challenge_id, now)
            .await?
            .ok_or(MfaError::NotFound)?;
        let passkey = self
            .ports
            .webauthn
            .finish_registration(credential, &registration.state)
            .map_err(webauthn_error)?;
        let (codes, hashes, events) = self
            .first_factor(user, challenge_id, MfaMethod::Webauthn, now)
            .await?;
        let factor = MfaFactor {
            id: challenge_id,
            user_id: user,
            kind: MfaMethod::Webauthn,
            created_at: now,
            confirmed_at: Some(now),
            last_used_at: None,
        };
        match self
            .ports
            .mfa
            .add_webauthn_factor(
                factor,
                passkey,
                hashes,
                events,
                self.record(principal, AuditAction::MfaFactorAdded, origin, now)
                    .on(TargetKind::MfaFactor, challenge_id),
            )
            .await
        {
            Ok(()) => Ok(Confirmed {
                id: challenge_id,
                recovery_codes: codes,
            }),
            Err(StoreError::Conflict) => Err(MfaError::KeyTaken),
            Err(e) => Err(e.into()),
        }
    }

    /// Checks the caller's password, counting a wrong one against the account.
    async fn password_checked(
        &self,
        credentials: &UserCredentials,
        password: String,
    ) -> Result<(), MfaError> {
        let account = AccountKey::for_email(credentials.user.email.as_ref());
        if self
            .auth
            .check_password(&account, password, credentials.password_hash.clone(), true)
            .await?
        {
            Ok(())
        } else {
            Err(MfaError::WrongPassword)
        }
    }

    /// Removes a factor, with the password. The user's last confirmed factor cannot go while
    /// an organization of theirs requires MFA; when it goes, the recovery codes go with it.
    /// Audited: `mfa.factor_removed`.
    pub async fn remove(
        &self,
        principal: &Principal,
        id: MfaFactorId,
        password: String,
        origin: &Origin,
    ) -> Result<(), MfaError> {
        let user = principal.user_id();
        let credentials = self.credentials(user).await?;
        self.password_checked(&credentials, password).await?;
        let factors = self.ports.mfa.mfa_factors(user).await?;
        let factor = factors
            .iter()
            .find(|f| f.id == id)
            .ok_or(MfaError::NotFound)?;
        let confirmed_left = factors
            .iter()
            .filter(|f| f.confirmed_at.is_some() && f.id != id)
            .count();
        if factor.confirmed_at.is_some()
            && confirmed_left == 0
            && self.auth.policies_of(user).await?.mfa_required
        {
            return Err(MfaError::RequiredByOrganization);
        }
        let record = self
            .record(
                principal,
                AuditAction::MfaFactorRemoved,
                origin,
                self.ports.clock.now(),
            )
            .on(TargetKind::MfaFactor, id);
        if !self.ports.mfa.remove_factor(user, id, Some(record)).await? {
            return Err(MfaError::NotFound);
        }
        Ok(())
    }

    /// New recovery codes, with the password; the old ones stop working. Audited:
    /// `mfa.recovery_codes_regenerated`.
    pub async fn regenerate_recovery_codes(
        &self,
        principal: &Principal,
        password: String,
        origin: &Origin,
    ) -> Result<Vec<SecretToken>, MfaError> {
        let user = principal.user_id();
        let credentials = self.credentials(user).await?;
        self.password_checked(&credentials, password).await?;
        let enabled = self
            .ports
            .mfa
            .mfa_factors(user)
            .await?
            .iter()
            .any(|f| f.confirmed_at.is_some());
        if !enabled {
            return Err(MfaError::NotEnabled);
        }
        let codes = self.recovery_codes();
        let hashes = codes.iter().map(|c| TokenHash::of(c.expose())).collect();
        let now = self.ports.clock.now();
        self.ports
            .mfa
            .replace_recovery_codes(
                user,
                hashes,
                now,
                self.record(
                    principal,
                    AuditAction::RecoveryCodesRegenerated,
                    origin,
                    now,
                )
                .on(TargetKind::User, user),
            )
            .await?;
        Ok(codes)
    }

    /// The second step of a sign-in: the `mfa_token` from the first, and a factor. Opens the
    /// session, whose tokens say which factor it was (`amr`).
    ///
    /// Audited: a refusal on its own (`auth.login_failed`, naming the user when the token
    /// does), the sign-in in the transaction that opens its session (`auth.login`).
    ///
    /// With `organization`, the tokens speak for it once it admits the user (the second
    /// factor counted), as at a password login.
    pub async fn verify(
        &self,
        mfa_token: &str,
        proof: SecondFactorProof,
        organization: Option<OrganizationId>,
        origin: &Origin,
    ) -> Result<TokenPair, VerifyError> {
        let token = TokenHash::of(mfa_token);
        let now = self.ports.clock.now();
        let Some(login) = self.ports.mfa.mfa_login(&token, now).await? else {
            self.auth.refused(AuditActor::UnknownUser, origin).await?;
            return Err(VerifyError::InvalidToken);
        };
        let verified = self
            .verify_login(&token, login.clone(), proof, organization, origin, now)
            .await;
        if let Err(
            VerifyError::InvalidToken
            | VerifyError::WrongFactor
            | VerifyError::LockedOut(_)
            | VerifyError::NotAdmitted(_),
        ) = &verified
        {
            self.auth
                .refused(AuditActor::User(login.user_id), origin)
                .await?;
        }
        verified
    }

    async fn verify_login(
        &self,
        token: &TokenHash,
        login: MfaLogin,
        proof: SecondFactorProof,
        organization: Option<OrganizationId>,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> Result<TokenPair, VerifyError> {
        let token = token.clone();
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(login.user_id)
            .await?
            .ok_or(VerifyError::InvalidToken)?;
        let account = AccountKey::for_email(credentials.user.email.as_ref());
        match self
            .ports
            .sign_in_attempts
            .failed_sign_ins(&account, now)
            .await
        {
            Ok(run) => {
                if let Some(retry_after) = run.retry_after(now) {
                    return Err(VerifyError::LockedOut(LockedOut { retry_after }));
                }
            }
            Err(error) => tracing::warn!(%error, "failed sign-ins not checked"),
        }
        let used = self.proven(&login, &proof, now).await?;
        let Some((used, method)) = used else {
            return Err(self.failed(&token, &account, now).await);
        };
        let policies = self.auth.policies_of(login.user_id).await?;
        let record =
            self.auth
                .sign_in_record(login.user_id, AuditAction::LoginSucceeded, origin, now);
        let mut opening = self.auth.opening(
            credentials.user,
            policies,
            None,
            login.first_factor.clone().and(method),
            now,
        );
        // Opened only while the password the first step checked is still the account's: a
        // change or a reset since (or landing meanwhile) ends this sign-in.
        opening.session.password_checked = login.password_checked.clone();
        // Admitted before the token and the factor are spent: a refusal changes nothing.
        let opening = self
            .auth
            .admitted_opening(opening, organization, Some(origin.client()))
            .await?;
        let completed = self
            .ports
            .mfa
            .complete_mfa_login(
                &token,
                used,
                opening.session.clone(),
                opening.event.clone(),
                opening.keep_at_most,
                now,
                record,
            )
            .await;
        let completed = match completed {
            // The password the first step checked is no longer the account's.
            Err(StoreError::Conflict) => return Err(VerifyError::InvalidToken),
            completed => completed?,
        };
        if !completed {
            // The token or the factor was spent by a concurrent request.
            return Err(self.failed(&token, &account, now).await);
        }
        if let Err(error) = self.ports.sign_in_attempts.clear(&account).await {
            tracing::warn!(%error, "a sign-in attempt was not counted");
        }
        self.auth
            .tokens_for(opening)
            .await
            .map_err(|e| VerifyError::Internal(Box::new(e)))
    }

    /// What the proof spends, and the method it proves, when it is right.
    async fn proven(
        &self,
        login: &MfaLogin,
        proof: &SecondFactorProof,
        now: OffsetDateTime,
    ) -> Result<Option<(SecondFactorUse, AuthMethod)>, VerifyError> {
        match proof {
            SecondFactorProof::Code(code) => {
                let Some(code) = TotpCode::parse(code) else {
                    return Ok(None);
                };
                for stored in self.ports.mfa.confirmed_totp_factors(login.user_id).await? {
                    let secret = self.open(&stored).map_err(VerifyError::Internal)?;
                    let Some(step) = self.ports.totp.matching_step(&secret, &code, now) else {
                        continue;
                    };
                    // A code works once: its step must come after the last one taken.
                    if stored.last_step.is_some_and(|last| step <= last) {
                        continue;
                    }
                    let used = SecondFactorUse::Totp {
                        factor_id: stored.factor.id,
                        step,
                    };
                    return Ok(Some((used, AuthMethod::Otp)));
                }
                Ok(None)
            }
            SecondFactorProof::RecoveryCode(code) => {
                let hash = TokenHash::of(&normalise_recovery_code(code));
                Ok(Some((
                    SecondFactorUse::RecoveryCode { hash },
                    AuthMethod::Otp,
                )))
            }
            SecondFactorProof::Webauthn(credential) => {
                let Some(state) = &login.webauthn_state else {
                    return Ok(None);
                };
                let keys = self.ports.mfa.webauthn_factors(login.user_id).await?;
                let passkeys: Vec<_> = keys.iter().map(|key| key.passkey.clone()).collect();
                let updated = match self
                    .ports
                    .webauthn
                    .finish_authentication(credential, state, &passkeys)
                {
                    Ok(updated) => updated,
                    Err(WebauthnError::Refused(reason)) => {
                        tracing::info!(%reason, "a WebAuthn assertion was refused");
                        return Ok(None);
                    }
                    Err(error @ (WebauthnError::Failed(_) | WebauthnError::Unavailable(_))) => {
                        return Err(VerifyError::Internal(Box::new(error)))
                    }
                };
                let Some(key) = keys
                    .iter()
                    .find(|key| key.passkey.credential_id == updated.credential_id)
                else {
                    return Ok(None);
                };
                let used = SecondFactorUse::Webauthn {
                    factor_id: key.factor.id,
                    passkey: updated,
                };
                Ok(Some((used, AuthMethod::HardwareKey)))
            }
        }
    }

    /// Counts a wrong factor against the token and the account.
    async fn failed(
        &self,
        token: &TokenHash,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> VerifyError {
        if let Err(error) = self.ports.mfa.fail_mfa_login(token).await {
            return error.into();
        }
        if let Err(error) = self
            .ports
            .sign_in_attempts
            .record_failure(account, now, &LockoutRule::DEFAULT)
            .await
        {
            tracing::warn!(%error, "a sign-in attempt was not counted");
        }
        VerifyError::WrongFactor
    }
}

fn webauthn_error(error: WebauthnError) -> MfaError {
    match error {
        WebauthnError::Refused(reason) => MfaError::WebauthnRefused(reason),
        unavailable @ WebauthnError::Unavailable(_) => {
            MfaError::WebauthnUnavailable(unavailable.to_string())
        }
        failed @ WebauthnError::Failed(_) => MfaError::Internal(Box::new(failed)),
    }
}
