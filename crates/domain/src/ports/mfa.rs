//! Second factors: one-time codes (RFC 6238), WebAuthn ceremonies, and the store of factors,
//! recovery codes and the second step of sign-ins. The adapters hold the cryptography; the use
//! cases decide who may use what, once.

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use super::{BoxError, StoreError};
use crate::model::{
    AuditRecord, MfaFactor, MfaFactorId, MfaLogin, NewEvent, NewSession, TokenHash, TotpCode,
    TotpSecret, UserId, WebauthnRegistration,
};

/// Time-based one-time passwords (RFC 6238: HMAC-SHA-1, six digits, 30-second steps), as
/// authenticator apps compute them (`gatehouse-crypto`, over the `totp-rs` crate).
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Totp: Send + Sync + 'static {
    /// A new random secret of 160 bits.
    fn generate(&self) -> TotpSecret;

    /// The secret as people type it into an app: unpadded base32.
    fn base32(&self, secret: &TotpSecret) -> String;

    /// The `otpauth://totp/...` URI an authenticator app reads (from a QR code), naming the
    /// `issuer` and the `account` (the user's email).
    fn provisioning_uri(&self, secret: &TotpSecret, issuer: &str, account: &str) -> String;

    /// The time step (seconds since the Unix epoch divided by 30) whose code is `code`, among
    /// the step of `at` and the one before and after it (one step of skew); `None` when none
    /// matches. The caller refuses a step it has seen before, so each code works once.
    fn matching_step(
        &self,
        secret: &TotpSecret,
        code: &TotpCode,
        at: OffsetDateTime,
    ) -> Option<u64>;
}

/// A WebAuthn user, as the authenticator is told of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebauthnUser {
    /// The user's id (the authenticator's user handle).
    pub id: UserId,
    /// Their email: the name the authenticator shows.
    pub email: String,
    /// Their full name: the display name.
    pub display_name: String,
}

/// A registered WebAuthn credential, as the adapter keeps it: opaque to the domain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredPasskey {
    /// The credential id, base64url: what a browser names when it uses the credential.
    pub credential_id: String,
    /// The adapter's own serialisation of the credential (public key, counter, ...).
    pub passkey: String,
}

/// A ceremony under way: what the browser gets (the `publicKey` options, as JSON) and what the
/// server keeps until the browser answers (opaque to the domain; never sent to the browser).
/// `Debug` leaves the state out.
#[derive(Clone, PartialEq)]
pub struct Ceremony {
    /// `PublicKeyCredentialCreationOptions` or `PublicKeyCredentialRequestOptions` as JSON:
    /// `{"publicKey": {...}}`, as `navigator.credentials.create` / `get` take it once its
    /// base64url fields are decoded.
    pub options: Value,
    /// The server's state of the ceremony (challenge and expectations), serialised.
    pub state: String,
}

impl std::fmt::Debug for Ceremony {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ceremony")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// Why a WebAuthn answer was refused; the message is for the log.
#[derive(Debug, thiserror::Error)]
pub enum WebauthnError {
    /// The browser's answer is malformed, for another challenge or origin, or does not verify.
    #[error("the WebAuthn answer was refused: {0}")]
    Refused(String),
    /// This server cannot be a WebAuthn relying party (its public URL's host is an IP address,
    /// say): a matter of configuration, which the message names.
    #[error("security keys are unavailable on this server: {0}")]
    Unavailable(String),
    /// The adapter failed (a stored state or credential it cannot read, say).
    #[error("WebAuthn failed")]
    Failed(#[source] BoxError),
}

/// WebAuthn ceremonies (`gatehouse-webauthn`, over the `webauthn-rs` crate), for the relying
/// party `GATEHOUSE_PUBLIC_URL` names: its host is the RP id, the URL the origin.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Webauthn: Send + Sync + 'static {
    /// Starts registering a security key or passkey for `user`, excluding the credentials
    /// they have already.
    ///
    /// # Errors
    /// [`WebauthnError::Failed`] when the ceremony cannot be started.
    fn start_registration(
        &self,
        user: &WebauthnUser,
        existing: &[StoredPasskey],
    ) -> Result<Ceremony, WebauthnError>;

    /// Checks the browser's answer (`PublicKeyCredential` as JSON) against the kept `state`
    /// and returns the credential to store.
    ///
    /// # Errors
    /// [`WebauthnError::Refused`] for an answer that does not verify.
    fn finish_registration(
        &self,
        credential: &Value,
        state: &str,
    ) -> Result<StoredPasskey, WebauthnError>;

    /// Starts a sign-in's second step with any of `passkeys`.
    ///
    /// # Errors
    /// [`WebauthnError::Failed`] when the ceremony cannot be started (no passkey given, say).
    fn start_authentication(&self, passkeys: &[StoredPasskey]) -> Result<Ceremony, WebauthnError>;

    /// Checks the browser's assertion against the kept `state` and the user's `passkeys`, and
    /// returns the credential used, updated (its signature counter moves) for the caller to
    /// store.
    ///
    /// # Errors
    /// [`WebauthnError::Refused`] for an assertion that does not verify, or a credential that
    /// is not among `passkeys`.
    fn finish_authentication(
        &self,
        credential: &Value,
        state: &str,
        passkeys: &[StoredPasskey],
    ) -> Result<StoredPasskey, WebauthnError>;
}

/// A TOTP factor with what checking a code needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredTotp {
    /// The factor.
    pub factor: MfaFactor,
    /// Its secret, sealed by the [`SecretCipher`](super::SecretCipher) under the factor's id.
    pub sealed_secret: Vec<u8>,
    /// The last time step whose code it took (enrolment's confirmation included); a code of
    /// that step or an earlier one is never taken again.
    pub last_step: Option<u64>,
}

/// A WebAuthn factor with its credential.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredWebauthn {
    /// The factor.
    pub factor: MfaFactor,
    /// Its credential.
    pub passkey: StoredPasskey,
}

/// What completed a sign-in's second step, for the store to spend in the same transaction as
/// the session it opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SecondFactorUse {
    /// A TOTP code of this step: taken only if the factor's last step is earlier.
    Totp {
        /// The factor.
        factor_id: MfaFactorId,
        /// The code's time step.
        step: u64,
    },
    /// A recovery code: taken only if it is unused.
    RecoveryCode {
        /// Its hash.
        hash: TokenHash,
    },
    /// A WebAuthn assertion: the credential is stored back with its new counter.
    Webauthn {
        /// The factor.
        factor_id: MfaFactorId,
        /// The credential as updated by the assertion.
        passkey: StoredPasskey,
    },
}

/// A user's second factors, recovery codes, and the second step of sign-ins.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait MfaStore: Send + Sync + 'static {
    /// The user's factors, pending and confirmed, oldest first.
    async fn mfa_factors(&self, user_id: UserId) -> Result<Vec<MfaFactor>, StoreError>;

    /// The user's unused recovery codes.
    async fn recovery_codes_left(&self, user_id: UserId) -> Result<u32, StoreError>;

    /// Stores a pending TOTP factor with its sealed secret.
    async fn add_totp_factor(
        &self,
        factor: MfaFactor,
        sealed_secret: Vec<u8>,
    ) -> Result<(), StoreError>;

    /// One of the user's TOTP factors.
    async fn totp_factor(
        &self,
        user_id: UserId,
        id: MfaFactorId,
    ) -> Result<Option<StoredTotp>, StoreError>;

    /// The user's confirmed TOTP factors.
    async fn confirmed_totp_factors(&self, user_id: UserId) -> Result<Vec<StoredTotp>, StoreError>;

    /// Confirms a pending TOTP factor with the code of `step`, in one transaction with the
    /// replacement of the user's recovery codes (when `recovery_codes` holds new ones), the
    /// events and the audit record. Returns false, writing nothing, when the factor is gone or
    /// confirmed already.
    #[allow(clippy::too_many_arguments)]
    async fn confirm_totp_factor(
        &self,
        user_id: UserId,
        id: MfaFactorId,
        step: u64,
        at: OffsetDateTime,
        recovery_codes: Vec<TokenHash>,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Stores a WebAuthn registration under way.
    async fn save_webauthn_registration(
        &self,
        registration: WebauthnRegistration,
    ) -> Result<(), StoreError>;

    /// Takes (deletes and returns) the user's registration with this id, unexpired at `now`.
    async fn take_webauthn_registration(
        &self,
        user_id: UserId,
        id: MfaFactorId,
        now: OffsetDateTime,
    ) -> Result<Option<WebauthnRegistration>, StoreError>;

    /// Stores a confirmed WebAuthn factor with the recovery codes (when new ones), the events
    /// and the audit record, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the credential is registered already.
    async fn add_webauthn_factor(
        &self,
        factor: MfaFactor,
        passkey: StoredPasskey,
        recovery_codes: Vec<TokenHash>,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;

    /// The user's WebAuthn factors.
    async fn webauthn_factors(&self, user_id: UserId) -> Result<Vec<StoredWebauthn>, StoreError>;

    /// Removes one of the user's factors; when it was their last confirmed one, their
    /// recovery codes go with it. The audit record, when one is given, is written with the
    /// removal (a pending enrolment dropped for a new one has none). Returns false, writing
    /// nothing, when there is no such factor.
    async fn remove_factor(
        &self,
        user_id: UserId,
        id: MfaFactorId,
        audit: Option<AuditRecord>,
    ) -> Result<bool, StoreError>;

    /// Replaces the user's recovery codes (the old ones stop working), with the audit record.
    async fn replace_recovery_codes(
        &self,
        user_id: UserId,
        codes: Vec<TokenHash>,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;

    /// Stores a sign-in's second step under the hash of its `mfa_token`, with the audit record
    /// of its first step.
    async fn create_mfa_login(
        &self,
        token: TokenHash,
        login: MfaLogin,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;

    /// The second step of this token, when it is unused, unexpired at `now` and has failed
    /// fewer than [`MFA_MAX_FAILURES`](crate::model::MFA_MAX_FAILURES) times.
    async fn mfa_login(
        &self,
        token: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<MfaLogin>, StoreError>;

    /// Counts a wrong factor against the token; returns the failures now.
    async fn fail_mfa_login(&self, token: &TokenHash) -> Result<u32, StoreError>;

    /// Completes the second step, in one transaction: the token is used (it must be live, as
    /// [`Self::mfa_login`] says), the factor is spent (a TOTP step after the last one, an
    /// unused recovery code, or the WebAuthn credential updated), the session opens with its
    /// event and its audit record. Returns false, writing nothing, when the token or the factor
    /// was spent meanwhile.
    #[allow(clippy::too_many_arguments)]
    async fn complete_mfa_login(
        &self,
        token: &TokenHash,
        used: SecondFactorUse,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
        now: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;
}
