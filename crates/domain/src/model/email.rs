use std::fmt;

use serde::Serialize;

use super::text::{is_invisible_control, normalized, str_display, str_ref, INVISIBLE_CONTROL};

/// An email address, normalised: surrounding white space trimmed, the whole address composed
/// (NFC) and lowercased, so that `Ada@Example.COM` and `ada@example.com` are one account (what
/// users of Auth0, Clerk and ZITADEL expect), and the domain in its IDNA ASCII form (UTS #46:
/// `ada@Bücher.de` is `ada@xn--bcher-kva.de`), the form DNS, mail and [`EmailDomain`] use.
///
/// [`EmailDomain`]: super::EmailDomain
#[derive(Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Email(String);

/// Why an email address was refused. The messages complete "`<field>` ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EmailError {
    /// Not `local@domain` with a local part of 1 to 64 bytes free of white space, control
    /// characters and `@`, and a domain name of at least two labels that IDNA accepts.
    #[error("is not a valid email address")]
    Invalid,
    /// More than [`Email::MAX_LEN`] characters, once trimmed (and its domain in ASCII).
    #[error("is longer than 254 characters")]
    TooLong,
    /// A bidirectional control or a zero-width character anywhere in it (`text.rs`).
    #[error("{INVISIBLE_CONTROL}")]
    InvisibleControl,
}

impl Email {
    /// The longest address accepted, in characters, once trimmed.
    pub const MAX_LEN: usize = 254;

    /// Trims `raw`, composes it (NFC), checks it is an address, lowercases it whole and writes
    /// its domain in IDNA's ASCII form.
    pub fn parse(raw: &str) -> Result<Self, EmailError> {
        let trimmed = normalized(raw);
        if trimmed.chars().count() > Self::MAX_LEN {
            return Err(EmailError::TooLong);
        }
        if trimmed.chars().any(is_invisible_control) {
            return Err(EmailError::InvisibleControl);
        }
        let (local, domain) = trimmed.rsplit_once('@').ok_or(EmailError::Invalid)?;
        let local_ok = !local.is_empty()
            && local.len() <= 64
            && !local.contains('@')
            && !local.chars().any(|c| c.is_whitespace() || c.is_control());
        if !local_ok || !is_domain_name(domain) {
            return Err(EmailError::Invalid);
        }
        let domain = idna::domain_to_ascii_cow(domain.as_bytes(), idna::AsciiDenyList::URL)
            .map_err(|_| EmailError::Invalid)?;
        if !is_domain_name(&domain) {
            return Err(EmailError::Invalid);
        }
        let email = format!("{}@{domain}", local.to_lowercase());
        if email.chars().count() > Self::MAX_LEN {
            return Err(EmailError::TooLong);
        }
        Ok(Self(email))
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

str_ref!(Email);

str_display!(Email);

impl fmt::Debug for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Addresses are personal data: logs get the domain only.
        write!(f, "Email(…@{})", self.domain())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::refuses_each;

    #[test]
    fn trims_and_lowercases() {
        let email = Email::parse("  Ada.Lovelace@Example.COM ").unwrap();
        assert_eq!(email.as_ref(), "ada.lovelace@example.com");
        assert_eq!(email.domain(), "example.com");
    }

    #[test]
    fn rejects_what_is_not_an_address() {
        refuses_each(
            Email::parse,
            &[
                "",
                "ada",
                "@example.com",
                "ada@",
                "ada@localhost",
                "ada@exa mple.com",
                "a da@example.com",
                "ada@-example.com",
                "ada@example..com",
            ],
            EmailError::Invalid,
        );
    }

    #[test]
    fn composes_the_address_and_writes_the_domain_in_idna_ascii() {
        let email = Email::parse("Jose\u{301}@B\u{dc}cher.DE").unwrap();
        assert_eq!(email.as_ref(), "jos\u{e9}@xn--bcher-kva.de");
        assert_eq!(email.domain(), "xn--bcher-kva.de");
        // The same address typed composed, or with its domain already in ASCII, is the same.
        assert_eq!(Email::parse("jos\u{e9}@bücher.de").unwrap(), email);
        assert_eq!(Email::parse("JOS\u{c9}@XN--BCHER-KVA.DE").unwrap(), email);
        assert_eq!(Email::parse("ada@xn--").err(), Some(EmailError::Invalid));
    }

    #[test]
    fn refuses_bidirectional_and_zero_width_controls() {
        refuses_each(
            Email::parse,
            &[
                "ada\u{202E}@example.com",
                "a\u{200B}da@example.com",
                "ada@exa\u{200B}mple.com",
                "\u{2066}ada@example.com",
                "ada@example.com\u{FEFF}",
                "a\u{200D}da@example.com",
            ],
            EmailError::InvisibleControl,
        );
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
