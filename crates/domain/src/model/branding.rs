//! An organization's white-label branding: colors, logo and favicon, the login page's texts and
//! background, and how its emails are signed.
//!
//! Every value is parsed on the way in ("parse, don't validate"), including when a stored
//! document is read back: [`Branding`]'s `Deserialize` goes through the same parsers, so a
//! corrupt document cannot produce an invalid value.

use serde::{Deserialize, Serialize};

use super::text::{
    apply_changes, parse_https_url, parse_text, str_display, str_ref, string_conversions,
    HttpsUrlError, TextError,
};
use super::Email;

/// A color written `#RRGGBB`: `#` and exactly six hex digits, either case, kept as sent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct HexColor(String);

/// Why a color was refused. The message completes "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HexColorError {
    /// Not `#` followed by exactly six hex digits, with nothing around them.
    #[error("must be a color in the form #RRGGBB")]
    Invalid,
}

impl HexColor {
    /// Checks `raw` is `#RRGGBB` as it stands: white space around it is refused, not trimmed.
    pub fn parse(raw: &str) -> Result<Self, HexColorError> {
        let digits = raw.strip_prefix('#').ok_or(HexColorError::Invalid)?;
        if digits.len() != 6 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(HexColorError::Invalid);
        }
        Ok(Self(raw.to_owned()))
    }

    /// The color as sent, `#` included.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The URL of an image the product shows: absolute `https`, with a host, no credentials, at
/// most 2048 characters, and a path (query and fragment aside, case ignored) ending in one of
/// the extensions allowed for its use. Kept as sent, trimmed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct AssetUrl(String);

/// Why an image URL was refused. The messages complete "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AssetUrlError {
    /// Not an absolute `https` URL without credentials, or too long.
    #[error(transparent)]
    Url(#[from] HttpsUrlError),
    /// The path does not end in an allowed extension; `allowed` reads like `.png or .svg`.
    #[error("must end in {allowed}")]
    Extension {
        /// The extensions allowed for the image's use, as the message lists them.
        allowed: &'static str,
    },
}

impl AssetUrl {
    const LOGO: &'static [&'static str] = &[".png", ".svg"];
    const FAVICON: &'static [&'static str] = &[".ico", ".png"];
    const BACKGROUND: &'static [&'static str] = &[".png", ".jpg", ".jpeg", ".webp", ".svg"];

    /// A logo: `.png` or `.svg`.
    pub fn logo(raw: &str) -> Result<Self, AssetUrlError> {
        Self::parse_with(raw, Self::LOGO, ".png or .svg")
    }

    /// A favicon: `.ico` or `.png`.
    pub fn favicon(raw: &str) -> Result<Self, AssetUrlError> {
        Self::parse_with(raw, Self::FAVICON, ".ico or .png")
    }

    /// A login page background: `.png`, `.jpg`, `.jpeg`, `.webp` or `.svg`.
    pub fn background(raw: &str) -> Result<Self, AssetUrlError> {
        Self::parse_with(raw, Self::BACKGROUND, ".png, .jpg, .jpeg, .webp or .svg")
    }

    fn parse_with(
        raw: &str,
        extensions: &[&str],
        allowed: &'static str,
    ) -> Result<Self, AssetUrlError> {
        let raw = raw.trim();
        let url = parse_https_url(raw)?;
        // `path()` leaves out the query and the fragment.
        let file_name = url
            .path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_ascii_lowercase();
        let allowed_ext = extensions
            .iter()
            .any(|ext| file_name.len() > ext.len() && file_name.ends_with(ext));
        if !allowed_ext {
            return Err(AssetUrlError::Extension { allowed });
        }
        Ok(Self(raw.to_owned()))
    }

    /// The URL, trimmed, otherwise as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

macro_rules! bounded_text {
    ($(#[$doc:meta])* $name:ident, min = $min:literal, max = $max:literal, newlines = $newlines:literal) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            #[doc = concat!("The fewest characters accepted, after trimming: ", $min, ".")]
            pub const MIN_CHARS: usize = $min;
            #[doc = concat!("The most characters accepted, after trimming: ", $max, ".")]
            pub const MAX_CHARS: usize = $max;

            #[doc = concat!(
                "Trims `raw`, then checks it has ", $min, " to ", $max,
                " characters (not bytes) and no control character the type forbids."
            )]
            pub fn parse(raw: &str) -> Result<Self, TextError> {
                parse_text(raw, Self::MIN_CHARS, Self::MAX_CHARS, $newlines).map(Self)
            }

            /// The text, trimmed.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        string_conversions!($name, TextError);
    };
}

string_conversions!(HexColor, HexColorError);

str_ref!(AssetUrl);

str_display!(AssetUrl);

bounded_text!(
    /// The login page's title: 1 to 100 characters, on one line.
    LoginTitle,
    min = 1,
    max = 100,
    newlines = false
);
bounded_text!(
    /// The login page's subtitle: up to 200 characters, on one line; may be empty.
    LoginSubtitle,
    min = 0,
    max = 200,
    newlines = false
);
bounded_text!(
    /// The display name emails are sent from: 1 to 100 characters. It goes into the `From`
    /// header, so it never holds a line break (or any other control character).
    SenderName,
    min = 1,
    max = 100,
    newlines = false
);
bounded_text!(
    /// The text at the foot of every email: up to 1000 characters; line feeds allowed, no
    /// other control character (no `\r`). May be empty.
    FooterText,
    min = 0,
    max = 1000,
    newlines = true
);

/// An organization's branding, as the API shows it and the store keeps it (one JSON document).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Branding {
    /// The organization's logo, a `.png` or `.svg` (see [`AssetUrl::logo`]); `None` when it
    /// has none.
    #[serde(default, deserialize_with = "asset_serde::logo")]
    pub logo_url: Option<AssetUrl>,
    /// The icon browsers show for the login page, a `.ico` or `.png` (see
    /// [`AssetUrl::favicon`]); `None` when it has none.
    #[serde(default, deserialize_with = "asset_serde::favicon")]
    pub favicon_url: Option<AssetUrl>,
    /// The brand's main color; indigo (`#4F46E5`) by default.
    pub primary_color: HexColor,
    /// The brand's secondary color; sky blue (`#0EA5E9`) by default.
    pub accent_color: HexColor,
    /// The login page's texts and background.
    pub custom_login: CustomLogin,
    /// How the organization's emails are signed.
    pub email_branding: EmailBranding,
}

/// The login page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CustomLogin {
    /// The page's heading; "Sign in" by default.
    pub title: LoginTitle,
    /// The line under the heading; empty for none.
    pub subtitle: LoginSubtitle,
    /// The page's background image (see [`AssetUrl::background`]); `None` for none.
    #[serde(default, deserialize_with = "asset_serde::background")]
    pub background_url: Option<AssetUrl>,
}

/// How the organization's emails are signed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmailBranding {
    /// The display name in the `From` header; "Gatehouse" by default.
    pub from_name: SenderName,
    /// The address replies go to (the `Reply-To` header); `None` for no such header.
    #[serde(default, deserialize_with = "email_serde::optional")]
    pub reply_to: Option<Email>,
    /// The text at the foot of every email; empty for none.
    pub footer_text: FooterText,
}

impl Default for Branding {
    /// No images, indigo and sky blue, "Sign in", emails from "Gatehouse".
    fn default() -> Self {
        // Literals known to pass their parsers (see the `defaults_are_valid` test).
        Self {
            logo_url: None,
            favicon_url: None,
            primary_color: HexColor("#4F46E5".to_owned()),
            accent_color: HexColor("#0EA5E9".to_owned()),
            custom_login: CustomLogin {
                title: LoginTitle("Sign in".to_owned()),
                subtitle: LoginSubtitle(String::new()),
                background_url: None,
            },
            email_branding: EmailBranding {
                from_name: SenderName("Gatehouse".to_owned()),
                reply_to: None,
                footer_text: FooterText(String::new()),
            },
        }
    }
}

/// A merge-style change to a [`Branding`]: a `None` field keeps its value; for the nullable
/// fields, `Some(None)` removes the value and `Some(Some(v))` sets it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BrandingChange {
    /// `Some(Some(url))` sets the logo, `Some(None)` removes it, `None` keeps it.
    pub logo_url: Option<Option<AssetUrl>>,
    /// `Some(Some(url))` sets the favicon, `Some(None)` removes it, `None` keeps it.
    pub favicon_url: Option<Option<AssetUrl>>,
    /// The new main color; `None` keeps the current one.
    pub primary_color: Option<HexColor>,
    /// The new secondary color; `None` keeps the current one.
    pub accent_color: Option<HexColor>,
    /// The changes to the login page; its default changes nothing.
    pub custom_login: CustomLoginChange,
    /// The changes to email signing; its default changes nothing.
    pub email_branding: EmailBrandingChange,
}

/// The login page part of a [`BrandingChange`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CustomLoginChange {
    /// The new heading; `None` keeps the current one.
    pub title: Option<LoginTitle>,
    /// The new subtitle (empty to clear it); `None` keeps the current one.
    pub subtitle: Option<LoginSubtitle>,
    /// `Some(Some(url))` sets the background, `Some(None)` removes it, `None` keeps it.
    pub background_url: Option<Option<AssetUrl>>,
}

/// The email part of a [`BrandingChange`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EmailBrandingChange {
    /// The new sender display name; `None` keeps the current one.
    pub from_name: Option<SenderName>,
    /// `Some(Some(address))` sets the reply-to address, `Some(None)` removes it, `None` keeps
    /// it.
    pub reply_to: Option<Option<Email>>,
    /// The new footer (empty to clear it); `None` keeps the current one.
    pub footer_text: Option<FooterText>,
}

impl Branding {
    /// Applies the change; returns the dotted names of the fields that actually changed, in
    /// document order (empty when the change changes nothing).
    pub fn apply(&mut self, change: BrandingChange) -> Vec<&'static str> {
        apply_changes!(self, change;
            logo_url, favicon_url, primary_color, accent_color,
            custom_login.title, custom_login.subtitle, custom_login.background_url,
            email_branding.from_name, email_branding.reply_to, email_branding.footer_text,
        )
    }
}

/// Reading the optional image URLs back, each with the rules of its use.
mod asset_serde {
    use serde::{de::Error as _, Deserialize, Deserializer};

    use super::{AssetUrl, AssetUrlError};

    fn optional<'de, D: Deserializer<'de>>(
        deserializer: D,
        field: &str,
        parse: fn(&str) -> Result<AssetUrl, AssetUrlError>,
    ) -> Result<Option<AssetUrl>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|raw| parse(&raw).map_err(|e| D::Error::custom(format_args!("{field} {e}"))))
            .transpose()
    }

    pub(super) fn logo<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AssetUrl>, D::Error> {
        optional(d, "logo_url", AssetUrl::logo)
    }

    pub(super) fn favicon<'de, D: Deserializer<'de>>(d: D) -> Result<Option<AssetUrl>, D::Error> {
        optional(d, "favicon_url", AssetUrl::favicon)
    }

    pub(super) fn background<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<AssetUrl>, D::Error> {
        optional(d, "background_url", AssetUrl::background)
    }
}

/// [`Email`] serialises as its string but has no `Deserialize`: read it through its parser.
mod email_serde {
    use serde::{de::Error as _, Deserialize, Deserializer};

    use super::Email;

    pub(super) fn optional<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Email>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|raw| {
                Email::parse(&raw).map_err(|e| D::Error::custom(format_args!("reply_to {e}")))
            })
            .transpose()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use crate::model::testing::{holds_at_most, refuses_each};
    use serde_json::json;

    use super::*;

    #[test]
    fn colors_are_hash_and_six_hex_digits_kept_as_sent() {
        for ok in ["#4F46E5", "#0ea5e9", "#000000", "#FfFfFf"] {
            assert_eq!(HexColor::parse(ok).unwrap().as_str(), ok);
        }
        refuses_each(
            HexColor::parse,
            &[
                "",
                "#",
                "4F46E5",
                "#4F46E",
                "#4F46E5F",
                "#FFF",
                "#GGGGGG",
                " #4F46E5",
                "#4F46E5 ",
                "##4F46E",
                "#4F46E5FF",
                "rgb(0,0,0)",
                "#ÄÄÄÄÄÄ",
            ],
            HexColorError::Invalid,
        );
        assert_eq!(
            HexColorError::Invalid.to_string(),
            "must be a color in the form #RRGGBB"
        );
    }

    #[test]
    fn logos_are_png_or_svg() {
        for ok in [
            "https://cdn.example.com/logo.png",
            "https://cdn.example.com/brand/logo.svg",
            "https://cdn.example.com/LOGO.PNG",
            "https://cdn.example.com/logo.Svg",
            "https://cdn.example.com/logo.png?v=2",
            "https://cdn.example.com/logo.svg#dark",
            "https://cdn.example.com:8443/a/b/logo.png?v=2&w=100",
        ] {
            assert!(AssetUrl::logo(ok).is_ok(), "{ok}");
        }
        let wrong = AssetUrlError::Extension {
            allowed: ".png or .svg",
        };
        refuses_each(
            AssetUrl::logo,
            &[
                "https://cdn.example.com/logo.jpg",
                "https://cdn.example.com/logo.ico",
                "https://cdn.example.com/logo",
                "https://cdn.example.com/",
                "https://cdn.example.com",
                "https://cdn.example.com/.png",
                "https://cdn.example.com/logo.png/",
                "https://cdn.example.com/logo.pngx",
                "https://cdn.example.com/logo?format=.png",
                "https://cdn.example.com/logo#.svg",
            ],
            wrong.clone(),
        );
        assert_eq!(wrong.to_string(), "must end in .png or .svg");
    }

    #[test]
    fn favicons_are_ico_or_png() {
        assert!(AssetUrl::favicon("https://example.com/favicon.ico").is_ok());
        assert!(AssetUrl::favicon("https://example.com/favicon.PNG?v=2").is_ok());
        let err = AssetUrl::favicon("https://example.com/favicon.svg").unwrap_err();
        assert_eq!(err.to_string(), "must end in .ico or .png");
    }

    #[test]
    fn backgrounds_are_common_image_formats() {
        for ext in ["png", "jpg", "jpeg", "webp", "svg", "JPEG", "WebP"] {
            let url = format!("https://example.com/bg/login.{ext}?v=2");
            assert!(AssetUrl::background(&url).is_ok(), "{url}");
        }
        let err = AssetUrl::background("https://example.com/bg.gif").unwrap_err();
        assert_eq!(
            err.to_string(),
            "must end in .png, .jpg, .jpeg, .webp or .svg"
        );
    }

    #[test]
    fn asset_urls_must_be_plain_https() {
        refuses_each(
            AssetUrl::logo,
            &["http://example.com/logo.png", "ftp://example.com/logo.png"],
            AssetUrlError::Url(HttpsUrlError::NotHttps),
        );
        refuses_each(
            AssetUrl::logo,
            &[
                "https://user:pw@example.com/logo.png",
                "https://user@example.com/logo.png",
            ],
            AssetUrlError::Url(HttpsUrlError::Credentials),
        );
        refuses_each(
            AssetUrl::logo,
            &[
                "",
                "logo.png",
                "/logo.png",
                "example.com/logo.png",
                "https://",
                "https://exa mple.com/logo.png",
                "https://example.com/lo\ngo.png",
            ],
            AssetUrlError::Url(HttpsUrlError::Invalid),
        );
        assert_eq!(
            AssetUrlError::from(HttpsUrlError::NotHttps).to_string(),
            "must be an https URL"
        );
    }

    #[test]
    fn asset_urls_are_at_most_2048_characters_and_kept_as_sent() {
        let prefix = "https://example.com/";
        let fits = format!("{prefix}{}.png", "a".repeat(2048 - prefix.len() - 4));
        assert_eq!(fits.len(), 2048);
        assert!(AssetUrl::logo(&fits).is_ok());
        let over = format!("{prefix}{}.png", "a".repeat(2049 - prefix.len() - 4));
        assert_eq!(
            AssetUrl::logo(&over),
            Err(AssetUrlError::Url(HttpsUrlError::TooLong))
        );

        let url = AssetUrl::logo("  https://CDN.Example.com/Logo.PNG?v=2 ").unwrap();
        assert_eq!(url.as_str(), "https://CDN.Example.com/Logo.PNG?v=2");
    }

    #[test]
    fn texts_count_characters_and_refuse_control_characters() {
        assert_eq!(LoginTitle::parse(""), Err(TextError::Empty));
        assert_eq!(LoginTitle::parse("   "), Err(TextError::Empty));
        assert_eq!(LoginTitle::parse(" Welcome ").unwrap().as_str(), "Welcome");
        // 100 two-byte characters fit: characters are counted, not bytes.
        holds_at_most(LoginTitle::parse, "é", 100);
        assert_eq!(
            LoginTitle::parse("Sign\nin"),
            Err(TextError::ControlCharacter)
        );

        assert_eq!(LoginSubtitle::parse("").unwrap().as_str(), "");
        holds_at_most(LoginSubtitle::parse, "x", 200);
        assert_eq!(
            LoginSubtitle::parse("tab\there"),
            Err(TextError::ControlCharacter)
        );

        assert_eq!(SenderName::parse(""), Err(TextError::Empty));
        holds_at_most(SenderName::parse, "n", 100);

        assert_eq!(FooterText::parse("").unwrap().as_str(), "");
        holds_at_most(FooterText::parse, "f", 1000);
        refuses_each(
            FooterText::parse,
            &["a\u{0}b", "a\u{7f}b", "a\u{85}b", "a\u{1b}[31mb"],
            TextError::ControlCharacter,
        );
        assert_eq!(
            TextError::TooLong { max: 100 }.to_string(),
            "must be at most 100 characters"
        );
    }

    #[test]
    fn sender_names_never_break_the_mail_header() {
        refuses_each(
            SenderName::parse,
            &["Acme\r\nBcc: victim@example.com", "Acme\nX", "Acme\rX"],
            TextError::ControlCharacter,
        );
    }

    #[test]
    fn footers_may_have_line_feeds_but_not_carriage_returns() {
        let footer = FooterText::parse("Acme Inc.\n1 Main Street\nSpringfield").unwrap();
        assert_eq!(footer.as_str().lines().count(), 3);
        assert_eq!(
            FooterText::parse("Acme Inc.\r\n1 Main Street"),
            Err(TextError::ControlCharacter)
        );
    }

    #[test]
    fn defaults_are_valid() {
        let branding = Branding::default();
        assert_eq!(branding.logo_url, None);
        assert_eq!(branding.favicon_url, None);
        assert_eq!(branding.primary_color, HexColor::parse("#4F46E5").unwrap());
        assert_eq!(branding.accent_color, HexColor::parse("#0EA5E9").unwrap());
        assert_eq!(
            branding.custom_login.title,
            LoginTitle::parse("Sign in").unwrap()
        );
        assert_eq!(
            branding.custom_login.subtitle,
            LoginSubtitle::parse("").unwrap()
        );
        assert_eq!(branding.custom_login.background_url, None);
        assert_eq!(
            branding.email_branding.from_name,
            SenderName::parse("Gatehouse").unwrap()
        );
        assert_eq!(branding.email_branding.reply_to, None);
        assert_eq!(
            branding.email_branding.footer_text,
            FooterText::parse("").unwrap()
        );
    }

    fn full_branding() -> Branding {
        Branding {
            logo_url: Some(AssetUrl::logo("https://cdn.acme.test/logo.svg").unwrap()),
            favicon_url: Some(AssetUrl::favicon("https://cdn.acme.test/favicon.ico").unwrap()),
            primary_color: HexColor::parse("#112233").unwrap(),
            accent_color: HexColor::parse("#aabbcc").unwrap(),
            custom_login: CustomLogin {
                title: LoginTitle::parse("Welcome to Acme").unwrap(),
                subtitle: LoginSubtitle::parse("Use your work account").unwrap(),
                background_url: Some(
                    AssetUrl::background("https://cdn.acme.test/bg.webp?v=2").unwrap(),
                ),
            },
            email_branding: EmailBranding {
                from_name: SenderName::parse("Acme").unwrap(),
                reply_to: Some(Email::parse("support@acme.test").unwrap()),
                footer_text: FooterText::parse("Acme Inc.\nSpringfield").unwrap(),
            },
        }
    }

    #[test]
    fn json_has_the_api_shape() {
        assert_eq!(
            serde_json::to_value(Branding::default()).unwrap(),
            json!({
                "logo_url": null,
                "favicon_url": null,
                "primary_color": "#4F46E5",
                "accent_color": "#0EA5E9",
                "custom_login": {"title": "Sign in", "subtitle": "", "background_url": null},
                "email_branding": {"from_name": "Gatehouse", "reply_to": null, "footer_text": ""},
            })
        );
        assert_eq!(
            serde_json::to_value(full_branding()).unwrap(),
            json!({
                "logo_url": "https://cdn.acme.test/logo.svg",
                "favicon_url": "https://cdn.acme.test/favicon.ico",
                "primary_color": "#112233",
                "accent_color": "#aabbcc",
                "custom_login": {
                    "title": "Welcome to Acme",
                    "subtitle": "Use your work account",
                    "background_url": "https://cdn.acme.test/bg.webp?v=2",
                },
                "email_branding": {
                    "from_name": "Acme",
                    "reply_to": "support@acme.test",
                    "footer_text": "Acme Inc.\nSpringfield",
                },
            })
        );
    }

    #[test]
    fn json_round_trips() {
        for branding in [Branding::default(), full_branding()] {
            let text = serde_json::to_string(&branding).unwrap();
            let back: Branding = serde_json::from_str(&text).unwrap();
            assert_eq!(back, branding);
        }
    }

    #[test]
    fn corrupt_documents_do_not_deserialize() {
        let corrupt = |path: &[&str], value: serde_json::Value| {
            let mut doc = serde_json::to_value(full_branding()).unwrap();
            let (last, parents) = path.split_last().unwrap();
            let mut target = &mut doc;
            for key in parents {
                target = &mut target[*key];
            }
            target[*last] = value;
            serde_json::from_value::<Branding>(doc)
        };

        let refused = |path: &[&str], value| corrupt(path, value).unwrap_err().to_string();

        let err = corrupt(&["primary_color"], json!("red")).unwrap_err();
        assert!(err.to_string().contains("#RRGGBB"), "{err}");
        assert_eq!(
            refused(&["accent_color"], json!("#12345")),
            "must be a color in the form #RRGGBB"
        );
        let err = corrupt(&["logo_url"], json!("https://cdn.acme.test/logo.gif")).unwrap_err();
        assert!(
            err.to_string()
                .contains("logo_url must end in .png or .svg"),
            "{err}"
        );
        // A favicon's rules, not a logo's, apply to the favicon.
        assert_eq!(
            refused(&["favicon_url"], json!("https://cdn.acme.test/f.svg")),
            "favicon_url must end in .ico or .png"
        );
        assert_eq!(
            refused(&["logo_url"], json!("http://cdn.acme.test/logo.png")),
            "logo_url must be an https URL"
        );
        assert_eq!(
            refused(
                &["custom_login", "background_url"],
                json!("https://x.test/a.ico")
            ),
            "background_url must end in .png, .jpg, .jpeg, .webp or .svg"
        );
        assert_eq!(
            refused(&["custom_login", "title"], json!("")),
            "must not be empty"
        );
        assert_eq!(
            refused(&["custom_login", "subtitle"], json!("x".repeat(201))),
            "must be at most 200 characters"
        );
        assert_eq!(
            refused(&["email_branding", "from_name"], json!("A\r\nB")),
            "must not contain control characters"
        );
        assert_eq!(
            refused(&["email_branding", "footer_text"], json!("a\rb")),
            "must not contain control characters"
        );
        let err = corrupt(&["email_branding", "reply_to"], json!("not-an-email")).unwrap_err();
        assert!(err.to_string().contains("reply_to"), "{err}");
        assert_eq!(
            refused(&["primary_color"], json!(null)),
            "invalid type: null, expected a string"
        );
        assert_eq!(
            refused(&["custom_login"], json!(null)),
            "invalid type: null, expected struct CustomLogin"
        );

        // The nullable fields may be null.
        let cleared = corrupt(&["logo_url"], json!(null)).unwrap();
        assert_eq!(cleared.logo_url, None);
    }

    #[test]
    fn applying_a_change_reports_what_changed() {
        let mut branding = Branding::default();
        let changed = branding.apply(BrandingChange {
            logo_url: Some(Some(AssetUrl::logo("https://acme.test/logo.png").unwrap())),
            primary_color: Some(HexColor::parse("#112233").unwrap()),
            // Same value as now: not a change.
            accent_color: Some(HexColor::parse("#0EA5E9").unwrap()),
            custom_login: CustomLoginChange {
                background_url: Some(Some(
                    AssetUrl::background("https://acme.test/bg.jpg").unwrap(),
                )),
                ..CustomLoginChange::default()
            },
            email_branding: EmailBrandingChange {
                reply_to: Some(Some(Email::parse("help@acme.test").unwrap())),
                footer_text: Some(FooterText::parse("Acme").unwrap()),
                ..EmailBrandingChange::default()
            },
            ..BrandingChange::default()
        });
        assert_eq!(
            changed,
            [
                "logo_url",
                "primary_color",
                "custom_login.background_url",
                "email_branding.reply_to",
                "email_branding.footer_text",
            ]
        );
        assert_eq!(branding.primary_color.as_str(), "#112233");
        assert_eq!(branding.accent_color.as_str(), "#0EA5E9");
        assert_eq!(
            branding.logo_url.as_ref().map(AssetUrl::as_str),
            Some("https://acme.test/logo.png")
        );
        // Untouched fields keep their values.
        assert_eq!(branding.custom_login.title.as_str(), "Sign in");
        assert_eq!(branding.email_branding.from_name.as_str(), "Gatehouse");
    }

    #[test]
    fn null_removes_and_absent_keeps() {
        let mut branding = full_branding();
        let changed = branding.apply(BrandingChange {
            logo_url: Some(None),
            custom_login: CustomLoginChange {
                background_url: Some(None),
                title: Some(LoginTitle::parse("Hello").unwrap()),
                ..CustomLoginChange::default()
            },
            email_branding: EmailBrandingChange {
                reply_to: Some(None),
                from_name: Some(SenderName::parse("Acme Support").unwrap()),
                ..EmailBrandingChange::default()
            },
            ..BrandingChange::default()
        });
        assert_eq!(
            changed,
            [
                "logo_url",
                "custom_login.title",
                "custom_login.background_url",
                "email_branding.from_name",
                "email_branding.reply_to",
            ]
        );
        assert_eq!(branding.logo_url, None);
        assert!(branding.favicon_url.is_some());
        assert_eq!(branding.custom_login.background_url, None);
        assert_eq!(branding.email_branding.reply_to, None);

        // Removing what is already absent changes nothing.
        let changed = branding.apply(BrandingChange {
            logo_url: Some(None),
            ..BrandingChange::default()
        });
        assert!(changed.is_empty());
    }

    #[test]
    fn a_no_op_change_changes_nothing() {
        let mut branding = full_branding();
        assert!(branding.apply(BrandingChange::default()).is_empty());
        let same = full_branding();
        let changed = branding.apply(BrandingChange {
            logo_url: Some(same.logo_url.clone()),
            favicon_url: Some(same.favicon_url.clone()),
            primary_color: Some(same.primary_color.clone()),
            accent_color: Some(same.accent_color.clone()),
            custom_login: CustomLoginChange {
                title: Some(same.custom_login.title.clone()),
                subtitle: Some(same.custom_login.subtitle.clone()),
                background_url: Some(same.custom_login.background_url.clone()),
            },
            email_branding: EmailBrandingChange {
                from_name: Some(same.email_branding.from_name.clone()),
                reply_to: Some(same.email_branding.reply_to.clone()),
                footer_text: Some(same.email_branding.footer_text.clone()),
            },
        });
        assert!(changed.is_empty(), "{changed:?}");
        assert_eq!(branding, same);
    }
}
