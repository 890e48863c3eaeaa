use std::fmt;

use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use super::{MaxAgeDays, MinLength, ReuseCount};

/// The rules a new password must meet: an organization's `password_policy` (Business plan), or
/// without one the defaults below (NIST 800-63B: length over composition).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasswordPolicy {
    /// The fewest characters a password may have.
    pub min_length: MinLength,
    /// Whether a password needs an uppercase letter.
    pub require_uppercase: bool,
    /// Whether a password needs a lowercase letter.
    pub require_lowercase: bool,
    /// Whether a password needs an ASCII digit.
    pub require_numbers: bool,
    /// Whether a password needs a character that is neither a letter nor a digit.
    pub require_special_chars: bool,
    /// Days after which a password must be changed; 0 disables.
    pub max_age_days: MaxAgeDays,
    /// How many previous passwords may not be chosen again.
    pub prevent_reuse_count: ReuseCount,
}

impl Default for PasswordPolicy {
    fn default() -> Self {
        Self {
            min_length: MinLength::MIN,
            require_uppercase: false,
            require_lowercase: false,
            require_numbers: false,
            require_special_chars: false,
            max_age_days: MaxAgeDays::MIN,
            prevent_reuse_count: ReuseCount::MIN,
        }
    }
}

impl PasswordPolicy {
    /// The policy that meets both: the longer minimum, every composition rule of either, the
    /// shorter maximum age (0 counting as none), the longer history.
    pub fn strictest(&self, other: &Self) -> Self {
        let max_age_days = match (self.max_age_days.get(), other.max_age_days.get()) {
            (0, _) => other.max_age_days,
            (_, 0) => self.max_age_days,
            _ => self.max_age_days.min(other.max_age_days),
        };
        Self {
            min_length: self.min_length.max(other.min_length),
            require_uppercase: self.require_uppercase || other.require_uppercase,
            require_lowercase: self.require_lowercase || other.require_lowercase,
            require_numbers: self.require_numbers || other.require_numbers,
            require_special_chars: self.require_special_chars || other.require_special_chars,
            max_age_days,
            prevent_reuse_count: self.prevent_reuse_count.max(other.prevent_reuse_count),
        }
    }

    /// Whether a password set at `changed_at` is too old at `now`.
    pub fn is_expired(&self, changed_at: OffsetDateTime, now: OffsetDateTime) -> bool {
        match self.max_age_days.get() {
            0 => false,
            days => now - changed_at >= Duration::days(i64::from(days)),
        }
    }
}

/// Why a new password was refused. The messages are shown to the person choosing it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// Fewer characters than the policy's minimum, which it carries.
    #[error("must be at least {0} characters")]
    TooShort(usize),
    /// More than [`NewPassword::MAX_CHARS`] characters.
    #[error("must be at most {} characters", NewPassword::MAX_CHARS)]
    TooLong,
    /// The policy asks for an uppercase letter and there is none.
    #[error("must contain an uppercase letter")]
    NoUppercase,
    /// The policy asks for a lowercase letter and there is none.
    #[error("must contain a lowercase letter")]
    NoLowercase,
    /// The policy asks for a digit and there is none.
    #[error("must contain a digit")]
    NoDigit,
    /// The policy asks for a special character and every character is a letter or a digit.
    #[error("must contain a special character")]
    NoSpecial,
    /// The whole password is a common password or dictionary word, however dressed up.
    #[error("is too common: it is one of the words and passwords that attackers try first")]
    Common,
}

/// A plaintext password that meets a policy, on its way to the hasher. Its `Debug` is redacted
/// and it is never serialised.
#[derive(Clone)]
pub struct NewPassword(String);

impl NewPassword {
    /// Upper bound whatever the policy: argon2 would take anything, but a megabyte "password"
    /// is a denial-of-service attempt, not a secret.
    pub const MAX_CHARS: usize = 128;

    /// A password as typed (not trimmed), checked against `policy`, then against the common
    /// passwords; the first rule it breaks is the error.
    pub fn parse(raw: &str, policy: &PasswordPolicy) -> Result<Self, PasswordError> {
        let chars = raw.chars().count();
        let min_length = policy.min_length.get() as usize;
        if chars < min_length {
            return Err(PasswordError::TooShort(min_length));
        }
        if chars > Self::MAX_CHARS {
            return Err(PasswordError::TooLong);
        }
        if policy.require_uppercase && !raw.chars().any(char::is_uppercase) {
            return Err(PasswordError::NoUppercase);
        }
        if policy.require_lowercase && !raw.chars().any(char::is_lowercase) {
            return Err(PasswordError::NoLowercase);
        }
        if policy.require_numbers && !raw.chars().any(|c| c.is_ascii_digit()) {
            return Err(PasswordError::NoDigit);
        }
        if policy.require_special_chars && raw.chars().all(char::is_alphanumeric) {
            return Err(PasswordError::NoSpecial);
        }
        if is_common(raw) {
            return Err(PasswordError::Common);
        }
        Ok(Self(raw.to_owned()))
    }

    /// The plaintext, for the hasher only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// Whether the whole password is one entry of zxcvbn's dictionaries: its list of the most
/// used passwords (leaked password corpora), English words, names, film and TV words; as
/// written, capitalised, reversed or in l33t (`P@ssw0rd`, `drowssap`). zxcvbn does the
/// matching; a password made of several words or of a word and more is not refused here.
fn is_common(raw: &str) -> bool {
    use zxcvbn::matching::patterns::MatchPattern;
    let entropy = zxcvbn::zxcvbn(raw, &[]);
    matches!(
        entropy.sequence(),
        [only] if matches!(only.pattern, MatchPattern::Dictionary(_))
    )
}

impl fmt::Debug for NewPassword {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NewPassword(<redacted>)")
    }
}

/// A password hash in PHC string format (`$argon2id$v=19$...`).
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash(String);

impl PasswordHash {
    /// A hash as the hasher made it or the store kept it, taken as it is.
    pub fn from_phc(phc: String) -> Self {
        Self(phc)
    }

    /// The PHC string, algorithm, parameters and salt included.
    pub fn as_phc(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PasswordHash(<redacted>)")
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn default_policy_is_about_length() {
        let policy = PasswordPolicy::default();
        assert_eq!(
            NewPassword::parse("short", &policy).err(),
            Some(PasswordError::TooShort(8))
        );
        assert!(NewPassword::parse("correct horse", &policy).is_ok());
        assert_eq!(
            NewPassword::parse(&"x".repeat(129), &policy).err(),
            Some(PasswordError::TooLong)
        );
    }

    #[test]
    fn common_passwords_are_refused_however_they_are_dressed_up() {
        let policy = PasswordPolicy::default();
        let check = |raw: &str| NewPassword::parse(raw, &policy).err();
        for common in [
            "password",
            "Password",
            "PASSWORD",
            "p@ssw0rd",
            "drowssap",
            "12345678",
            "password123",
            "qwertyuiop",
            "iloveyou",
            "sunshine",
            "football",
            "elephant",
        ] {
            assert_eq!(check(common), Some(PasswordError::Common), "{common}");
        }
        for fine in [
            "correct horse battery staple",
            "a much longer new passphrase",
            "tr0ub4dor&3-anvil",
            "Xk7#mQ2$vL9p",
        ] {
            assert_eq!(check(fine), None, "{fine}");
        }
    }

    #[test]
    fn composition_rules_apply_when_asked() {
        let policy = PasswordPolicy {
            min_length: MinLength::parse(10).unwrap(),
            require_uppercase: true,
            require_lowercase: true,
            require_numbers: true,
            require_special_chars: true,
            ..PasswordPolicy::default()
        };
        let check = |raw: &str| NewPassword::parse(raw, &policy).err();
        assert_eq!(check("abcdefghij"), Some(PasswordError::NoUppercase));
        assert_eq!(check("ABCDEFGHIJ"), Some(PasswordError::NoLowercase));
        assert_eq!(check("ABCDEfghij"), Some(PasswordError::NoDigit));
        assert_eq!(check("ABCDEfghi1"), Some(PasswordError::NoSpecial));
        assert_eq!(check("ABCDEfgh1!"), None);
    }

    #[test]
    fn passwords_expire_after_max_age_days_unless_zero() {
        let changed = time::macros::datetime!(2026-01-01 00:00:00 UTC);
        let mut policy = PasswordPolicy::default();
        assert!(!policy.is_expired(changed, changed + Duration::days(10_000)));
        policy.max_age_days = MaxAgeDays::parse(90).unwrap();
        assert!(!policy.is_expired(changed, changed + Duration::days(89)));
        assert!(policy.is_expired(changed, changed + Duration::days(90)));
    }

    #[test]
    fn debug_never_shows_the_password() {
        let password = NewPassword::parse("hunter2hunter2", &PasswordPolicy::default()).unwrap();
        assert!(!format!("{password:?}").contains("hunter2"));
        let hash = PasswordHash::from_phc("$argon2id$v=19$secret".into());
        assert!(!format!("{hash:?}").contains("secret"));
    }
}
