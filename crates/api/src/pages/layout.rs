//! The hosted pages' HTML: the login page and a plain message page, server-side from the
//! templates in `crates/api/templates/` (no JavaScript), in an organization's branding or the
//! default look. Every value put into a template is escaped here, by a maintained library.

use gatehouse_domain::model::Branding;

const PAGE: &str = include_str!("../../templates/page.html");
const LOGIN: &str = include_str!("../../templates/login.html");
const MESSAGE: &str = include_str!("../../templates/message.html");
const MFA: &str = include_str!("../../templates/mfa.html");
const TOKEN: &str = include_str!("../../templates/token.html");
const INVITATION: &str = include_str!("../../templates/invitation.html");
const CONSENT: &str = include_str!("../../templates/consent.html");

/// Text made safe for HTML content and double-quoted attribute values (`&`, `<`, `>`, `"` and
/// `'` become character references), by the `html-escape` crate.
pub fn escape(raw: &str) -> String {
    html_escape::encode_quoted_attribute(raw).into_owned()
}

/// The template with each `{{name}}` replaced by its (already safe) value.
fn fill(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |page, (name, value)| {
            page.replace(&format!("{{{{{name}}}}}"), value)
        })
}

/// WCAG 2 relative luminance of a `#RRGGBB` color.
fn luminance(hex: &str) -> f64 {
    let channel = |i: usize| {
        let value = hex
            .get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .map_or(0.0, |v| f64::from(v) / 255.0);
        if value <= 0.039_28 {
            value / 12.92
        } else {
            ((value + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
}

/// The WCAG contrast ratio of two colors.
pub fn contrast(a: &str, b: &str) -> f64 {
    let (la, lb) = (luminance(a), luminance(b));
    (la.max(lb) + 0.05) / (la.min(lb) + 0.05)
}

/// The text color for a button of `background`: white or black, whichever contrasts more.
/// One of the two always reaches WCAG AA (4.5:1) on any color.
pub fn text_on(background: &str) -> &'static str {
    if contrast(background, "#FFFFFF") >= contrast(background, "#000000") {
        "#FFFFFF"
    } else {
        "#000000"
    }
}

/// A whole page around `content`.
fn page(look: &Branding, title: &str, content: String) -> String {
    let primary = look.primary_color.as_str();
    fill(
        PAGE,
        &[
            ("title", escape(title)),
            (
                "favicon",
                look.favicon_url.as_ref().map_or_else(String::new, |url| {
                    format!("<link rel=\"icon\" href=\"{}\">", escape(url.as_str()))
                }),
            ),
            ("primary", escape(primary)),
            ("on_primary", text_on(primary).to_owned()),
            ("accent", escape(look.accent_color.as_str())),
            (
                "background",
                look.custom_login
                    .background_url
                    .as_ref()
                    .map_or_else(String::new, |url| {
                        format!("url(\"{}\")", escape(url.as_str()))
                    }),
            ),
            ("content", content),
        ],
    )
}

fn logo(look: &Branding) -> String {
    look.logo_url.as_ref().map_or_else(String::new, |url| {
        format!(
            "<img class=\"logo\" src=\"{}\" alt=\"\">",
            escape(url.as_str())
        )
    })
}

/// What the login form shows.
pub struct LoginForm<'a> {
    /// As the person typed it (kept after an error); never the password.
    pub email: &'a str,
    /// The error to announce above the form (wrong credentials, say); `None` on a fresh form.
    pub error: Option<&'a str>,
    /// The anti-forgery token, posted back in a hidden field.
    pub csrf_token: &'a str,
    /// The path of this service to go to after signing in, posted back in a hidden field.
    pub return_to: &'a str,
}

/// The announced error of a form, and the attributes that tie its fields to it.
fn form_error(error: Option<&str>) -> (String, String) {
    match error {
        Some(message) => (
            format!(
                "<p id=\"form-error\" class=\"error\" role=\"alert\">{}</p>",
                escape(message)
            ),
            " aria-describedby=\"form-error\" aria-invalid=\"true\"".to_owned(),
        ),
        None => (String::new(), String::new()),
    }
}

/// The hosted login page (email and password), in `look`'s branding: its sign-in title as the
/// heading, its subtitle and logo.
pub fn login_page(look: &Branding, form: &LoginForm<'_>) -> String {
    let title = look.custom_login.title.as_str();
    let (error, described_by) = form_error(form.error);
    let content = fill(
        LOGIN,
        &[
            ("logo", logo(look)),
            ("heading", escape(title)),
            ("subtitle", escape(look.custom_login.subtitle.as_str())),
            ("csrf_token", escape(form.csrf_token)),
            ("return_to", escape(form.return_to)),
            ("email", escape(form.email)),
            ("described_by", described_by),
            ("error", error),
        ],
    );
    page(look, title, content)
}

/// What the second step's form shows.
pub struct MfaForm<'a> {
    /// The token that names this sign-in at its second step, posted back in a hidden field.
    pub mfa_token: &'a str,
    /// The error to announce above the form (a wrong code, say); `None` on a fresh form.
    pub error: Option<&'a str>,
    /// The anti-forgery token, posted back in a hidden field.
    pub csrf_token: &'a str,
    /// The path of this service to go to after signing in, posted back in a hidden field.
    pub return_to: &'a str,
    /// The WebAuthn request options for the user's security keys, when they have any: a
    /// button asks the browser for one (the page's one script, `/assets/webauthn.js`).
    pub webauthn_options: Option<&'a serde_json::Value>,
}

/// The second step of a sign-in on the hosted pages, in the same branding.
pub fn mfa_page(look: &Branding, form: &MfaForm<'_>) -> String {
    let (error, described_by) = form_error(form.error);
    let heading = "Two-step verification";
    let (subtitle, security_key) = match form.webauthn_options {
        Some(options) => (
            "Use your security key, or enter a code from your authenticator app or a recovery code.",
            format!(
                "<button type=\"button\" id=\"use-security-key\" data-options=\"{}\" hidden>Use a security key</button>\n  \
                 <p id=\"security-key-status\" role=\"status\"></p>\n  \
                 <script src=\"/assets/webauthn.js\" defer></script>",
                escape(&options.to_string())
            ),
        ),
        None => (
            "Enter the code from your authenticator app, or one of your recovery codes.",
            String::new(),
        ),
    };
    let content = fill(
        MFA,
        &[
            ("logo", logo(look)),
            ("heading", escape(heading)),
            ("subtitle", escape(subtitle)),
            ("security_key", security_key),
            ("csrf_token", escape(form.csrf_token)),
            ("return_to", escape(form.return_to)),
            ("mfa_token", escape(form.mfa_token)),
            ("described_by", described_by),
            ("error", error),
        ],
    );
    page(look, heading, content)
}

/// What a mailed link's page shows: one button, and for a reset the new password.
pub struct TokenForm<'a> {
    /// The page's heading and title.
    pub heading: &'a str,
    /// Where the form posts (already escaped).
    pub action: &'a str,
    /// The submit button's label.
    pub button: &'a str,
    /// Whether the form asks for a new password (a password reset).
    pub new_password: bool,
    /// The error to announce above the form; `None` on a fresh form.
    pub error: Option<&'a str>,
    /// The anti-forgery token, posted back in a hidden field.
    pub csrf_token: &'a str,
}

/// A labelled password field: `name` is its id and form name; a new password (`new-password`,
/// at least 8 characters) or the current one.
fn password_field(name: &str, label: &str, new: bool, described_by: &str) -> String {
    let (autocomplete, minlength) = if new {
        ("new-password", " minlength=\"8\"")
    } else {
        ("current-password", "")
    };
    format!(
        "<label for=\"{name}\">{label}</label>\n  \
         <input id=\"{name}\" name=\"{name}\" type=\"password\" \
         autocomplete=\"{autocomplete}\"{minlength} required{described_by}>"
    )
}

/// The page a mailed link opens: it asks for a click (or the new password) before the link is
/// spent, so that a mail scanner opening the link spends nothing.
pub fn token_page(look: &Branding, form: &TokenForm<'_>) -> String {
    let (error, described_by) = form_error(form.error);
    let password = if form.new_password {
        password_field("new_password", "New password", true, &described_by)
    } else {
        String::new()
    };
    let content = fill(
        TOKEN,
        &[
            ("logo", logo(look)),
            ("heading", escape(form.heading)),
            ("action", form.action.to_owned()),
            ("csrf_token", escape(form.csrf_token)),
            ("password", password),
            ("error", error),
            ("button", escape(form.button)),
        ],
    );
    page(look, form.heading, content)
}

/// What the invitee does on an invitation's page.
pub enum InvitationFields<'a> {
    /// Signed in with the invited address: one button accepts.
    Accept,
    /// The invited address has an account: its password signs in and accepts.
    SignIn,
    /// The invited address has no account: a name and a password create it and accept.
    Register {
        /// As typed (kept after an error); never the password.
        full_name: &'a str,
    },
}

/// What the page of a mailed invitation link shows.
pub struct InvitationForm<'a> {
    /// "Join Acme".
    pub heading: &'a str,
    /// Who invited which address to what, as which role.
    pub summary: &'a str,
    /// Where the form posts (already escaped).
    pub action: &'a str,
    /// The invited address, shown (read only) in the sign-in and registration forms.
    pub email: &'a str,
    /// Which form the invitee gets: accept, sign in and accept, or register and accept.
    pub step: InvitationFields<'a>,
    /// A line above the form (signed in with another account, say).
    pub note: Option<&'a str>,
    /// The error to announce above the form; `None` on a fresh form.
    pub error: Option<&'a str>,
    /// The anti-forgery token, posted back in a hidden field.
    pub csrf_token: &'a str,
}

/// The page a mailed invitation link opens, in the organization's branding: the invitation,
/// and the one form that accepts it (signing in or registering the invited address first).
/// Nothing is accepted before the invitee submits it.
pub fn invitation_page(look: &Branding, form: &InvitationForm<'_>) -> String {
    let (error, described_by) = form_error(form.error);
    // The address is the invitation's: shown, never sent (the server uses the invited one).
    let email = format!(
        "<label for=\"email\">Email</label>\n  \
         <input id=\"email\" type=\"email\" autocomplete=\"username\" value=\"{}\" readonly>",
        escape(form.email)
    );
    let (fields, button) = match &form.step {
        InvitationFields::Accept => (String::new(), "Accept the invitation"),
        InvitationFields::SignIn => (
            format!(
                "{email}\n  {}",
                password_field("password", "Password", false, &described_by)
            ),
            "Sign in and accept",
        ),
        InvitationFields::Register { full_name } => (
            format!(
                "{email}\n  <label for=\"full_name\">Full name</label>\n  \
                 <input id=\"full_name\" name=\"full_name\" type=\"text\" autocomplete=\"name\" \
                 required value=\"{}\"{described_by}>\n  {}",
                escape(full_name),
                password_field("password", "Choose a password", true, &described_by)
            ),
            "Create the account and accept",
        ),
    };
    let note = form.note.map_or_else(String::new, |note| {
        format!("<p class=\"note\" role=\"status\">{}</p>\n", escape(note))
    });
    let content = fill(
        INVITATION,
        &[
            ("logo", logo(look)),
            ("heading", escape(form.heading)),
            ("summary", escape(form.summary)),
            ("note", note),
            ("action", form.action.to_owned()),
            ("csrf_token", escape(form.csrf_token)),
            ("fields", fields),
            ("error", error),
            ("button", escape(button)),
        ],
    );
    page(look, form.heading, content)
}

/// What the consent page shows: the application, what it asks for, and the form's hidden
/// fields (the authorization request to answer is its `return_to`).
pub struct ConsentForm<'a> {
    /// The name of the application asking.
    pub application: &'a str,
    /// Each API scope asked for, with what it lets the application do.
    pub scopes: &'a [(&'a str, &'a str)],
    /// The anti-forgery token, posted back in a hidden field.
    pub csrf_token: &'a str,
    /// The authorization request being answered, posted back in a hidden field.
    pub return_to: &'a str,
}

/// The consent page: an application asks to act in the organization for the signed-in user,
/// with these API scopes; Allow or Deny.
pub fn consent_page(look: &Branding, form: &ConsentForm<'_>) -> String {
    let heading = format!("Allow {} to act for you?", form.application);
    let scopes: String = form
        .scopes
        .iter()
        .map(|(name, description)| {
            format!(
                "  <li>{} <code>{}</code></li>\n",
                escape(description),
                escape(name)
            )
        })
        .collect();
    let content = fill(
        CONSENT,
        &[
            ("logo", logo(look)),
            ("heading", escape(&heading)),
            (
                "subtitle",
                escape(&format!(
                    "{} asks to use your account in its organization, within your role, to:",
                    form.application
                )),
            ),
            ("scopes", scopes),
            ("csrf_token", escape(form.csrf_token)),
            ("return_to", escape(form.return_to)),
        ],
    );
    page(look, &heading, content)
}

/// A page with only a heading and a line of text, in `look`'s branding: what a page shows
/// when there is no form to fill (done, expired, not possible right now).
pub fn message_page(look: &Branding, heading: &str, message: &str) -> String {
    let content = fill(
        MESSAGE,
        &[
            ("logo", logo(look)),
            ("heading", escape(heading)),
            ("message", escape(message)),
        ],
    );
    page(look, heading, content)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use gatehouse_domain::model::{AssetUrl, HexColor, LoginSubtitle, LoginTitle};

    use super::*;

    fn form<'a>(email: &'a str, error: Option<&'a str>) -> LoginForm<'a> {
        LoginForm {
            email,
            error,
            csrf_token: "csrf_token-value",
            return_to: "/oauth/authorize?client_id=ghc_1&state=a&b",
        }
    }

    #[test]
    fn contrast_follows_wcag() {
        assert!((contrast("#FFFFFF", "#000000") - 21.0).abs() < 0.01);
        assert!((contrast("#FFFFFF", "#767676") - 4.54).abs() < 0.01);
        assert_eq!(text_on("#4F46E5"), "#FFFFFF");
        assert_eq!(text_on("#FDE047"), "#000000", "dark text on yellow");
        for color in [
            "#4F46E5", "#FDE047", "#0F766E", "#777777", "#000000", "#FFFFFF",
        ] {
            assert!(contrast(color, text_on(color)) >= 4.5, "{color}");
        }
    }

    #[test]
    fn the_default_look_has_labels_a_viewport_and_the_hidden_fields() {
        let html = login_page(&Branding::default(), &form("", None));
        assert!(html.contains("<meta name=\"viewport\""));
        assert!(html.contains("<html lang=\"en\">"));
        assert!(html.contains("<label for=\"email\">") && html.contains("id=\"email\""));
        assert!(html.contains("<label for=\"password\">") && html.contains("id=\"password\""));
        assert!(html.contains("name=\"csrf_token\" value=\"csrf_token-value\""));
        assert!(html.contains("value=\"/oauth/authorize?client_id=ghc_1&amp;state=a&amp;b\""));
        assert!(html.contains("<h1>Sign in</h1>"));
        assert!(
            html.contains("formaction=\"/login/sso\">Continue with SSO</button>"),
            "single sign-on is offered from the same form"
        );
        assert!(!html.contains("<script"));
        assert!(!html.contains("{{"), "every placeholder is filled");
    }

    #[test]
    fn an_error_is_announced_and_keeps_the_email_escaped_but_never_the_password() {
        let html = login_page(
            &Branding::default(),
            &form(
                "<script>alert(1)</script>@x.io",
                Some("The email or password is wrong."),
            ),
        );
        assert!(html.contains("role=\"alert\">The email or password is wrong.</p>"));
        assert!(html.contains("aria-describedby=\"form-error\""));
        assert!(html.contains("value=\"&lt;script&gt;alert(1)&lt;/script&gt;@x.io\""));
        assert!(!html.contains("<script>"));
        assert!(!html.contains(
            "name=\"password\" type=\"password\" autocomplete=\"current-password\" required value"
        ));
    }

    #[test]
    fn the_invitation_page_escapes_what_it_shows_and_labels_every_field() {
        let form = InvitationForm {
            heading: "Join <Acme>",
            summary: "Eve <script> invited you",
            action: "/invitations/ghi_1",
            email: "ann\"@example.com",
            step: InvitationFields::Register {
                full_name: "<b>Ann</b>",
            },
            note: Some("signed in as <someone>"),
            error: Some("The password is too short."),
            csrf_token: "csrf_token-value",
        };
        let html = invitation_page(&Branding::default(), &form);
        assert!(html.contains("<h1>Join &lt;Acme&gt;</h1>"));
        assert!(html.contains("Eve &lt;script&gt; invited you"));
        assert!(html.contains("value=\"ann&quot;@example.com\" readonly"));
        assert!(html.contains("value=\"&lt;b&gt;Ann&lt;/b&gt;\""));
        assert!(html.contains("role=\"status\">signed in as &lt;someone&gt;</p>"));
        assert!(html.contains("role=\"alert\">The password is too short.</p>"));
        for field in ["email", "full_name", "password"] {
            assert!(
                html.contains(&format!("<label for=\"{field}\">")),
                "{field}"
            );
        }
        assert!(html.contains("action=\"/invitations/ghi_1\""));
        assert!(!html.contains("<script") && !html.contains("{{"));

        let accept = InvitationForm {
            step: InvitationFields::Accept,
            note: None,
            error: None,
            ..form
        };
        let html = invitation_page(&Branding::default(), &accept);
        assert!(html.contains(">Accept the invitation</button>"));
        assert!(!html.contains("type=\"password\"") && !html.contains("id=\"email\""));
    }

    #[test]
    fn a_brand_shows_its_title_subtitle_colors_and_images() {
        let mut look = Branding::default();
        look.custom_login.title = LoginTitle::parse("Acme Login").unwrap();
        look.custom_login.subtitle = LoginSubtitle::parse("Use your Acme account").unwrap();
        look.primary_color = HexColor::parse("#0F766E").unwrap();
        look.logo_url = Some(AssetUrl::logo("https://cdn.example.com/logo.svg").unwrap());
        look.favicon_url = Some(AssetUrl::favicon("https://cdn.example.com/favicon.ico").unwrap());
        look.custom_login.background_url =
            Some(AssetUrl::background("https://cdn.example.com/bg.jpg").unwrap());
        let html = login_page(&look, &form("", None));
        assert!(html.contains("<title>Acme Login</title>"));
        assert!(html.contains("<h1>Acme Login</h1>"));
        assert!(html.contains("Use your Acme account"));
        assert!(html.contains("--primary: #0F766E; --on-primary: #FFFFFF;"));
        assert!(html.contains("src=\"https://cdn.example.com/logo.svg\""));
        assert!(html.contains("href=\"https://cdn.example.com/favicon.ico\""));
        assert!(html.contains("url(\"https://cdn.example.com/bg.jpg\")"));
    }
}
