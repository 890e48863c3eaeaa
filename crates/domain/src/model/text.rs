//! The parsing rules that several kinds of values share: bounded texts and `https` URLs, and
//! the merge rule of partial updates. One place for each, so that a branding text and an SSO
//! name, or a logo URL and an IdP URL, can never drift apart.

/// Why a text was refused. The messages complete "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// Nothing left once trimmed, where the text is required.
    #[error("must not be empty")]
    Empty,
    /// More characters than the text allows, once trimmed.
    #[error("must be at most {max} characters")]
    TooLong {
        /// The most characters (not bytes) the text allows.
        max: usize,
    },
    /// A control character, or a line break where the text must stay on one line.
    #[error("must not contain control characters")]
    ControlCharacter,
}

/// The rule shared by every bounded text: trimmed, `min..=max` characters (not bytes), no
/// control characters except line feeds when `allow_newlines`.
pub(crate) fn parse_text(
    raw: &str,
    min: usize,
    max: usize,
    allow_newlines: bool,
) -> Result<String, TextError> {
    let text = raw.trim();
    let chars = text.chars().count();
    if chars < min {
        return Err(TextError::Empty);
    }
    if chars > max {
        return Err(TextError::TooLong { max });
    }
    if text
        .chars()
        .any(|c| c.is_control() && !(allow_newlines && c == '\n'))
    {
        return Err(TextError::ControlCharacter);
    }
    Ok(text.to_owned())
}

/// Why a URL that must be `https` was refused. The messages complete "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpsUrlError {
    /// Not an absolute URL with a host, or it holds white space or a control character.
    #[error("is not a valid absolute URL")]
    Invalid,
    /// An absolute URL whose scheme is not `https`.
    #[error("must be an https URL")]
    NotHttps,
    /// The URL carries a user name or password (`user:password@`).
    #[error("must not contain a user name or password")]
    Credentials,
    /// More than 2048 characters, once trimmed.
    #[error("must be at most 2048 characters")]
    TooLong,
}

/// The https-URL rule, shared by every URL the product follows or shows: an absolute `https`
/// URL (as the `url` crate reads it) with a host, no user name or password, at most 2048
/// characters, and no white space or control character anywhere (the `url` crate would
/// silently drop tabs and line breaks, and the string is kept as sent). Trims first.
pub(crate) fn parse_https_url(raw: &str) -> Result<url::Url, HttpsUrlError> {
    parse_web_url(raw, false)
}

/// The https-URL rule, except that `http` is accepted on a loopback host (`127.0.0.0/8`,
/// `[::1]`, `localhost`): an address only the user's own machine serves, for development.
pub(crate) fn parse_https_or_loopback_url(raw: &str) -> Result<url::Url, HttpsUrlError> {
    parse_web_url(raw, true)
}

/// Whether the URL's host is a loopback address or `localhost`.
pub(crate) fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(domain)) => domain.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

fn parse_web_url(raw: &str, loopback_http: bool) -> Result<url::Url, HttpsUrlError> {
    const MAX_CHARS: usize = 2048;
    let raw = raw.trim();
    if raw.chars().count() > MAX_CHARS {
        return Err(HttpsUrlError::TooLong);
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(HttpsUrlError::Invalid);
    }
    let url = url::Url::parse(raw).map_err(|_| HttpsUrlError::Invalid)?;
    match url.scheme() {
        "https" => {}
        "http" if loopback_http && is_loopback(&url) => {}
        _ => return Err(HttpsUrlError::NotHttps),
    }
    if url.host().is_none() {
        return Err(HttpsUrlError::Invalid);
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(HttpsUrlError::Credentials);
    }
    Ok(url)
}

/// Puts `new` (when given) into `slot`; whether that changed it.
pub(crate) fn replace<T: PartialEq>(slot: &mut T, new: Option<T>) -> bool {
    match new {
        Some(new) if *slot != new => {
            *slot = new;
            true
        }
        _ => false,
    }
}

/// `AsRef<str>`, `Display`, and the `String` conversions serde goes through.
macro_rules! string_conversions {
    ($name:ident, $error:ty) => {
        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = $error;
            fn try_from(raw: String) -> Result<Self, Self::Error> {
                Self::parse(&raw)
            }
        }
    };
}

pub(crate) use string_conversions;
