//! The scope of an OAuth request and of the tokens issued for it (RFC 6749 §3.3).

use std::fmt;

/// A scope (RFC 6749 §3.3): space-separated tokens of printable ASCII without `"` and `\`,
/// each kept once, in the order given. May be empty (no scope asked for).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Scope(Vec<String>);

/// Why a scope was refused (the OAuth error `invalid_scope`). The messages are the
/// `error_description`s Gatehouse answers with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeError {
    /// Longer than [`Scope::MAX_CHARS`] characters.
    TooLong,
    /// A token holds a character outside the RFC's set.
    Unprintable,
}

impl fmt::Display for ScopeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLong => write!(f, "scope is longer than {} characters", Scope::MAX_CHARS),
            Self::Unprintable => f.write_str(
                "scope tokens are printable ASCII without '\"' and '\\', separated by spaces",
            ),
        }
    }
}

impl std::error::Error for ScopeError {}

impl Scope {
    /// The most characters of a scope Gatehouse takes.
    pub const MAX_CHARS: usize = 1024;

    /// The scope as a client or a token wrote it; an empty one asks for no scope.
    ///
    /// # Errors
    /// [`ScopeError::TooLong`] past [`Scope::MAX_CHARS`] characters,
    /// [`ScopeError::Unprintable`] when a token has a character outside the RFC's set.
    pub fn parse(raw: &str) -> Result<Self, ScopeError> {
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(ScopeError::TooLong);
        }
        let mut tokens: Vec<String> = Vec::new();
        for token in raw.split(' ').filter(|t| !t.is_empty()) {
            let printable = token
                .chars()
                .all(|c| matches!(c, '\u{21}' | '\u{23}'..='\u{5B}' | '\u{5D}'..='\u{7E}'));
            if !printable {
                return Err(ScopeError::Unprintable);
            }
            if !tokens.iter().any(|t| t == token) {
                tokens.push(token.to_owned());
            }
        }
        Ok(Self(tokens))
    }

    /// The tokens, in order.
    pub fn tokens(&self) -> &[String] {
        &self.0
    }

    /// Whether no scope was asked for.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether the scope holds this token (`openid`).
    pub fn contains(&self, token: &str) -> bool {
        self.0.iter().any(|t| t == token)
    }

    /// Whether every token of `other` is in this scope.
    pub fn includes(&self, other: &Scope) -> bool {
        other.0.iter().all(|token| self.0.contains(token))
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_space_separated_printable_tokens_kept_once_in_order() {
        let scope = Scope::parse("read:user  read:resources read:user").unwrap();
        assert_eq!(scope.to_string(), "read:user read:resources");
        assert!(Scope::parse("").unwrap().is_empty());
        assert_eq!(Scope::parse("read\"user"), Err(ScopeError::Unprintable));
        assert_eq!(Scope::parse("read\\user"), Err(ScopeError::Unprintable));
        assert_eq!(Scope::parse("café"), Err(ScopeError::Unprintable));
        assert_eq!(Scope::parse(&"a".repeat(1025)), Err(ScopeError::TooLong));
        assert!(Scope::parse(&"a".repeat(1024)).is_ok());
        let wide = Scope::parse("a b c").unwrap();
        assert!(wide.includes(&Scope::parse("c a").unwrap()));
        assert!(!wide.includes(&Scope::parse("a d").unwrap()));
    }

    #[test]
    fn a_refusal_says_what_the_rule_is() {
        assert_eq!(
            ScopeError::TooLong.to_string(),
            "scope is longer than 1024 characters"
        );
        assert_eq!(
            ScopeError::Unprintable.to_string(),
            "scope tokens are printable ASCII without '\"' and '\\', separated by spaces"
        );
    }
}
