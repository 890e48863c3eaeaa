//! SAML sign-in: the requests Gatehouse sends an identity provider, and what it takes back.
//!
//! The XML itself (signatures, canonicalization, the protocol's checks) belongs to the
//! [`SamlProtocol`](crate::ports::SamlProtocol) adapter; these are the values the use case
//! reasons about once the adapter has vouched for them.

use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::{text::str_display, IdpCertificate, IdpEntityId, IdpSsoUrl, OrganizationId};

/// How long an `AuthnRequest` waits for its response: 10 minutes.
pub const SAML_REQUEST_TTL: Duration = Duration::minutes(10);

/// How far the identity provider's clock may be from ours: a response is accepted this long
/// before its `NotBefore` and after its `NotOnOrAfter`.
pub const SAML_CLOCK_SKEW: Duration = Duration::minutes(2);

/// Where to send the browser after signing in: a path on this service, never another site
/// (no open redirect). Starts with one `/`, holds no `\`, no white space or control
/// character, at most [`ReturnPath::MAX_CHARS`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ReturnPath(String);

/// The return address is not a path on this service.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be a path on this service, such as /oauth/authorize?...")]
pub struct ReturnPathError;

impl ReturnPath {
    /// The longest path accepted, in characters.
    pub const MAX_CHARS: usize = 2048;

    /// Where a sign-in lands when nothing asked to go anywhere: `/login/done`.
    pub fn done() -> Self {
        Self("/login/done".to_owned())
    }

    /// A path of this service: `/` followed by anything but a second `/` or a `\` (which
    /// browsers read as another host), with no white space or control character.
    pub fn parse(raw: &str) -> Result<Self, ReturnPathError> {
        let ok = raw.starts_with('/')
            && !raw.starts_with("//")
            && !raw.starts_with("/\\")
            && !raw.contains('\\')
            && raw.chars().count() <= Self::MAX_CHARS
            && !raw.chars().any(|c| c.is_whitespace() || c.is_control());
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(ReturnPathError)
        }
    }

    /// The path, with its query.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

str_display!(ReturnPath);

/// The `ID` of an `AuthnRequest`, which the identity provider's answer names in
/// `InResponseTo`: `_` and 32 hexadecimal digits of a random UUID (an XML name must not start
/// with a digit).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SamlRequestId(String);

impl SamlRequestId {
    /// A new id from a random UUID.
    pub fn generate(random: Uuid) -> Self {
        Self(format!("_{}", random.simple()))
    }

    /// An id as Gatehouse makes them; `None` for anything else (so an unknown `InResponseTo`
    /// never reaches the store).
    pub fn parse(raw: &str) -> Option<Self> {
        let hex = raw.strip_prefix('_')?;
        (hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| Self(raw.to_owned()))
    }

    /// The id as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

str_display!(SamlRequestId);

/// An `AuthnRequest` sent to an organization's identity provider and not yet answered: single
/// use, for [`SAML_REQUEST_TTL`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamlRequest {
    /// Its `ID`.
    pub id: SamlRequestId,
    /// The organization whose identity provider it was sent to; only that organization's
    /// assertion consumer takes its answer.
    pub organization_id: OrganizationId,
    /// Where the browser goes once signed in; it stays here (the identity provider gets the
    /// id as `RelayState`).
    pub return_to: ReturnPath,
    /// When it was sent.
    pub created_at: OffsetDateTime,
    /// When it stops being answerable.
    pub expires_at: OffsetDateTime,
}

/// What a response is checked against: the organization's identity provider and Gatehouse's
/// own addresses as its service provider.
#[derive(Clone, Debug, PartialEq)]
pub struct SamlTrust {
    /// The identity provider's entity id: the `Issuer` it must name.
    pub idp_entity_id: IdpEntityId,
    /// The certificate whose key must have signed the response or its assertion.
    pub idp_certificate: IdpCertificate,
    /// Where the identity provider signs people in (the `AuthnRequest`'s destination).
    pub idp_sso_url: IdpSsoUrl,
    /// Gatehouse's entity id for the organization: the assertion's `Audience`, the request's
    /// `Issuer`.
    pub sp_entity_id: String,
    /// Gatehouse's assertion consumer for the organization: the response's `Destination` and
    /// the confirmation's `Recipient`.
    pub acs_url: String,
}

/// The assertion of a response that passed every check of the
/// [`SamlProtocol`](crate::ports::SamlProtocol) adapter: every value here comes from the
/// element whose signature verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SamlAssertion {
    /// The assertion's `ID`: seen once, never again (replays are refused).
    pub id: String,
    /// The subject's `NameID`, as signed.
    pub name_id: String,
    /// The `InResponseTo` of the bearer confirmation; `None` for an unsolicited
    /// (IdP-initiated) response.
    pub in_response_to: Option<String>,
    /// Until when the assertion could be presented (its confirmation's or conditions'
    /// `NotOnOrAfter`, whichever is later): how long its id must be remembered.
    pub valid_until: OffsetDateTime,
    /// The user's name, from a `name`, `displayName` or `cn` attribute when one was sent.
    pub full_name: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::refuses_each;

    #[test]
    fn return_paths_stay_on_this_service() {
        for good in ["/oauth/authorize?client_id=a&state=b", "/", "/login/done"] {
            assert_eq!(ReturnPath::parse(good).unwrap().as_str(), good);
        }
        refuses_each(
            ReturnPath::parse,
            &[
                "https://evil.example.com",
                "//evil.example.com",
                "/\\evil.example.com",
                "/a\\b",
                "evil",
                "",
                "/a b",
                "/a\nb",
            ],
            ReturnPathError,
        );
        let long = format!("/{}", "a".repeat(ReturnPath::MAX_CHARS));
        assert_eq!(ReturnPath::parse(&long), Err(ReturnPathError));
    }

    #[test]
    fn request_ids_are_xml_names_gatehouse_made() {
        let id = SamlRequestId::generate(Uuid::from_u128(0xabc));
        assert_eq!(id.as_str(), "_00000000000000000000000000000abc");
        assert_eq!(SamlRequestId::parse(id.as_str()), Some(id));
        for bad in [
            "",
            "_",
            "00000000000000000000000000000abc",
            "_00000000000000000000000000000ABC",
            "_00000000000000000000000000000abc0",
            "id-1234",
        ] {
            assert_eq!(SamlRequestId::parse(bad), None, "{bad:?}");
        }
    }
}
