//! An organization's SAML single sign-on configuration: the identity provider (IdP) it trusts,
//! which email domains may sign in through it, and how new users are provisioned.

use std::{fmt, str::FromStr};

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::text::{parse_https_or_loopback_url, parse_text, replace, HttpsUrlError, TextError};
use super::{Email, OrganizationId, Role};

/// The SSO protocol. Only SAML 2.0 for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SsoProvider {
    /// SAML 2.0.
    Saml,
}

/// The protocol named is not `saml`, the only one accepted (lowercase, exactly).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be saml")]
pub struct SsoProviderError;

impl SsoProvider {
    /// Parses the protocol's name: exactly `saml`.
    pub fn parse(raw: &str) -> Result<Self, SsoProviderError> {
        match raw {
            "saml" => Ok(Self::Saml),
            _ => Err(SsoProviderError),
        }
    }

    /// The protocol's name, as stored and sent: `saml`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Saml => "saml",
        }
    }
}

impl FromStr for SsoProvider {
    type Err = SsoProviderError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for SsoProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The IdP's entity id (the `Issuer` of its assertions): usually a URL or a URN, compared
/// verbatim, so only trimmed: 1 to 1024 characters, no control characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdpEntityId(String);

impl IdpEntityId {
    /// The longest entity id accepted, in characters.
    pub const MAX_CHARS: usize = 1024;

    /// Trims `raw` and checks it: 1 to [`Self::MAX_CHARS`] characters, no control characters.
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 1, Self::MAX_CHARS, false).map(Self)
    }

    /// The entity id, as an assertion's `Issuer` must read.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for IdpEntityId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The IdP's single sign-on endpoint, where browsers are sent with an `AuthnRequest`: an
/// absolute `https` URL, or `http` on a loopback host (a test IdP on one's own machine). Kept as
/// sent, trimmed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct IdpSsoUrl(String);

impl IdpSsoUrl {
    /// Checks `raw` against the shared `https` URL rule (absolute, with a host, no user name or
    /// password, at most 2048 characters, no white space inside), `http` allowed on loopback.
    /// Keeps it trimmed, otherwise as sent.
    pub fn parse(raw: &str) -> Result<Self, HttpsUrlError> {
        parse_https_or_loopback_url(raw)?;
        Ok(Self(raw.trim().to_owned()))
    }

    /// The URL, trimmed, otherwise as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for IdpSsoUrl {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for IdpSsoUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why an IdP certificate was refused. The messages complete "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertificateError {
    /// The text is not exactly one PEM block labelled `CERTIFICATE` with base64 inside and
    /// nothing but white space around it.
    #[error("must be an X.509 certificate in PEM form")]
    NotPem,
    /// The PEM framing is right, but its content is not one well-formed X.509 certificate.
    #[error("is not a valid X.509 certificate")]
    Invalid,
    /// The certificate's validity ended before now.
    #[error("expired on {}", crate::model::timestamp::format(*.not_after))]
    Expired {
        /// The end of the certificate's validity period.
        not_after: OffsetDateTime,
    },
    /// The certificate's validity starts after now.
    #[error("is not valid before {}", crate::model::timestamp::format(*.not_before))]
    NotYetValid {
        /// The start of the certificate's validity period.
        not_before: OffsetDateTime,
    },
    /// The PEM text is longer than [`IdpCertificate::MAX_BYTES`].
    #[error("must be at most 16 KiB")]
    TooLarge,
}

/// The IdP's signing certificate: exactly one PEM block labelled `CERTIFICATE` holding an
/// X.509 certificate. Kept as normalised PEM (base64 in 64-character lines, `\n` endings), so
/// two certificates are equal exactly when their DER is.
#[derive(Clone, PartialEq, Eq)]
pub struct IdpCertificate {
    pem: String,
    subject: String,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    fingerprint_sha256: String,
}

impl IdpCertificate {
    /// The largest PEM text accepted, in bytes. IdP signing certificates are 1 to 3 KiB.
    pub const MAX_BYTES: usize = 16 * 1024;

    const BEGIN: &'static str = "-----BEGIN CERTIFICATE-----";
    const END: &'static str = "-----END CERTIFICATE-----";

    /// A certificate being configured: it must be valid at `now`.
    pub fn parse(pem: &str, now: OffsetDateTime) -> Result<Self, CertificateError> {
        let cert = Self::from_stored(pem)?;
        if now < cert.not_before {
            return Err(CertificateError::NotYetValid {
                not_before: cert.not_before,
            });
        }
        if now > cert.not_after {
            return Err(CertificateError::Expired {
                not_after: cert.not_after,
            });
        }
        Ok(cert)
    }

    /// A certificate read back from the store: parsed like [`IdpCertificate::parse`] but
    /// without the validity-period check, so an expired one still loads.
    pub fn from_stored(pem: &str) -> Result<Self, CertificateError> {
        if pem.len() > Self::MAX_BYTES {
            return Err(CertificateError::TooLarge);
        }
        let normalized = Self::normalize(pem)?;
        let (_, block) = x509_parser::pem::parse_x509_pem(normalized.as_bytes())
            .map_err(|_| CertificateError::NotPem)?;
        let (rest, cert) = x509_parser::parse_x509_certificate(&block.contents)
            .map_err(|_| CertificateError::Invalid)?;
        if !rest.is_empty() {
            return Err(CertificateError::Invalid);
        }
        let time = |t: &x509_parser::time::ASN1Time| {
            OffsetDateTime::from_unix_timestamp(t.timestamp())
                .map_err(|_| CertificateError::Invalid)
        };
        let validity = cert.validity();
        Ok(Self {
            subject: cert.subject().to_string(),
            not_before: time(&validity.not_before)?,
            not_after: time(&validity.not_after)?,
            fingerprint_sha256: hex::encode(Sha256::digest(&block.contents)),
            pem: normalized,
        })
    }

    /// Checks the framing (one `CERTIFICATE` block, nothing but white space around it, base64
    /// inside) and rewraps the base64 in 64-character lines.
    fn normalize(text: &str) -> Result<String, CertificateError> {
        let body = text
            .trim()
            .strip_prefix(Self::BEGIN)
            .and_then(|rest| rest.strip_suffix(Self::END))
            .ok_or(CertificateError::NotPem)?;
        let base64: String = body.split_ascii_whitespace().collect();
        let is_base64 = base64
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
        // A second block, or PEM headers, would show up as `-` or `:` here.
        if base64.is_empty() || !is_base64 {
            return Err(CertificateError::NotPem);
        }
        let mut pem = String::with_capacity(base64.len() + base64.len() / 64 + 64);
        pem.push_str(Self::BEGIN);
        pem.push('\n');
        for line in base64.as_bytes().chunks(64) {
            // Only ASCII bytes are left, so every chunk is valid UTF-8.
            pem.push_str(std::str::from_utf8(line).map_err(|_| CertificateError::NotPem)?);
            pem.push('\n');
        }
        pem.push_str(Self::END);
        pem.push('\n');
        Ok(pem)
    }

    /// The certificate as normalised PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// The subject's distinguished name, as in `CN=idp.example.com, O=Example`.
    pub fn subject(&self) -> &str {
        &self.subject
    }

    /// The start of the certificate's validity period (its `notBefore`).
    pub fn not_before(&self) -> OffsetDateTime {
        self.not_before
    }

    /// The end of the certificate's validity period (its `notAfter`). A stored certificate
    /// may be past it.
    pub fn not_after(&self) -> OffsetDateTime {
        self.not_after
    }

    /// SHA-256 of the DER, in lowercase hex (64 digits, no separators).
    pub fn fingerprint_sha256(&self) -> &str {
        &self.fingerprint_sha256
    }
}

impl fmt::Debug for IdpCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdpCertificate")
            .field("subject", &self.subject)
            .field("not_after", &self.not_after)
            .field("fingerprint_sha256", &self.fingerprint_sha256)
            .finish_non_exhaustive()
    }
}

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

impl AsRef<str> for EmailDomain {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EmailDomain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

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

/// The role given to users the IdP provisions: like [`Role`] but never `owner`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProvisionRole {
    /// Provisioned as [`Role::Admin`].
    Admin,
    /// Provisioned as [`Role::Member`]; the default.
    #[default]
    Member,
    /// Provisioned as [`Role::Viewer`].
    Viewer,
}

/// The role named is not `admin`, `member` or `viewer` (lowercase); `owner` is never accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be one of: admin, member, viewer")]
pub struct ProvisionRoleError;

impl ProvisionRole {
    /// Parses the role's lowercase name: `admin`, `member` or `viewer`.
    pub fn parse(raw: &str) -> Result<Self, ProvisionRoleError> {
        match raw {
            "admin" => Ok(Self::Admin),
            "member" => Ok(Self::Member),
            "viewer" => Ok(Self::Viewer),
            _ => Err(ProvisionRoleError),
        }
    }

    /// The role's lowercase name, as [`Role::as_str`] writes it.
    pub const fn as_str(self) -> &'static str {
        self.role().as_str()
    }

    /// The organization role a provisioned user gets.
    pub const fn role(self) -> Role {
        match self {
            Self::Admin => Role::Admin,
            Self::Member => Role::Member,
            Self::Viewer => Role::Viewer,
        }
    }
}

impl FromStr for ProvisionRole {
    type Err = ProvisionRoleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for ProvisionRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An organization's SSO configuration, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SsoConfiguration {
    /// The organization configured; it has at most one configuration.
    pub organization_id: OrganizationId,
    /// The protocol spoken with the IdP.
    pub provider: SsoProvider,
    /// The IdP's entity id: the `Issuer` its assertions must carry.
    pub idp_entity_id: IdpEntityId,
    /// The IdP's single sign-on endpoint, where sign-in requests are sent.
    pub idp_sso_url: IdpSsoUrl,
    /// The certificate whose key signs the IdP's assertions.
    pub idp_certificate: IdpCertificate,
    /// The email domains whose users sign in through the IdP.
    pub domain_whitelist: DomainWhitelist,
    /// Whether a first sign-in creates the user and their membership.
    pub auto_provision: bool,
    /// The role an auto-provisioned member gets.
    pub default_role: ProvisionRole,
    /// Whether the configuration is in use; an inactive one is kept but not published to the
    /// IdP.
    pub is_active: bool,
    /// When the configuration was first saved.
    pub created_at: OffsetDateTime,
    /// When the configuration last changed.
    pub updated_at: OffsetDateTime,
}

/// A merge-style change to an [`SsoConfiguration`]: only the `Some` fields change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SsoChange {
    /// The new protocol; `None` keeps the current one.
    pub provider: Option<SsoProvider>,
    /// The new IdP entity id; `None` keeps the current one.
    pub idp_entity_id: Option<IdpEntityId>,
    /// The new IdP sign-on endpoint; `None` keeps the current one.
    pub idp_sso_url: Option<IdpSsoUrl>,
    /// The new IdP signing certificate; `None` keeps the current one.
    pub idp_certificate: Option<IdpCertificate>,
    /// The new whitelist, replacing the whole list; `None` keeps the current one.
    pub domain_whitelist: Option<DomainWhitelist>,
    /// Whether first sign-ins now provision users; `None` keeps the current setting.
    pub auto_provision: Option<bool>,
    /// The new role for auto-provisioned members; `None` keeps the current one.
    pub default_role: Option<ProvisionRole>,
    /// Turns the configuration on or off; `None` keeps the current state.
    pub is_active: Option<bool>,
}

impl SsoConfiguration {
    /// Applies the change; returns the names of the fields that actually changed (a new
    /// certificate counts when its fingerprint differs). Leaves `updated_at` to the caller.
    pub fn apply(&mut self, change: SsoChange) -> Vec<&'static str> {
        let mut changed = Vec::new();
        let mut set = |name, changed_now: bool| {
            if changed_now {
                changed.push(name);
            }
        };
        set("provider", replace(&mut self.provider, change.provider));
        set(
            "idp_entity_id",
            replace(&mut self.idp_entity_id, change.idp_entity_id),
        );
        set(
            "idp_sso_url",
            replace(&mut self.idp_sso_url, change.idp_sso_url),
        );
        // Certificates are kept normalised, so equal fingerprints mean equal certificates.
        set(
            "idp_certificate",
            replace(&mut self.idp_certificate, change.idp_certificate),
        );
        set(
            "domain_whitelist",
            replace(&mut self.domain_whitelist, change.domain_whitelist),
        );
        set(
            "auto_provision",
            replace(&mut self.auto_provision, change.auto_provision),
        );
        set(
            "default_role",
            replace(&mut self.default_role, change.default_role),
        );
        set("is_active", replace(&mut self.is_active, change.is_active));
        changed
    }
}

/// The service provider's (Gatehouse's) entity id for an organization:
/// `{public_url}/sso/saml/{org}/metadata`.
pub fn sp_entity_id(public_url: &str, org: OrganizationId) -> String {
    format!(
        "{}/sso/saml/{org}/metadata",
        public_url.trim_end_matches('/')
    )
}

/// The service provider's assertion consumer service URL for an organization:
/// `{public_url}/sso/saml/{org}/acs`.
pub fn sp_acs_url(public_url: &str, org: OrganizationId) -> String {
    format!("{}/sso/saml/{org}/acs", public_url.trim_end_matches('/'))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use rcgen::{date_time_ymd, CertificateParams, DnType, KeyPair};
    use uuid::Uuid;

    use super::*;

    /// The "now" of every certificate test.
    fn now() -> OffsetDateTime {
        time::macros::datetime!(2026-06-01 12:00:00 UTC)
    }

    /// A self-signed certificate valid from `from` to `until` (year, month, day).
    fn certificate_pem(from: (i32, u8, u8), until: (i32, u8, u8)) -> String {
        let mut params = CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "Example IdP");
        params.not_before = date_time_ymd(from.0, from.1, from.2);
        params.not_after = date_time_ymd(until.0, until.1, until.2);
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().pem()
    }

    fn valid_pem() -> String {
        certificate_pem((2024, 1, 1), (2034, 1, 1))
    }

    #[test]
    fn provider_is_saml_only() {
        assert_eq!(SsoProvider::parse("saml"), Ok(SsoProvider::Saml));
        assert_eq!(SsoProvider::Saml.as_str(), "saml");
        for bad in ["", "SAML", "oidc", "saml2", " saml"] {
            assert_eq!(SsoProvider::parse(bad), Err(SsoProviderError), "{bad:?}");
        }
        assert_eq!(SsoProviderError.to_string(), "must be saml");
    }

    #[test]
    fn entity_ids_are_trimmed_bounded_and_free_of_control_characters() {
        assert_eq!(
            IdpEntityId::parse("  https://idp.example.com/metadata ")
                .unwrap()
                .as_str(),
            "https://idp.example.com/metadata"
        );
        assert!(IdpEntityId::parse("urn:example:idp").is_ok());
        assert_eq!(IdpEntityId::parse(" "), Err(TextError::Empty));
        assert!(IdpEntityId::parse(&"é".repeat(1024)).is_ok());
        assert_eq!(
            IdpEntityId::parse(&"é".repeat(1025)),
            Err(TextError::TooLong { max: 1024 })
        );
        assert_eq!(
            IdpEntityId::parse("urn:a\nb"),
            Err(TextError::ControlCharacter)
        );
    }

    #[test]
    fn sso_urls_are_absolute_https_without_credentials() {
        let url = IdpSsoUrl::parse(" https://idp.example.com/sso/saml?x=1 ").unwrap();
        assert_eq!(url.as_str(), "https://idp.example.com/sso/saml?x=1");
        assert!(IdpSsoUrl::parse("https://10.0.0.1:8443/sso").is_ok());
        assert_eq!(
            IdpSsoUrl::parse("http://idp.example.com/sso"),
            Err(HttpsUrlError::NotHttps)
        );
        // A test IdP on one's own machine may speak plain http.
        for local in [
            "http://127.0.0.1:8081/sso",
            "http://localhost/sso",
            "http://[::1]:9/sso",
        ] {
            assert!(IdpSsoUrl::parse(local).is_ok(), "{local}");
        }
        assert_eq!(
            IdpSsoUrl::parse("http://10.0.0.1/sso"),
            Err(HttpsUrlError::NotHttps)
        );
        assert_eq!(
            IdpSsoUrl::parse("https://admin:secret@idp.example.com/sso"),
            Err(HttpsUrlError::Credentials)
        );
        for bad in [
            "",
            "idp.example.com/sso",
            "https://",
            "https://idp.example.com/a b",
        ] {
            assert_eq!(
                IdpSsoUrl::parse(bad),
                Err(HttpsUrlError::Invalid),
                "{bad:?}"
            );
        }
        let long = format!("https://idp.example.com/{}", "a".repeat(2048));
        assert_eq!(IdpSsoUrl::parse(&long), Err(HttpsUrlError::TooLong));
    }

    #[test]
    fn a_valid_certificate_is_read() {
        let pem = valid_pem();
        let cert = IdpCertificate::parse(&pem, now()).unwrap();
        assert_eq!(cert.subject(), "CN=Example IdP");
        assert_eq!(
            cert.not_before(),
            time::macros::datetime!(2024-01-01 00:00:00 UTC)
        );
        assert_eq!(
            cert.not_after(),
            time::macros::datetime!(2034-01-01 00:00:00 UTC)
        );
        let fingerprint = cert.fingerprint_sha256();
        assert_eq!(fingerprint.len(), 64);
        assert!(fingerprint
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        // rcgen writes canonical PEM already: normalising keeps it as it is.
        assert_eq!(cert.pem(), pem);
    }

    #[test]
    fn the_fingerprint_is_sha256_of_the_der() {
        let mut params = CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
        params.not_before = date_time_ymd(2024, 1, 1);
        params.not_after = date_time_ymd(2034, 1, 1);
        let issued = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
        let cert = IdpCertificate::parse(&issued.pem(), now()).unwrap();
        assert_eq!(
            cert.fingerprint_sha256(),
            hex::encode(Sha256::digest(issued.der()))
        );
    }

    #[test]
    fn pem_is_normalised() {
        let pem = valid_pem();
        // CRLF line endings, surrounding white space, and the base64 rewrapped differently.
        let mut lines = pem.lines();
        let begin = lines.next().unwrap();
        let body: Vec<&str> = lines.take_while(|l| !l.starts_with("-----END")).collect();
        let messy = format!(
            "\n\n  {begin}\r\n{}\r\n-----END CERTIFICATE-----  \n\n",
            body.concat()
        );
        let cert = IdpCertificate::parse(&messy, now()).unwrap();
        assert_eq!(cert.pem(), pem);
        assert_eq!(cert, IdpCertificate::parse(&pem, now()).unwrap());
    }

    #[test]
    fn expired_and_not_yet_valid_certificates_are_refused() {
        let expired = certificate_pem((2019, 1, 1), (2021, 1, 1));
        let not_after = time::macros::datetime!(2021-01-01 00:00:00 UTC);
        let err = IdpCertificate::parse(&expired, now()).unwrap_err();
        assert_eq!(err, CertificateError::Expired { not_after });
        assert_eq!(err.to_string(), "expired on 2021-01-01T00:00:00Z");

        let early = certificate_pem((2030, 1, 1), (2040, 1, 1));
        let not_before = time::macros::datetime!(2030-01-01 00:00:00 UTC);
        let err = IdpCertificate::parse(&early, now()).unwrap_err();
        assert_eq!(err, CertificateError::NotYetValid { not_before });
        assert_eq!(err.to_string(), "is not valid before 2030-01-01T00:00:00Z");
    }

    #[test]
    fn stored_certificates_load_whatever_their_validity_period() {
        let expired = certificate_pem((2019, 1, 1), (2021, 1, 1));
        let cert = IdpCertificate::from_stored(&expired).unwrap();
        assert_eq!(
            cert.not_after(),
            time::macros::datetime!(2021-01-01 00:00:00 UTC)
        );
        assert_eq!(
            IdpCertificate::from_stored("garbage"),
            Err(CertificateError::NotPem)
        );
    }

    #[test]
    fn what_is_not_one_pem_certificate_is_refused() {
        let pem = valid_pem();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        for not_pem in [
            String::new(),
            "garbage".to_owned(),
            body.clone(),
            format!("{pem}{pem}"),
            format!("{pem}\n{}", valid_pem()),
            format!("subject=CN=Example IdP\n{pem}"),
            format!("{pem}trailing"),
            pem.replace("CERTIFICATE", "PRIVATE KEY"),
            pem.replace("-----END CERTIFICATE-----", ""),
            "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----".to_owned(),
            "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----".to_owned(),
            "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\nAAAA\n-----END CERTIFICATE-----"
                .to_owned(),
            // Base64 characters, but not valid base64.
            "-----BEGIN CERTIFICATE-----\nAAAAA\n-----END CERTIFICATE-----".to_owned(),
        ] {
            assert_eq!(
                IdpCertificate::parse(&not_pem, now()),
                Err(CertificateError::NotPem),
                "{not_pem:?}"
            );
        }
        assert_eq!(
            CertificateError::NotPem.to_string(),
            "must be an X.509 certificate in PEM form"
        );
    }

    #[test]
    fn pem_that_is_not_a_certificate_is_invalid() {
        // "hello world", properly framed and encoded.
        let hello = "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----";
        assert_eq!(
            IdpCertificate::parse(hello, now()),
            Err(CertificateError::Invalid)
        );
        // A real certificate cut short.
        let pem = valid_pem();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let cut = format!(
            "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----",
            &body[..body.len() / 2 / 4 * 4]
        );
        assert_eq!(
            IdpCertificate::parse(&cut, now()),
            Err(CertificateError::Invalid)
        );
        assert_eq!(
            CertificateError::Invalid.to_string(),
            "is not a valid X.509 certificate"
        );
    }

    #[test]
    fn oversized_input_is_refused_before_parsing() {
        let padded = format!("{}{}", valid_pem(), " ".repeat(IdpCertificate::MAX_BYTES));
        assert_eq!(
            IdpCertificate::parse(&padded, now()),
            Err(CertificateError::TooLarge)
        );
    }

    #[test]
    fn debug_shows_the_summary_not_the_pem() {
        let cert = IdpCertificate::parse(&valid_pem(), now()).unwrap();
        let debug = format!("{cert:?}");
        assert!(debug.contains("CN=Example IdP"), "{debug}");
        assert!(debug.contains(cert.fingerprint_sha256()), "{debug}");
        assert!(!debug.contains("BEGIN CERTIFICATE"), "{debug}");
    }

    #[test]
    fn domains_are_normalised() {
        assert_eq!(
            EmailDomain::parse("  Example.COM ").unwrap().as_str(),
            "example.com"
        );
        for ok in [
            "example.com",
            "mail.example.co.uk",
            "a-b.example",
            "xn--bcher-kva.example",
            "1password.com",
            "example.xn--p1ai",
            &format!("{}.com", "a".repeat(63)),
        ] {
            assert!(EmailDomain::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn domain_rules() {
        let long_label = format!("{}.com", "a".repeat(64));
        // 4 labels of 63 + 3 dots = 255 characters.
        let too_long = [&"a".repeat(63)[..]; 4].join(".");
        for bad in [
            "",
            "com",
            "localhost",
            "-bad.com",
            "bad-.com",
            "a..b",
            ".example.com",
            "example.com.",
            "exa mple.com",
            "exa_mple.com",
            "user@example.com",
            "bücher.example",
            "127.0.0.1",
            "example.123",
            long_label.as_str(),
            too_long.as_str(),
        ] {
            assert_eq!(
                EmailDomain::parse(bad),
                Err(EmailDomainError::Invalid),
                "{bad:?}"
            );
        }
        assert_eq!(
            EmailDomainError::Invalid.to_string(),
            "must be a domain name such as example.com"
        );
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn whitelists_dedupe_keeping_the_first_seen_order() {
        let list =
            DomainWhitelist::parse(strings(&["b.com", "A.com", "b.com", " a.com ", "c.com"]))
                .unwrap();
        let domains: Vec<&str> = list.as_slice().iter().map(EmailDomain::as_str).collect();
        assert_eq!(domains, ["b.com", "a.com", "c.com"]);
        assert!(DomainWhitelist::parse(Vec::new())
            .unwrap()
            .as_slice()
            .is_empty());
    }

    #[test]
    fn whitelists_report_the_index_of_the_first_bad_entry() {
        assert_eq!(
            DomainWhitelist::parse(strings(&["ok.com", "also-ok.com", "-bad.com", "a..b"])),
            Err((2, EmailDomainError::Invalid))
        );
    }

    #[test]
    fn whitelists_hold_at_most_100_domains() {
        let hundred: Vec<String> = (0..100).map(|i| format!("d{i}.example")).collect();
        assert_eq!(
            DomainWhitelist::parse(hundred.clone())
                .unwrap()
                .as_slice()
                .len(),
            100
        );

        let mut with_repeats = hundred.clone();
        with_repeats.push("D0.example".to_owned());
        assert_eq!(
            DomainWhitelist::parse(with_repeats)
                .unwrap()
                .as_slice()
                .len(),
            100
        );

        let mut hundred_and_one = hundred;
        hundred_and_one.push("one-more.example".to_owned());
        assert_eq!(
            DomainWhitelist::parse(hundred_and_one),
            Err((100, EmailDomainError::TooMany))
        );
    }

    #[test]
    fn whitelists_match_an_address_by_its_domain() {
        let list = DomainWhitelist::parse(strings(&["example.com", "acme.test"])).unwrap();
        let email = |raw| Email::parse(raw).unwrap();
        assert!(list.contains_email_domain(&email("ada@example.com")));
        assert!(list.contains_email_domain(&email("Ada@ACME.test")));
        assert!(!list.contains_email_domain(&email("ada@eu.example.com")));
        assert!(!list.contains_email_domain(&email("ada@example.org")));
        assert!(!DomainWhitelist::default().contains_email_domain(&email("ada@example.com")));
    }

    #[test]
    fn provision_roles_never_include_owner() {
        for (raw, role) in [
            ("admin", Role::Admin),
            ("member", Role::Member),
            ("viewer", Role::Viewer),
        ] {
            let parsed = ProvisionRole::parse(raw).unwrap();
            assert_eq!(parsed.role(), role);
            assert_eq!(parsed.as_str(), raw);
        }
        assert_eq!(ProvisionRole::parse("owner"), Err(ProvisionRoleError));
        assert_eq!(ProvisionRole::parse("Admin"), Err(ProvisionRoleError));
        assert_eq!(
            ProvisionRoleError.to_string(),
            "must be one of: admin, member, viewer"
        );
        assert_eq!(ProvisionRole::default(), ProvisionRole::Member);
    }

    fn org() -> OrganizationId {
        OrganizationId::from_uuid(Uuid::from_u128(0x0196_0000_0000_7000_8000_0000_0000_0001))
    }

    fn configuration() -> SsoConfiguration {
        SsoConfiguration {
            organization_id: org(),
            provider: SsoProvider::Saml,
            idp_entity_id: IdpEntityId::parse("https://idp.example.com/metadata").unwrap(),
            idp_sso_url: IdpSsoUrl::parse("https://idp.example.com/sso").unwrap(),
            idp_certificate: IdpCertificate::parse(&valid_pem(), now()).unwrap(),
            domain_whitelist: DomainWhitelist::parse(strings(&["example.com"])).unwrap(),
            auto_provision: false,
            default_role: ProvisionRole::Member,
            is_active: true,
            created_at: now(),
            updated_at: now(),
        }
    }

    #[test]
    fn applying_a_change_reports_what_changed() {
        let mut config = configuration();
        let changed = config.apply(SsoChange {
            idp_sso_url: Some(IdpSsoUrl::parse("https://idp.example.com/sso/v2").unwrap()),
            domain_whitelist: Some(
                DomainWhitelist::parse(strings(&["example.com", "example.org"])).unwrap(),
            ),
            auto_provision: Some(true),
            default_role: Some(ProvisionRole::Viewer),
            // Same as now.
            provider: Some(SsoProvider::Saml),
            is_active: Some(true),
            ..SsoChange::default()
        });
        assert_eq!(
            changed,
            [
                "idp_sso_url",
                "domain_whitelist",
                "auto_provision",
                "default_role"
            ]
        );
        assert_eq!(
            config.idp_sso_url.as_str(),
            "https://idp.example.com/sso/v2"
        );
        assert!(config.auto_provision);
        assert_eq!(config.default_role, ProvisionRole::Viewer);
        assert!(config.is_active);
    }

    #[test]
    fn a_new_certificate_is_a_change_only_when_its_fingerprint_differs() {
        let mut config = configuration();
        let same = IdpCertificate::from_stored(config.idp_certificate.pem()).unwrap();
        let changed = config.apply(SsoChange {
            idp_certificate: Some(same),
            ..SsoChange::default()
        });
        assert!(changed.is_empty(), "{changed:?}");

        let other = IdpCertificate::parse(&valid_pem(), now()).unwrap();
        let fingerprint = other.fingerprint_sha256().to_owned();
        let changed = config.apply(SsoChange {
            idp_certificate: Some(other),
            ..SsoChange::default()
        });
        assert_eq!(changed, ["idp_certificate"]);
        assert_eq!(config.idp_certificate.fingerprint_sha256(), fingerprint);
    }

    #[test]
    fn a_no_op_change_changes_nothing() {
        let mut config = configuration();
        assert!(config.apply(SsoChange::default()).is_empty());
        let same = configuration();
        let changed = config.apply(SsoChange {
            provider: Some(same.provider),
            idp_entity_id: Some(same.idp_entity_id.clone()),
            idp_sso_url: Some(same.idp_sso_url.clone()),
            idp_certificate: Some(config.idp_certificate.clone()),
            domain_whitelist: Some(same.domain_whitelist.clone()),
            auto_provision: Some(same.auto_provision),
            default_role: Some(same.default_role),
            is_active: Some(same.is_active),
        });
        assert!(changed.is_empty(), "{changed:?}");
    }

    #[test]
    fn service_provider_urls() {
        let org = org();
        let expected = format!("https://auth.example.com/sso/saml/{org}/metadata");
        assert_eq!(sp_entity_id("https://auth.example.com", org), expected);
        assert_eq!(sp_entity_id("https://auth.example.com/", org), expected);
        assert_eq!(
            sp_acs_url("https://auth.example.com/", org),
            format!("https://auth.example.com/sso/saml/{org}/acs")
        );
        assert!(expected.contains("/sso/saml/01960000-0000-7000-8000-000000000001/metadata"));
    }
}
