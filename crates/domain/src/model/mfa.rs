//! Multi-factor authentication: a user's second factors (TOTP, WebAuthn), their recovery codes,
//! and the second step of a sign-in.

use std::fmt;

use time::{Duration, OffsetDateTime};

use super::{MfaFactorId, MfaMethod, UserId};

/// How long the second step of a sign-in may take: an `mfa_token` lives 5 minutes.
pub const MFA_TOKEN_TTL: Duration = Duration::minutes(5);

/// How many wrong second factors an `mfa_token` survives: the fifth ends it.
pub const MFA_MAX_FAILURES: u32 = 5;

/// How many recovery codes a user holds: 10, shown once, each good for one sign-in.
pub const RECOVERY_CODES: usize = 10;

/// How long a WebAuthn registration may take once its options are handed out.
pub const WEBAUTHN_REGISTRATION_TTL: Duration = Duration::minutes(5);

/// A TOTP shared secret (RFC 6238): the raw key. Shown to the user once, at enrolment, as
/// base32; kept sealed at rest. `Debug` shows no byte of it.
#[derive(Clone, PartialEq, Eq)]
pub struct TotpSecret(Vec<u8>);

impl TotpSecret {
    /// A secret from its raw key bytes.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// The raw key, for the TOTP adapter and for sealing.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for TotpSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TotpSecret(..)")
    }
}

/// A six-digit code as typed: spaces and dashes dropped, then exactly six ASCII digits.
#[derive(Clone, PartialEq, Eq)]
pub struct TotpCode(String);

impl TotpCode {
    /// The code without the spaces people type; `None` unless six digits remain.
    pub fn parse(raw: &str) -> Option<Self> {
        let digits: String = raw.chars().filter(|c| !matches!(c, ' ' | '-')).collect();
        (digits.len() == 6 && digits.bytes().all(|b| b.is_ascii_digit())).then_some(Self(digits))
    }

    /// The six digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for TotpCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TotpCode(..)")
    }
}

/// A recovery code as typed: lowercased, spaces dropped (the dash is kept: it is part of the
/// code). What is stored is its SHA-256 ([`super::TokenHash`]).
pub fn normalise_recovery_code(raw: &str) -> String {
    raw.chars()
        .filter(|c| !c.is_whitespace())
        .flat_map(char::to_lowercase)
        .collect()
}

/// A second factor of a user, as listed (never its secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MfaFactor {
    /// Its id.
    pub id: MfaFactorId,
    /// Whose it is.
    pub user_id: UserId,
    /// What it is: an authenticator app (`totp`) or a security key or passkey (`webauthn`).
    pub kind: MfaMethod,
    /// When it was added.
    pub created_at: OffsetDateTime,
    /// When its first code confirmed it; `None` while a TOTP enrolment is pending. Only a
    /// confirmed factor signs anyone in.
    pub confirmed_at: Option<OffsetDateTime>,
    /// When it last completed a sign-in.
    pub last_used_at: Option<OffsetDateTime>,
}

/// The second step of a sign-in, waiting for a factor: what an `mfa_token` stands for (the
/// token itself is known only by its hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MfaLogin {
    /// Who passed the first step.
    pub user_id: UserId,
    /// How they passed it (a password, or a mailed sign-in link): the session's `amr` starts
    /// with it.
    pub first_factor: super::Amr,
    /// When the password was checked.
    pub created_at: OffsetDateTime,
    /// When the token stops working ([`MFA_TOKEN_TTL`] after `created_at`).
    pub expires_at: OffsetDateTime,
    /// Wrong factors so far; at [`MFA_MAX_FAILURES`] the token is dead.
    pub failures: u32,
    /// The WebAuthn ceremony started for the user's keys, when they have any.
    pub webauthn_state: Option<String>,
    /// The password hash the first step checked (`None` for a sign-in link): the session
    /// opens only while it is still the account's, so a change or a reset between the steps
    /// ends this sign-in too.
    pub password_checked: Option<super::PasswordHash>,
}

/// A WebAuthn registration under way: the ceremony's state, kept until the browser answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebauthnRegistration {
    /// The id the browser's answer names (`challenge_id`).
    pub id: MfaFactorId,
    /// Whose key it is.
    pub user_id: UserId,
    /// The ceremony's state (opaque; the adapter's).
    pub state: String,
    /// When the options were handed out.
    pub created_at: OffsetDateTime,
    /// When the answer is no longer taken ([`WEBAUTHN_REGISTRATION_TTL`] later).
    pub expires_at: OffsetDateTime,
}
