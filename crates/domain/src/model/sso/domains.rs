//! The email domains whose users sign in through the IdP: one domain, and the whitelist of
//! them.

use crate::model::{
    text::{str_display, str_ref},
    Email,
};

/// A DNS domain whose users may sign in through the IdP: trimmed and lowercased, ASCII only
/// (internationalised names in their `xn--` form), at most 253 characters, at least two
/// labels of 1 to 63 `a-z`, `0-9` and inner `-`, and a top-level label that is not all digits
/// (so no IP address).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EmailDomain(String);

/// Why an email domain, or a whitelist of them, was refused. The messages complete
/// "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EmailDomainError {
    /// Not a domain name as [`EmailDomain`] defines it.
    #[error("must be a domain name such as example.com")]
    Invalid,
    /// Reported at the index of the first distinct entry past the limit.
    #[error("is past the limit of {} domains", DomainWhitelist::MAX_ENTRIES)]
    TooMany,
}

impl EmailDomain {
    /// The longest domain accepted, in characters (all ASCII, so bytes too).
    pub const MAX_LEN: usize = 253;

    /// Trims and ASCII-lowercases `raw`, then checks it is a domain name as [`EmailDomain`]
    /// defines it.
    pub fn parse(raw: &str) -> Result<Self, EmailDomainError> {
        let domain = raw.trim().to_ascii_lowercase();
        let labels: Vec<&str> = domain.split('.').collect();
        let label_ok = |label: &&str| {
            (1..=63).contains(&label.len())
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        let top_level_ok = labels
            .last()
            .is_some_and(|tld| !tld.bytes().all(|b| b.is_ascii_digit()));
        if domain.len() > Self::MAX_LEN
            || labels.len() < 2
            || !labels.iter().all(label_ok)
            || !top_level_ok
        {
            return Err(EmailDomainError::Invalid);
        }
        Ok(Self(domain))
    }

    /// The domain, lowercase.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

str_ref!(EmailDomain);

str_display!(EmailDomain);

/// The email domains allowed to sign in through the IdP: distinct, in the order first given,
/// at most 100.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DomainWhitelist(Vec<EmailDomain>);

impl DomainWhitelist {
    /// The most distinct domains a whitelist holds.
    pub const MAX_ENTRIES: usize = 100;

    /// Parses every entry, dropping repeats (after normalisation). On failure, the index in
    /// `raw` of the first bad entry: an invalid one, or the first distinct one past the limit.
    pub fn parse(raw: Vec<String>) -> Result<Self, (usize, EmailDomainError)> {
        let mut domains: Vec<EmailDomain> = Vec::new();
        for (index, entry) in raw.iter().enumerate() {
            let domain = EmailDomain::parse(entry).map_err(|e| (index, e))?;
            if domains.contains(&domain) {
                continue;
            }
            if domains.len() == Self::MAX_ENTRIES {
                return Err((index, EmailDomainError::TooMany));
            }
            domains.push(domain);
        }
        Ok(Self(domains))
    }

    /// The domains, in the order first given.
    pub fn as_slice(&self) -> &[EmailDomain] {
        &self.0
    }

    /// Whether the address's domain (the part after `@`) is listed. Exact match: a listed
    /// `example.com` does not admit `eu.example.com`.
    pub fn contains_email_domain(&self, email: &Email) -> bool {
        let domain = email.domain().to_lowercase();
        self.0.iter().any(|listed| listed.0 == domain)
    }
}
