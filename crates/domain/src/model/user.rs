use serde::Serialize;
use time::OffsetDateTime;

use super::{Email, PasswordHash, UserId};

/// What a person is called: 1 to 200 characters once trimmed, no control characters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct FullName(String);

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FullNameError {
    #[error("must not be empty")]
    Empty,
    #[error("must be at most 200 characters")]
    TooLong,
    #[error("must not contain control characters")]
    Control,
}

impl FullName {
    pub const MAX_CHARS: usize = 200;

    pub fn parse(raw: &str) -> Result<Self, FullNameError> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Err(FullNameError::Empty);
        }
        if trimmed.chars().count() > Self::MAX_CHARS {
            return Err(FullNameError::TooLong);
        }
        if trimmed.chars().any(char::is_control) {
            return Err(FullNameError::Control);
        }
        Ok(Self(trimmed.to_owned()))
    }
}

impl AsRef<str> for FullName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A user as every API response shows it (the `user.*` event payload too).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct User {
    pub id: UserId,
    pub email: Email,
    pub full_name: FullName,
    #[serde(with = "crate::model::timestamp")]
    pub created_at: OffsetDateTime,
    #[serde(with = "crate::model::timestamp")]
    pub updated_at: OffsetDateTime,
}

/// A user with the secret needed to check their password; never serialised.
#[derive(Clone, Debug, PartialEq)]
pub struct UserCredentials {
    pub user: User,
    pub password_hash: PasswordHash,
    pub password_changed_at: OffsetDateTime,
}

/// A user about to be created.
#[derive(Clone, Debug, PartialEq)]
pub struct NewUser {
    pub id: UserId,
    pub email: Email,
    pub full_name: FullName,
    pub password_hash: PasswordHash,
    pub created_at: OffsetDateTime,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_names_are_trimmed_and_bounded() {
        assert_eq!(FullName::parse("  Ada  ").unwrap().as_ref(), "Ada");
        assert_eq!(FullName::parse("   "), Err(FullNameError::Empty));
        assert_eq!(
            FullName::parse(&"a".repeat(201)),
            Err(FullNameError::TooLong)
        );
        assert_eq!(FullName::parse("a\u{0}b"), Err(FullNameError::Control));
    }
}
