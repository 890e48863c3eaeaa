//! The one place where the pages turn an outcome of the domain into a status and words (the
//! JSON API's counterpart is [`crate::error`]). A page asks here; it writes no status of a
//! refusal itself.

use actix_web::{
    http::{header, StatusCode},
    HttpResponse,
};
use gatehouse_domain::{
    model::Branding,
    service::{LinkError, LockedOut, LoginError, NotAdmitted, VerifyError},
};

use super::response::message;

/// The words under a form when a sign-in failed for a reason of ours, not the person's.
pub const SIGN_IN_UNAVAILABLE: &str =
    "Signing in is not possible right now. Try again in a moment.";

/// The one "not possible right now" page: something the page needs (the store, an adapter)
/// failed. The cause goes to the log where it happened; the page says nothing of it.
pub fn unavailable(look: &Branding) -> HttpResponse {
    message(
        look,
        StatusCode::SERVICE_UNAVAILABLE,
        "Not possible right now",
        "Try again in a moment.",
    )
}

/// What a locked account is told: the wait in whole minutes, rounded up.
pub fn lockout(locked: &LockedOut) -> String {
    let minutes = (locked.seconds() + 59) / 60;
    format!(
        "Too many failed sign-ins for this account. Try again in {minutes} minute{}.",
        if minutes == 1 { "" } else { "s" }
    )
}

/// The page saying a posted form expired (its anti-forgery token did not match): `403`.
pub fn forged(look: &Branding) -> HttpResponse {
    message(
        look,
        StatusCode::FORBIDDEN,
        "This form has expired",
        "Go back, reload the page and try again.",
    )
}

/// The page for a link into the sign-in (an authorization request, a SAML start) that is not
/// valid: `400`, the reason in `text`.
pub fn invalid_sign_in_link(text: &str) -> HttpResponse {
    message(
        &Branding::default(),
        StatusCode::BAD_REQUEST,
        "This sign-in link is not valid",
        text,
    )
}

/// The form a password was typed into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PasswordForm {
    /// The login page: the person typed the email too.
    Login,
    /// An invitation's page: the email is the invitation's, shown.
    Invitation,
}

/// A refused sign-in, as the form that was posted shows it again.
pub struct Refusal {
    /// The answer's status.
    pub status: StatusCode,
    /// The words under the form.
    pub text: String,
    /// `Retry-After`, in seconds, for a locked account.
    pub retry_after: Option<i64>,
}

impl Refusal {
    fn new(status: StatusCode, text: impl Into<String>) -> Self {
        Self {
            status,
            text: text.into(),
            retry_after: None,
        }
    }

    fn locked(locked: &LockedOut) -> Self {
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            text: lockout(locked),
            retry_after: Some(locked.seconds()),
        }
    }

    /// A password sign-in's refusal on `form`; `None` for a failure of ours (the form says
    /// [`SIGN_IN_UNAVAILABLE`] with `503`, its cause logged by the caller). On the login form
    /// the words are the same whether the email exists or not. (`SsoRequired` is a redirect,
    /// the caller's.)
    pub fn of_sign_in(error: &LoginError, form: PasswordForm) -> Option<Self> {
        let (status, text) = match (error, form) {
            (LoginError::InvalidCredentials, PasswordForm::Login) => {
                (StatusCode::UNAUTHORIZED, "The email or password is wrong.")
            }
            (LoginError::InvalidCredentials, PasswordForm::Invitation) => {
                (StatusCode::UNAUTHORIZED, "The password is wrong.")
            }
            (LoginError::LockedOut(locked), _) => return Some(Self::locked(locked)),
            (LoginError::PasswordExpired, PasswordForm::Login) => (
                StatusCode::FORBIDDEN,
                "Your password has expired: renew it, then sign in again.",
            ),
            (LoginError::PasswordExpired, PasswordForm::Invitation) => (
                StatusCode::FORBIDDEN,
                "Your password has expired: renew it, then open the link again.",
            ),
            _ => return None,
        };
        Some(Self::new(status, text))
    }

    /// A second factor's refusal; `None` for a failure of ours. `InvalidToken` sends the
    /// person back to the first step.
    pub fn of_second_factor(error: &VerifyError) -> Option<Self> {
        match error {
            VerifyError::WrongFactor => Some(Self::new(
                StatusCode::UNAUTHORIZED,
                "That code is not valid. Try the current one.",
            )),
            VerifyError::InvalidToken => Some(Self::new(
                StatusCode::UNAUTHORIZED,
                "Your sign-in took too long or had too many wrong codes. Sign in again.",
            )),
            VerifyError::LockedOut(locked) => Some(Self::locked(locked)),
            _ => None,
        }
    }

    /// `response` with this refusal's `Retry-After`, if it has one.
    pub fn with_retry_after(&self, mut response: HttpResponse) -> HttpResponse {
        if let Some(seconds) = self.retry_after {
            if let Ok(value) = header::HeaderValue::from_str(&seconds.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
        }
        response
    }
}

/// The page of a mailed link's refusal; a failure of ours is logged here, as `what` failing.
pub fn link_refused(error: LinkError, what: &str) -> HttpResponse {
    let look = Branding::default();
    match error {
        LinkError::InvalidToken => message(
            &look,
            StatusCode::GONE,
            "This link no longer works",
            "Links work once and only for a while. Ask for a new one.",
        ),
        LinkError::SsoRequired(_) => message(
            &look,
            StatusCode::FORBIDDEN,
            "Sign in with single sign-on",
            "This account signs in through its organization's identity provider, not with a link \
             or a password.",
        ),
        LinkError::LockedOut(locked) | LinkError::RateLimited(locked) => message(
            &look,
            StatusCode::TOO_MANY_REQUESTS,
            "Too many attempts",
            &lockout(&locked),
        ),
        // (A weak password never comes here: the reset page shows its form again for it.)
        LinkError::Reused(_) => message(
            &look,
            StatusCode::UNPROCESSABLE_ENTITY,
            "Choose another password",
            &format!("The {error}. Ask for a new link and choose another one."),
        ),
        error => {
            tracing::error!(%error, "{what} failed");
            unavailable(&look)
        }
    }
}

/// The page of an organization that does not admit an OAuth sign-in: `403`, saying which of
/// its rules refused it.
pub fn not_admitted(look: &Branding, application: &str, reason: NotAdmitted) -> HttpResponse {
    let text = match reason {
        NotAdmitted::SecondFactorNeeded => format!(
            "The organization behind {application} requires multi-factor authentication. Set up \
             an authenticator app or a security key for your account, then sign in again."
        ),
        NotAdmitted::AddressNotAllowed => format!(
            "The organization behind {application} does not allow sign-ins from your network \
             address."
        ),
    };
    message(
        look,
        StatusCode::FORBIDDEN,
        "The organization does not admit this sign-in",
        &text,
    )
}
