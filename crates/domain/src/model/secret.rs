use std::fmt;

use sha2::{Digest, Sha256};

/// The kinds of opaque bearer secrets Gatehouse issues. The prefix tells a leaked secret's kind
/// at a glance (and lets secret scanners find them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// A session's refresh token: `ghr_`.
    Refresh,
    /// An API key: `ghk_`.
    ApiKey,
    /// An invitation's token, sent in the invitation mail: `ghi_`.
    Invitation,
    /// A webhook endpoint's signing secret: `whsec_`.
    WebhookSecret,
    /// An application's client secret: `ghcs_`.
    ClientSecret,
    /// An OAuth authorization code: `ghac_`.
    AuthorizationCode,
    /// The anti-forgery token of the hosted login page's forms.
    Csrf,
    /// The token of a sign-in's second step: `ghm_`.
    MfaToken,
    /// A mailed sign-in link's token: `ghml_`.
    MagicLink,
    /// A mailed password reset's token: `ghpr_`.
    PasswordReset,
    /// A mailed email verification's token: `ghev_`.
    EmailVerification,
    /// What a domain's TXT record must hold to prove the organization holds it: `ghdv_`.
    DomainChallenge,
    /// An organization's SCIM bearer token, its identity provider's credential: `ghsc_`.
    ScimToken,
}

impl TokenKind {
    /// What a secret of this kind starts with.
    pub const fn prefix(self) -> &'static str {
        match self {
            Self::Refresh => "ghr_",
            Self::ApiKey => "ghk_",
            Self::Invitation => "ghi_",
            Self::WebhookSecret => "whsec_",
            Self::ClientSecret => "ghcs_",
            Self::AuthorizationCode => "ghac_",
            Self::Csrf => "csrf_",
            Self::MfaToken => "ghm_",
            Self::MagicLink => "ghml_",
            Self::PasswordReset => "ghpr_",
            Self::EmailVerification => "ghev_",
            Self::DomainChallenge => "ghdv_",
            Self::ScimToken => "ghsc_",
        }
    }
}

/// A secret handed to a client once (refresh token, API key, ...). Only its [`TokenHash`] is
/// stored; `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretToken(String);

impl SecretToken {
    /// Wraps a secret, freshly made or as a client presented it.
    pub fn new(value: String) -> Self {
        Self(value)
    }

    /// The secret itself, to hand to the client once or to check.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The hash the store keeps and looks the secret up by.
    pub fn hash(&self) -> TokenHash {
        TokenHash::of(&self.0)
    }

    /// The first characters of the secret, safe to show in lists to tell keys apart.
    pub fn display_prefix(&self) -> String {
        self.0.chars().take(12).collect()
    }
}

impl fmt::Debug for SecretToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretToken(<redacted>)")
    }
}

/// The SHA-256 of a secret, hex encoded: what the store keeps and looks secrets up by. Secrets are
/// 256-bit random, so an unsalted fast hash is the right tool (as for crates.io tokens).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TokenHash(String);

impl TokenHash {
    /// The hash of a secret.
    pub fn of(secret: &str) -> Self {
        Self(hex::encode(Sha256::digest(secret.as_bytes())))
    }

    /// A hash as the store kept it, taken as it is.
    pub fn from_stored(hex: String) -> Self {
        Self(hex)
    }

    /// The hash: 64 lowercase hex digits.
    pub fn as_hex(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            TokenHash::of("abc").as_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn debug_is_redacted() {
        let token = SecretToken::new("ghr_topsecret".into());
        assert!(!format!("{token:?}").contains("topsecret"));
        assert_eq!(token.display_prefix(), "ghr_topsecre");
    }
}
