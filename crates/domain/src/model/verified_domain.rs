//! Domains an organization claims, and proves it holds with a DNS TXT record: the ground
//! single sign-on stands on (an organization's identity provider speaks only for the email
//! domains it verified).

use std::fmt;

use time::OffsetDateTime;

use super::{DomainId, Email, EmailDomain, OrganizationId};

/// Free-mail providers' domains: nobody's organization holds them, so none may be claimed,
/// nor any of their subdomains. A documented constant: the large providers' own domains
/// (their country variants included where they are in common use).
pub const FREE_MAIL_DOMAINS: &[&str] = &[
    "gmail.com",
    "googlemail.com",
    "outlook.com",
    "hotmail.com",
    "hotmail.co.uk",
    "hotmail.fr",
    "live.com",
    "msn.com",
    "yahoo.com",
    "yahoo.co.uk",
    "yahoo.fr",
    "ymail.com",
    "aol.com",
    "icloud.com",
    "me.com",
    "mac.com",
    "proton.me",
    "protonmail.com",
    "pm.me",
    "gmx.com",
    "gmx.de",
    "gmx.net",
    "web.de",
    "mail.com",
    "yandex.com",
    "yandex.ru",
    "mail.ru",
    "zoho.com",
    "qq.com",
    "163.com",
    "126.com",
    "fastmail.com",
    "tutanota.com",
    "hey.com",
];

/// Why a domain may not be claimed. The messages complete "`domain` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClaimableDomainError {
    /// Not a domain name as [`EmailDomain`] defines it.
    #[error("must be a domain name such as example.com")]
    Invalid,
    /// The domain is a public suffix (`co.uk`, `github.io`): nobody's organization holds it.
    #[error("is a public suffix, which no organization can hold")]
    PublicSuffix,
    /// A free-mail provider's domain, or one under it.
    #[error("belongs to a free-mail provider, which no organization can claim")]
    FreeMail,
}

/// A domain an organization may claim: an [`EmailDomain`] that is not itself a public suffix
/// (Mozilla's Public Suffix List, through the `psl` crate; private entries such as `github.io`
/// included) and not a free-mail provider's ([`FREE_MAIL_DOMAINS`]) nor under one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClaimableDomain(EmailDomain);

impl ClaimableDomain {
    /// Parses `raw` as an [`EmailDomain`], then refuses public suffixes and free-mail domains.
    pub fn parse(raw: &str) -> Result<Self, ClaimableDomainError> {
        let domain = EmailDomain::parse(raw).map_err(|_| ClaimableDomainError::Invalid)?;
        let name = domain.as_str();
        // A name whose whole is its suffix is a public suffix; an unknown top-level label is a
        // suffix by the list's default rule (`*`), so `example` is one and `acme.example` not.
        if psl::suffix_str(name).is_none_or(|suffix| suffix == name) {
            return Err(ClaimableDomainError::PublicSuffix);
        }
        let registrable = psl::domain_str(name).unwrap_or(name);
        if FREE_MAIL_DOMAINS
            .iter()
            .any(|free| *free == registrable || *free == name)
        {
            return Err(ClaimableDomainError::FreeMail);
        }
        Ok(Self(domain))
    }

    /// The domain.
    pub fn domain(&self) -> &EmailDomain {
        &self.0
    }

    /// The domain, taken out.
    pub fn into_domain(self) -> EmailDomain {
        self.0
    }
}

impl fmt::Display for ClaimableDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Where a domain stands: claimed and waiting for its TXT record, or verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DomainStatus {
    /// Added; its TXT record was not found yet.
    Pending,
    /// Its TXT record was found: the organization holds the domain.
    Verified,
}

impl DomainStatus {
    /// `pending` or `verified`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Verified => "verified",
        }
    }
}

/// The label under the domain whose TXT record proves it: `_gatehouse-challenge`.
pub const DOMAIN_CHALLENGE_LABEL: &str = "_gatehouse-challenge";

/// A domain an organization claimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrganizationDomain {
    /// The claim's id.
    pub id: DomainId,
    /// The organization that claimed it.
    pub organization_id: OrganizationId,
    /// The domain (read back from the store as an [`EmailDomain`]: a claim made before the
    /// public suffix list changed still loads).
    pub domain: EmailDomain,
    /// What the TXT record must hold: random, made when the domain is added.
    pub verification_value: String,
    /// When its TXT record was found; `None` while pending.
    pub verified_at: Option<OffsetDateTime>,
    /// When it was added.
    pub created_at: OffsetDateTime,
}

impl OrganizationDomain {
    /// Pending or verified.
    pub fn status(&self) -> DomainStatus {
        match self.verified_at {
            Some(_) => DomainStatus::Verified,
            None => DomainStatus::Pending,
        }
    }

    /// The name whose TXT record proves the domain: `_gatehouse-challenge.{domain}`.
    pub fn challenge_name(&self) -> String {
        format!("{DOMAIN_CHALLENGE_LABEL}.{}", self.domain)
    }
}

/// The domains an organization verified.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifiedDomains(Vec<EmailDomain>);

impl VerifiedDomains {
    /// The verified ones among the organization's domains.
    pub fn of(domains: &[OrganizationDomain]) -> Self {
        Self(
            domains
                .iter()
                .filter(|d| d.status() == DomainStatus::Verified)
                .map(|d| d.domain.clone())
                .collect(),
        )
    }

    /// Whether the domain is one of them.
    pub fn contains(&self, domain: &EmailDomain) -> bool {
        self.0.contains(domain)
    }

    /// Whether the address's domain (the part after `@`) is one of them. Exact match.
    pub fn contains_email_domain(&self, email: &Email) -> bool {
        let domain = email.domain().to_lowercase();
        self.0.iter().any(|verified| verified.as_str() == domain)
    }

    /// The domains.
    pub fn as_slice(&self) -> &[EmailDomain] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::refuses_each;

    #[test]
    fn an_organizations_own_domains_may_be_claimed() {
        for ok in [
            "acme.com",
            "eu.acme.com",
            "victimcorp.example",
            "acme.co.uk",
            "ACME.com ",
        ] {
            assert!(ClaimableDomain::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(
            ClaimableDomain::parse(" Acme.COM").map(|d| d.to_string()),
            Ok("acme.com".to_owned())
        );
    }

    #[test]
    fn public_suffixes_are_refused() {
        refuses_each(
            ClaimableDomain::parse,
            &["co.uk", "com.au", "github.io", "s3.amazonaws.com"],
            ClaimableDomainError::PublicSuffix,
        );
    }

    #[test]
    fn free_mail_domains_and_their_subdomains_are_refused() {
        refuses_each(
            ClaimableDomain::parse,
            &[
                "gmail.com",
                "outlook.com",
                "mail.gmail.com",
                "hotmail.co.uk",
            ],
            ClaimableDomainError::FreeMail,
        );
    }

    #[test]
    fn what_is_no_domain_is_invalid() {
        refuses_each(
            ClaimableDomain::parse,
            &["", "com", "acme..com", "10.0.0.1", "acme.com/x"],
            ClaimableDomainError::Invalid,
        );
    }
}
