//! Applications: the OAuth clients an organization registers (a name, a public `client_id`, a
//! secret stored hashed, and the redirect URIs the authorization flow may return to).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use url::Url;

use super::{
    text::{apply_changes, is_loopback, parse_text, str_display, string_conversions, TextError},
    ApplicationId, OrganizationId, SecretToken, TokenHash,
};

/// An application's name: 1 to 100 characters, trimmed, on one line.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ApplicationName(String);

impl ApplicationName {
    /// The longest name, in characters.
    pub const MAX_CHARS: usize = 100;

    /// A name as given, trimmed.
    ///
    /// # Errors
    /// When it is empty once trimmed, longer than [`Self::MAX_CHARS`], or holds a control
    /// character (a line break among them).
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 1, Self::MAX_CHARS, false).map(Self)
    }

    /// The name, trimmed.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

string_conversions!(ApplicationName, TextError);

/// The public identifier of an application in the OAuth flow: `ghc_` and 32 hex digits.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct ClientId(String);

impl ClientId {
    /// What every client id starts with.
    pub const PREFIX: &'static str = "ghc_";

    /// The client id made from a fresh random id.
    pub fn generate(random: uuid::Uuid) -> Self {
        Self(format!("{}{}", Self::PREFIX, random.simple()))
    }

    /// A client id as a client sent it: `None` when it cannot be one (and so names no
    /// application).
    pub fn parse(raw: &str) -> Option<Self> {
        let hex = raw.strip_prefix(Self::PREFIX)?;
        (hex.len() == 32 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')))
            .then(|| Self(raw.to_owned()))
    }

    /// The client id as clients send it: `ghc_` and 32 lowercase hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

str_display!(ClientId);

/// Why a redirect URI was refused. The messages complete "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedirectUriError {
    /// Not an absolute URL with a host: relative, empty, or with spaces around or inside it.
    #[error("must be an absolute URL")]
    NotAbsolute,
    /// A scheme other than `https`, or `http` on a host that is not loopback.
    #[error("must use https (http only on 127.0.0.1, [::1] or localhost)")]
    NotHttps,
    /// It has a `#fragment`.
    #[error("must not contain a fragment")]
    Fragment,
    /// It has a user name or password before the host.
    #[error("must not contain credentials")]
    Credentials,
    /// Longer than 2048 bytes.
    #[error("must be at most 2048 characters")]
    TooLong,
}

/// A redirect URI: absolute, `https` (or `http` on a loopback host, for native and development
/// clients, RFC 8252 §7.3), no fragment (RFC 6749 §3.1.2), no credentials. Kept exactly as
/// registered: the authorization flow compares redirect URIs as strings, character for
/// character.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RedirectUri(String);

impl RedirectUri {
    /// A redirect URI as registered, kept exactly as given (not trimmed, not normalised).
    pub fn parse(raw: &str) -> Result<Self, RedirectUriError> {
        if raw.len() > 2048 {
            return Err(RedirectUriError::TooLong);
        }
        if raw.contains('#') {
            return Err(RedirectUriError::Fragment);
        }
        if raw.is_empty()
            || raw.trim() != raw
            || raw.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(RedirectUriError::NotAbsolute);
        }
        let url = Url::parse(raw).map_err(|_| RedirectUriError::NotAbsolute)?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(RedirectUriError::Credentials);
        }
        if url.host().is_none() {
            return Err(RedirectUriError::NotAbsolute);
        }
        match url.scheme() {
            "https" => Ok(Self(raw.to_owned())),
            "http" if is_loopback(&url) => Ok(Self(raw.to_owned())),
            _ => Err(RedirectUriError::NotHttps),
        }
    }

    /// The URI exactly as registered.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

string_conversions!(RedirectUri, RedirectUriError);

/// Why a list of redirect URIs was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RedirectUrisError {
    /// No URI at all.
    #[error("must hold at least one redirect URI")]
    Empty,
    /// More than [`RedirectUris::MAX`].
    #[error("must hold at most {max} redirect URIs", max = RedirectUris::MAX)]
    TooMany,
    /// The same URI twice, character for character.
    #[error("must not repeat a redirect URI")]
    Duplicate,
}

/// An application's redirect URIs: 1 to 10, each once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct RedirectUris(Vec<RedirectUri>);

impl RedirectUris {
    /// The most redirect URIs an application may register.
    pub const MAX: usize = 10;

    /// The list, in the order given.
    ///
    /// # Errors
    /// When it is empty, longer than [`Self::MAX`], or repeats a URI.
    pub fn new(uris: Vec<RedirectUri>) -> Result<Self, RedirectUrisError> {
        if uris.is_empty() {
            return Err(RedirectUrisError::Empty);
        }
        if uris.len() > Self::MAX {
            return Err(RedirectUrisError::TooMany);
        }
        if uris
            .iter()
            .enumerate()
            .any(|(i, uri)| uris[..i].contains(uri))
        {
            return Err(RedirectUrisError::Duplicate);
        }
        Ok(Self(uris))
    }

    /// The registered URI that is exactly `candidate`, character for character.
    pub fn exactly(&self, candidate: &str) -> Option<&RedirectUri> {
        self.0.iter().find(|uri| uri.as_str() == candidate)
    }

    /// The URIs, in the order registered.
    pub fn iter(&self) -> impl Iterator<Item = &RedirectUri> {
        self.0.iter()
    }
}

impl<'de> Deserialize<'de> for RedirectUris {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let uris = Vec::<RedirectUri>::deserialize(deserializer)?;
        Self::new(uris).map_err(serde::de::Error::custom)
    }
}

/// An application, as the API shows it (never with its secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Application {
    /// The application's id in the API.
    pub id: ApplicationId,
    /// The organization that registered it and owns it.
    pub organization_id: OrganizationId,
    /// What users are shown it is called.
    pub name: ApplicationName,
    /// Its public identifier in the OAuth flow; never changes.
    pub client_id: ClientId,
    /// Where the authorization flow may send users back to.
    pub redirect_uris: RedirectUris,
    /// Whether it may use the OAuth flow; an inactive application's client is refused.
    pub is_active: bool,
    /// Whether every authorization request must carry a PKCE challenge (S256). Without it, a
    /// request may leave PKCE out: the application is a confidential client, and its secret
    /// binds the code at the exchange.
    pub require_pkce: bool,
    /// When it was registered.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// An application to store, with its secret's hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewApplication {
    /// The application as registered.
    pub application: Application,
    /// The hash of its client secret, which was handed to the caller once.
    pub secret_hash: TokenHash,
}

/// The fields of an application update; `None` leaves a field.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApplicationChange {
    /// A new name.
    pub name: Option<ApplicationName>,
    /// A new list of redirect URIs, replacing the whole list.
    pub redirect_uris: Option<RedirectUris>,
    /// `false` deactivates the application, `true` reactivates it.
    pub is_active: Option<bool>,
    /// Whether authorization requests must carry a PKCE challenge.
    pub require_pkce: Option<bool>,
}

impl Application {
    /// Applies the change; the names of the fields it changed.
    pub fn apply(&mut self, change: ApplicationChange) -> Vec<&'static str> {
        apply_changes!(self, change; name, redirect_uris, is_active, require_pkce)
    }
}

/// A client secret presented to the token endpoint, checked against the stored hash. The hash
/// is of a 256-bit random secret, so comparing hashes (in constant time) is the whole check.
pub fn client_secret_matches(presented: &SecretToken, stored: &TokenHash) -> bool {
    let (a, b) = (presented.hash(), stored.clone());
    let (a, b) = (a.as_hex().as_bytes(), b.as_hex().as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::holds_at_most;

    fn uri(raw: &str) -> RedirectUri {
        RedirectUri::parse(raw).unwrap()
    }

    #[test]
    fn names_are_trimmed_and_1_to_100_characters() {
        assert_eq!(
            ApplicationName::parse("  Billing  ").unwrap().as_str(),
            "Billing"
        );
        assert_eq!(ApplicationName::parse("   "), Err(TextError::Empty));
        holds_at_most(ApplicationName::parse, "é", 100);
        assert_eq!(
            ApplicationName::parse("two\nlines"),
            Err(TextError::ControlCharacter)
        );
    }

    #[test]
    fn redirect_uris_are_https_or_http_on_loopback_and_kept_as_given() {
        for ok in [
            "https://app.example.com/callback",
            "https://app.example.com/cb?x=1",
            "http://127.0.0.1:8765/callback",
            "http://[::1]/cb",
            "http://localhost:3000/cb",
            "https://APP.example.com/CallBack/",
        ] {
            assert_eq!(uri(ok).as_str(), ok, "kept exactly");
        }
        let refused = [
            ("http://app.example.com/cb", RedirectUriError::NotHttps),
            (
                "http://127.0.0.2.example.com/cb",
                RedirectUriError::NotHttps,
            ),
            ("ftp://app.example.com/cb", RedirectUriError::NotHttps),
            ("/callback", RedirectUriError::NotAbsolute),
            ("app.example.com/cb", RedirectUriError::NotAbsolute),
            ("https://app.example.com/cb#top", RedirectUriError::Fragment),
            (
                "https://user:pw@app.example.com/cb",
                RedirectUriError::Credentials,
            ),
            (" https://app.example.com/cb", RedirectUriError::NotAbsolute),
            ("", RedirectUriError::NotAbsolute),
        ];
        for (raw, error) in refused {
            assert_eq!(RedirectUri::parse(raw), Err(error), "{raw}");
        }
        let long = format!("https://app.example.com/{}", "a".repeat(2048));
        assert_eq!(RedirectUri::parse(&long), Err(RedirectUriError::TooLong));
    }

    #[test]
    fn an_application_has_1_to_10_distinct_redirect_uris_matched_exactly() {
        assert_eq!(RedirectUris::new(vec![]), Err(RedirectUrisError::Empty));
        let many = (0..11)
            .map(|n| uri(&format!("https://a.example.com/{n}")))
            .collect();
        assert_eq!(RedirectUris::new(many), Err(RedirectUrisError::TooMany));
        let twice = vec![
            uri("https://a.example.com/cb"),
            uri("https://a.example.com/cb"),
        ];
        assert_eq!(RedirectUris::new(twice), Err(RedirectUrisError::Duplicate));
        let uris = RedirectUris::new(vec![uri("https://a.example.com/cb")]).unwrap();
        assert!(uris.exactly("https://a.example.com/cb").is_some());
        assert!(
            uris.exactly("https://a.example.com/cb/").is_none(),
            "one character more"
        );
        assert!(
            uris.exactly("https://a.example.com/c").is_none(),
            "one character less"
        );
        assert!(
            uris.exactly("https://A.example.com/cb").is_none(),
            "case counts"
        );
    }

    #[test]
    fn client_ids_are_generated_and_recognized() {
        let id = ClientId::generate(uuid::Uuid::from_u128(0xabc));
        assert_eq!(id.as_str(), "ghc_00000000000000000000000000000abc");
        assert_eq!(ClientId::parse(id.as_str()), Some(id));
        assert_eq!(
            ClientId::parse("ghc_00000000000000000000000000000ABC"),
            None
        );
        assert_eq!(ClientId::parse("ghc_123"), None);
        assert_eq!(ClientId::parse("other"), None);
    }

    #[test]
    fn a_client_secret_matches_only_its_own_hash() {
        let secret = SecretToken::new("ghcs_secret".to_owned());
        assert!(client_secret_matches(&secret, &secret.hash()));
        let other = SecretToken::new("ghcs_other".to_owned());
        assert!(!client_secret_matches(&other, &secret.hash()));
    }

    #[test]
    fn a_change_reports_the_fields_it_changed() {
        let now = OffsetDateTime::UNIX_EPOCH;
        let mut app = Application {
            id: ApplicationId::from_uuid(uuid::Uuid::from_u128(1)),
            organization_id: OrganizationId::from_uuid(uuid::Uuid::from_u128(2)),
            name: ApplicationName::parse("Billing").unwrap(),
            client_id: ClientId::generate(uuid::Uuid::from_u128(3)),
            redirect_uris: RedirectUris::new(vec![uri("https://a.example.com/cb")]).unwrap(),
            is_active: true,
            require_pkce: false,
            created_at: now,
            updated_at: now,
        };
        let same = ApplicationChange {
            name: Some(ApplicationName::parse("Billing").unwrap()),
            ..ApplicationChange::default()
        };
        assert!(app.apply(same).is_empty());
        let change = ApplicationChange {
            name: Some(ApplicationName::parse("Invoices").unwrap()),
            redirect_uris: None,
            is_active: Some(false),
            require_pkce: Some(true),
        };
        assert_eq!(app.apply(change), ["name", "is_active", "require_pkce"]);
        assert_eq!(app.name.as_str(), "Invoices");
        assert!(!app.is_active);
        assert!(app.require_pkce);
        let again = ApplicationChange {
            require_pkce: Some(true),
            ..ApplicationChange::default()
        };
        assert!(app.apply(again).is_empty(), "already required");
    }
}
