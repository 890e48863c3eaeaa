//! The forms several pages answer with, each with a fresh anti-forgery token and its cookie:
//! the login form, the second step of a sign-in, a mailed link's form.

use actix_web::{http::StatusCode, HttpResponse};
use gatehouse_domain::{model::Branding, service::SecondFactorNeeded};

use super::{
    branding::branding_for,
    csrf,
    errors::Refusal,
    layout::{escape, login_page, mfa_page, token_page, LoginForm, MfaForm, TokenForm},
};
use crate::state::AppState;

/// The login form, going on to `return_to` once signed in.
pub async fn login(
    state: &AppState,
    status: StatusCode,
    return_to: &str,
    email: &str,
    error: Option<&str>,
) -> HttpResponse {
    let look = branding_for(state, return_to).await;
    csrf::form_page(state, status, |csrf_token| {
        let form = LoginForm {
            email,
            error,
            csrf_token,
            return_to,
        };
        login_page(&look, &form)
    })
}

/// The login form again after a refused sign-in, with the refusal's status, words and
/// `Retry-After`.
pub async fn login_refused(
    state: &AppState,
    return_to: &str,
    email: &str,
    refusal: &Refusal,
) -> HttpResponse {
    let page = login(state, refusal.status, return_to, email, Some(&refusal.text)).await;
    refusal.with_retry_after(page)
}

/// The second step of a sign-in (an authenticator code, a recovery code or a security key),
/// posting to `/login/mfa` and going on to `return_to`.
pub async fn second_step(
    state: &AppState,
    status: StatusCode,
    return_to: &str,
    mfa_token: &str,
    webauthn_options: Option<&serde_json::Value>,
    error: Option<&str>,
) -> HttpResponse {
    let look = branding_for(state, return_to).await;
    csrf::form_page(state, status, |csrf_token| {
        let form = MfaForm {
            mfa_token,
            error,
            csrf_token,
            return_to,
            webauthn_options,
        };
        mfa_page(&look, &form)
    })
}

/// The second step a right password (or a link) asked for.
pub async fn second_step_needed(
    state: &AppState,
    return_to: &str,
    needed: &SecondFactorNeeded,
) -> HttpResponse {
    second_step(
        state,
        StatusCode::OK,
        return_to,
        needed.mfa_token.expose(),
        needed.webauthn_options.as_ref(),
        None,
    )
    .await
}

/// What a mailed link's page says and asks.
#[derive(Clone, Copy)]
pub enum LinkForm {
    /// `/magic-link/{token}`: one button that signs in.
    MagicLink,
    /// `/reset-password/{token}`: the new password.
    ResetPassword,
    /// `/verify-email/{token}`: one button that verifies the address.
    VerifyEmail,
}

impl LinkForm {
    fn action(self) -> &'static str {
        match self {
            Self::MagicLink => "/magic-link/",
            Self::ResetPassword => "/reset-password/",
            Self::VerifyEmail => "/verify-email/",
        }
    }

    fn heading(self) -> &'static str {
        match self {
            Self::MagicLink => "Sign in",
            Self::ResetPassword => "Choose a new password",
            Self::VerifyEmail => "Verify your email address",
        }
    }

    fn button(self) -> &'static str {
        match self {
            Self::MagicLink => "Sign in",
            Self::ResetPassword => "Set the new password",
            Self::VerifyEmail => "Verify",
        }
    }

    /// The form of the link with this token.
    pub fn show(
        self,
        state: &AppState,
        status: StatusCode,
        token: &str,
        error: Option<&str>,
    ) -> HttpResponse {
        let action = format!("{}{}", self.action(), escape(token));
        csrf::form_page(state, status, |csrf_token| {
            let form = TokenForm {
                heading: self.heading(),
                action: &action,
                button: self.button(),
                new_password: matches!(self, Self::ResetPassword),
                error,
                csrf_token,
            };
            token_page(&Branding::default(), &form)
        })
    }
}
