//! The identity provider (IdP) an organization trusts: its entity id, its single sign-on URL,
//! and the certificate that signs its assertions.

use std::fmt;

use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::model::text::{
    parse_https_or_loopback_url, parse_text, str_display, str_ref, HttpsUrlError, TextError,
};

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

str_ref!(IdpEntityId);

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

str_ref!(IdpSsoUrl);

str_display!(IdpSsoUrl);

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
