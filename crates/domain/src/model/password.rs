use std::fmt;

/// The rules a new password must meet. The spec's organization policies (Business plan) tighten
/// these; without one, the defaults below apply (NIST 800-63B: length over composition).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PasswordPolicy {
    pub min_length: usize,
    pub require_uppercase: bool,
    pub require_lowercase: bool,
    pub require_numbers: bool,
    pub require_special_chars: bool,
}

impl Default for PasswordPolicy {
    fn default() -> Self {
        Self {
            min_length: 8,
            require_uppercase: false,
            require_lowercase: false,
            require_numbers: false,
            require_special_chars: false,
        }
    }
}

/// Why a new password was refused. The messages are shown to the person choosing it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    #[error("must be at least {0} characters")]
    TooShort(usize),
    #[error("must be at most {} characters", NewPassword::MAX_CHARS)]
    TooLong,
    #[error("must contain an uppercase letter")]
    NoUppercase,
    #[error("must contain a lowercase letter")]
    NoLowercase,
    #[error("must contain a digit")]
    NoDigit,
    #[error("must contain a special character")]
    NoSpecial,
}

/// A plaintext password that meets a policy, on its way to the hasher. Its `Debug` is redacted
/// and it is never serialised.
#[derive(Clone)]
pub struct NewPassword(String);

impl NewPassword {
    /// Upper bound whatever the policy: argon2 would take anything, but a megabyte "password"
    /// is a denial-of-service attempt, not a secret.
    pub const MAX_CHARS: usize = 128;

    pub fn parse(raw: &str, policy: &PasswordPolicy) -> Result<Self, PasswordError> {
        let chars = raw.chars().count();
        if chars < policy.min_length {
            return Err(PasswordError::TooShort(policy.min_length));
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
        Ok(Self(raw.to_owned()))
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
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
    pub fn from_phc(phc: String) -> Self {
        Self(phc)
    }

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
    fn composition_rules_apply_when_asked() {
        let policy = PasswordPolicy {
            min_length: 10,
            require_uppercase: true,
            require_lowercase: true,
            require_numbers: true,
            require_special_chars: true,
        };
        let check = |raw: &str| NewPassword::parse(raw, &policy).err();
        assert_eq!(check("abcdefghij"), Some(PasswordError::NoUppercase));
        assert_eq!(check("ABCDEFGHIJ"), Some(PasswordError::NoLowercase));
        assert_eq!(check("ABCDEfghij"), Some(PasswordError::NoDigit));
        assert_eq!(check("ABCDEfghi1"), Some(PasswordError::NoSpecial));
        assert_eq!(check("ABCDEfgh1!"), None);
    }

    #[test]
    fn debug_never_shows_the_password() {
        let password = NewPassword::parse("hunter2hunter2", &PasswordPolicy::default()).unwrap();
        assert!(!format!("{password:?}").contains("hunter2"));
        let hash = PasswordHash::from_phc("$argon2id$v=19$secret".into());
        assert!(!format!("{hash:?}").contains("secret"));
    }
}
