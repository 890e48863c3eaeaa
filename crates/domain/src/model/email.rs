use std::fmt;

use serde::Serialize;

/// An email address, normalised: surrounding white space trimmed and the whole address
/// lowercased, so that `Ada@Example.COM` and `ada@example.com` are one account (what users of
/// Auth0, Clerk and ZITADEL expect).
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Email(String);

/// Why an email address was refused. The messages complete "`<field>` ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmailError {
    /// Not `local@domain` with a local part of 1 to 64 bytes free of white space, control
    /// characters and `@`, and a domain name of at least two labels.
    #[error("is not a valid email address")]
    Invalid,
    /// More than [`Email::MAX_LEN`] characters, once trimmed.
    #[error("is longer than 254 characters")]
    TooLong,
}

impl Email {
    /// The longest address accepted, in characters, once trimmed.
    pub const MAX_LEN: usize = 254;

    /// Trims `raw`, checks it is an address, and lowercases it whole.
    pub fn parse(raw: &str) -> Result<Self, EmailError> {
        let trimmed = raw.trim();
        if trimmed.chars().count() > Self::MAX_LEN {
            return Err(EmailError::TooLong);
        }
        let (local, domain) = trimmed.rsplit_once('@').ok_or(EmailError::Invalid)?;
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && !local.contains('@')
            && !local.chars().any(|c| c.is_whitespace() || c.is_control());
        if !local_ok || !is_domain_name(domain) {
            return Err(EmailError::Invalid);
        }
        Ok(Self(trimmed.to_lowercase()))
    }

    /// The part after the `@`.
    pub fn domain(&self) -> &str {
        self.0.rsplit_once('@').map_or("", |(_, domain)| domain)
    }

    /// The part before the `@`.
    pub fn local_part(&self) -> &str {
        self.0.rsplit_once('@').map_or("", |(local, _)| local)
    }
}

/// A DNS name of at least two labels: letters, digits and inner hyphens, 63 bytes a label.
pub(crate) fn is_domain_name(name: &str) -> bool {
    let labels: Vec<&str> = name.split('.').collect();
    name.len() <= 253
        && labels.len() >= 2
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}

impl AsRef<str> for Email {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Addresses are personal data: logs get the domain only.
        write!(f, "Email(…@{})", self.domain())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_and_lowercases() {
        let email = Email::parse("  Ada.Lovelace@Example.COM ").unwrap();
        assert_eq!(email.as_ref(), "ada.lovelace@example.com");
        assert_eq!(email.domain(), "example.com");
    }

    #[test]
    fn rejects_what_is_not_an_address() {
        for raw in [
            "",
            "ada",
            "@example.com",
            "ada@",
            "ada@localhost",
            "ada@exa mple.com",
            "a da@example.com",
            "ada@-example.com",
            "ada@example..com",
        ] {
            assert_eq!(Email::parse(raw), Err(EmailError::Invalid), "{raw:?}");
        }
    }

    #[test]
    fn rejects_overlong_addresses() {
        let raw = format!("{}@example.com", "a".repeat(250));
        assert_eq!(Email::parse(&raw), Err(EmailError::TooLong));
    }

    #[test]
    fn debug_hides_the_local_part() {
        let email = Email::parse("secret.person@example.com").unwrap();
        assert!(!format!("{email:?}").contains("secret.person"));
    }
}
