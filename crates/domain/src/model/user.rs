use serde::Serialize;
use time::OffsetDateTime;

use super::{
    text::{parse_text, str_ref, TextError},
    Email, PasswordHash, UserId,
};

/// What a person is called: 1 to 200 characters once trimmed, in NFC, no control characters,
/// no bidirectional or zero-width controls (the rule of every name: `text.rs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct FullName(String);

/// Why a full name was refused: the rule every name shares. The messages complete
/// "`<field>` ...".
pub type FullNameError = TextError;

impl FullName {
    /// The longest name, in characters.
    pub const MAX_CHARS: usize = 200;

    /// A name as typed, trimmed and composed (NFC).
    pub fn parse(raw: &str) -> Result<Self, FullNameError> {
        parse_text(raw, 1, Self::MAX_CHARS, false).map(Self)
    }
}

str_ref!(FullName);

/// A user as every API response shows it (the `user.*` event payload too).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct User {
    /// The user's id.
    pub id: UserId,
    /// The address they sign in with, normalised; no two users share one.
    pub email: Email,
    /// What they are called.
    pub full_name: FullName,
    /// When they registered.
    #[serde(with = "crate::model::timestamp")]
    pub created_at: OffsetDateTime,
    /// When their profile last changed.
    #[serde(with = "crate::model::timestamp")]
    pub updated_at: OffsetDateTime,
    /// Whether they proved they read mail at `email` (a mailed link, or single sign-on by an
    /// identity provider that asserted it).
    pub email_verified: bool,
}

/// A user with the secret needed to check their password; never serialised.
#[derive(Clone, Debug, PartialEq)]
pub struct UserCredentials {
    /// The user.
    pub user: User,
    /// The hash of their current password; `None` for an account single sign-on created,
    /// which no password signs in to.
    pub password_hash: Option<PasswordHash>,
    /// When the current password was set, for the policy's maximum age.
    pub password_changed_at: OffsetDateTime,
}

/// A user about to be created.
#[derive(Clone, Debug, PartialEq)]
pub struct NewUser {
    /// The new user's id.
    pub id: UserId,
    /// The address they registered with; it must belong to no other user.
    pub email: Email,
    /// What they are called.
    pub full_name: FullName,
    /// The hash of the password they chose; `None` for an account single sign-on creates.
    pub password_hash: Option<PasswordHash>,
    /// Whether the address is known to be theirs (an identity provider asserted it).
    pub email_verified: bool,
    /// When they registered; also when their password was set.
    pub created_at: OffsetDateTime,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::refuses_each;

    #[test]
    fn full_names_are_trimmed_and_bounded() {
        assert_eq!(FullName::parse("  Ada  ").unwrap().as_ref(), "Ada");
        assert_eq!(FullName::parse("   "), Err(FullNameError::Empty));
        assert_eq!(
            FullName::parse(&"a".repeat(201)),
            Err(FullNameError::TooLong { max: 200 })
        );
        assert_eq!(
            FullName::parse("a\u{0}b"),
            Err(FullNameError::ControlCharacter)
        );
    }

    #[test]
    fn full_names_refuse_bidirectional_and_zero_width_controls_and_are_nfc() {
        refuses_each(
            FullName::parse,
            &[
                "Ada\u{202E}ecalevoL",
                "Ada\u{200B}Lovelace",
                "\u{2066}Ada\u{2069}",
                "\u{FEFF}Ada",
                "Ada\u{200D}Lovelace",
                "Ada\u{061C}",
            ],
            FullNameError::InvisibleControl,
        );
        // "José" typed with a combining accent is stored as the one composed "é".
        assert_eq!(
            FullName::parse("Jose\u{301}").unwrap().as_ref(),
            "Jos\u{e9}"
        );
    }
}
