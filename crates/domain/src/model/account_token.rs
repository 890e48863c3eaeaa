//! The tokens mailed for account flows: sign-in links, password resets and email
//! verification. Random, single use, short-lived, stored as their SHA-256.

use time::{Duration, OffsetDateTime};

use super::{Email, TokenKind, UserId};

/// What a mailed token is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccountTokenPurpose {
    /// Signs the user in (`{public_url}/magic-link/{token}`): 15 minutes.
    MagicLink,
    /// Sets a new password (`{public_url}/reset-password/{token}`): 15 minutes.
    PasswordReset,
    /// Proves the user reads mail at their address (`{public_url}/verify-email/{token}`):
    /// 24 hours.
    EmailVerification,
}

impl AccountTokenPurpose {
    /// The purpose's name, as stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::MagicLink => "magic_link",
            Self::PasswordReset => "password_reset",
            Self::EmailVerification => "email_verification",
        }
    }

    /// The purpose a stored name stands for.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "magic_link" => Some(Self::MagicLink),
            "password_reset" => Some(Self::PasswordReset),
            "email_verification" => Some(Self::EmailVerification),
            _ => None,
        }
    }

    /// How long a token of this purpose works.
    pub const fn ttl(self) -> Duration {
        match self {
            Self::MagicLink | Self::PasswordReset => Duration::minutes(15),
            Self::EmailVerification => Duration::hours(24),
        }
    }

    /// The kind of secret the token is (its prefix).
    pub const fn kind(self) -> TokenKind {
        match self {
            Self::MagicLink => TokenKind::MagicLink,
            Self::PasswordReset => TokenKind::PasswordReset,
            Self::EmailVerification => TokenKind::EmailVerification,
        }
    }

    /// The path of the service's page the mailed link opens, before the token.
    pub const fn page(self) -> &'static str {
        match self {
            Self::MagicLink => "/magic-link/",
            Self::PasswordReset => "/reset-password/",
            Self::EmailVerification => "/verify-email/",
        }
    }
}

/// A mailed token, as the store keeps it (by the token's hash).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountToken {
    /// What it is for.
    pub purpose: AccountTokenPurpose,
    /// Whose account it acts on.
    pub user_id: UserId,
    /// The address it was mailed to: a verification proves only that address.
    pub email: Email,
    /// When it was mailed.
    pub created_at: OffsetDateTime,
    /// When it stops working.
    pub expires_at: OffsetDateTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_round_trip_and_live_as_decided() {
        for purpose in [
            AccountTokenPurpose::MagicLink,
            AccountTokenPurpose::PasswordReset,
            AccountTokenPurpose::EmailVerification,
        ] {
            assert_eq!(AccountTokenPurpose::parse(purpose.as_str()), Some(purpose));
        }
        assert_eq!(AccountTokenPurpose::MagicLink.ttl(), Duration::minutes(15));
        assert_eq!(
            AccountTokenPurpose::PasswordReset.ttl(),
            Duration::minutes(15)
        );
        assert_eq!(
            AccountTokenPurpose::EmailVerification.ttl(),
            Duration::hours(24)
        );
        assert_eq!(AccountTokenPurpose::parse("other"), None);
    }
}
