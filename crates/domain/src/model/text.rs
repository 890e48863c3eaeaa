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
    /// A bidirectional control or an invisible, zero-width character (U+202E, U+200B, U+2066,
    /// U+FEFF and the rest of those classes).
    #[error("{INVISIBLE_CONTROL}")]
    InvisibleControl,
}

/// What a text holding an [`is_invisible_control`] character is told, completing
/// "`<field>` ...".
pub(crate) const INVISIBLE_CONTROL: &str =
    "must not contain bidirectional or zero-width control characters";

/// Whether `c` changes how the text around it is shown without being seen itself: Unicode's
/// bidirectional controls (the property `Bidi_Control`: U+061C, U+200E, U+200F,
/// U+202A..U+202E, U+2066..U+2069), with which `evil\u{202E}gpj.exe` reads as `evilexe.jpg`, and
/// the zero-width and invisible format characters (U+00AD soft hyphen, U+180E, U+200B..U+200D
/// zero-width space, non-joiner and joiner, U+2060..U+2064 word joiner and invisible operators,
/// U+FEFF), with which two names that look the same are two names. No name or address needs
/// them; refusing them costs emoji sequences joined by U+200D and the Persian non-joiner.
pub(crate) fn is_invisible_control(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}'
    )
}

/// `raw` trimmed and in Unicode's composed normal form (NFC): `e` followed by a combining acute
/// accent and the single `é` are one text, stored one way.
pub(crate) fn normalized(raw: &str) -> String {
    use unicode_normalization::UnicodeNormalization as _;
    raw.trim().nfc().collect()
}

/// The rule shared by every bounded text and name: trimmed and NFC ([`normalized`]),
/// `min..=max` characters (not bytes), no control characters except line feeds when
/// `allow_newlines`, no bidirectional or zero-width controls ([`is_invisible_control`]).
pub(crate) fn parse_text(
    raw: &str,
    min: usize,
    max: usize,
    allow_newlines: bool,
) -> Result<String, TextError> {
    let text = normalized(raw);
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
    if text.chars().any(is_invisible_control) {
        return Err(TextError::InvisibleControl);
    }
    Ok(text)
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

/// `AsRef<str>` for newtypes that hold their text in a `String`: the text.
macro_rules! str_ref {
    ($($name:ty),+ $(,)?) => {
        $(
            impl AsRef<str> for $name {
                fn as_ref(&self) -> &str {
                    &self.0
                }
            }
        )+
    };
}

/// `Display` for newtypes that hold their text in a `String`: the text, as it is.
macro_rules! str_display {
    ($($name:ty),+ $(,)?) => {
        $(
            impl ::std::fmt::Display for $name {
                fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                    f.write_str(&self.0)
                }
            }
        )+
    };
}

/// `Display` for types that name themselves with `as_str()`: that name.
macro_rules! display_as_str {
    ($($name:ty),+ $(,)?) => {
        $(
            impl ::std::fmt::Display for $name {
                fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                    f.write_str(self.as_str())
                }
            }
        )+
    };
}

/// `FromStr` for a type with a `parse(&str) -> Result<Self, $error>`: the same.
macro_rules! from_str_by_parse {
    ($name:ty, $error:ty) => {
        impl ::std::str::FromStr for $name {
            type Err = $error;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s)
            }
        }
    };
}

/// Applies a merge-style change field by field with [`replace`]: each named field of
/// `$change` (a path such as `custom_login.title`) that is `Some` and differs replaces the same
/// field of `$target`. Evaluates to the names of the fields that changed (`custom_login.title`),
/// in the order named.
macro_rules! apply_changes {
    ($target:ident, $change:ident; $($($field:ident).+),+ $(,)?) => {{
        let mut changed: Vec<&'static str> = Vec::new();
        $(
            if $crate::model::text::replace(&mut $target.$($field).+, $change.$($field).+) {
                changed.push(stringify!($($field).+));
            }
        )+
        changed
    }};
}

/// `as_str()` (documented by the attributes given) and `FromStr` of a field-less enum, from
/// one table of its variants' names; `FromStr` refuses any other name with `$refused`.
macro_rules! named_variants {
    (
        $name:ty,
        $(#[$doc:meta])*
        refused = $refused:literal,
        { $($variant:ident => $text:literal),+ $(,)? }
    ) => {
        impl $name {
            $(#[$doc])*
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = &'static str;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err($refused),
                }
            }
        }
    };
}

/// `AsRef<str>`, `Display`, and the `String` conversions serde goes through.
macro_rules! string_conversions {
    ($name:ident, $error:ty) => {
        $crate::model::text::str_ref!($name);
        $crate::model::text::str_display!($name);

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

pub(crate) use {
    apply_changes, display_as_str, from_str_by_parse, named_variants, str_display, str_ref,
    string_conversions,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bounded_text_refuses_bidirectional_and_zero_width_controls() {
        for c in [
            '\u{202E}', '\u{202A}', '\u{200E}', '\u{200F}', '\u{061C}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200B}', '\u{200C}', '\u{200D}', '\u{2060}', '\u{FEFF}',
            '\u{00AD}', '\u{180E}',
        ] {
            let raw = format!("Acme{c}Corp");
            assert_eq!(
                parse_text(&raw, 1, 100, true),
                Err(TextError::InvisibleControl),
                "U+{:04X}",
                u32::from(c)
            );
        }
        // Letters of every script, accents, emoji without joiners: kept.
        for fine in ["Zoë", "Łódź", "東京", "محمد", "Acme 🚀", "a\nb"] {
            assert_eq!(parse_text(fine, 1, 100, true).as_deref(), Ok(fine));
        }
    }

    #[test]
    fn texts_are_kept_in_nfc() {
        let decomposed = "Zoe\u{308}";
        assert_eq!(
            parse_text(decomposed, 1, 100, false).as_deref(),
            Ok("Zo\u{eb}")
        );
        // Counted once composed: four characters, not five.
        assert_eq!(
            parse_text(decomposed, 1, 4, false).as_deref(),
            Ok("Zo\u{eb}")
        );
    }
}
