//! The forms several pages answer with, each with a fresh anti-forgery token and its cookie:
//! the login form and the second step of a sign-in.

use actix_web::{http::StatusCode, HttpResponse};
use gatehouse_domain::{model::Branding, service::SecondFactorNeeded};

use super::{
    branding::branding_for,
    csrf,
    errors::Refusal,
    layout::{login_page, mfa_page, LoginForm, MfaForm},
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
    branded_form_page(state, status, return_to, |look, csrf_token| {
        let form = LoginForm {
            email,
            error,
            csrf_token,
            return_to,
        };
        login_page(look, &form)
    })
    .await
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
    branded_form_page(state, status, return_to, |look, csrf_token| {
        let form = MfaForm {
            mfa_token,
            error,
            csrf_token,
            return_to,
            webauthn_options,
        };
        mfa_page(look, &form)
    })
    .await
}

/// A form of a sign-in going on to `return_to`, in the look of the application it signs in to
/// ([`branding_for`]): `render` draws it in that look with the anti-forgery token.
async fn branded_form_page(
    state: &AppState,
    status: StatusCode,
    return_to: &str,
    render: impl FnOnce(&Branding, &str) -> String,
) -> HttpResponse {
    let look = branding_for(state, return_to).await;
    csrf::form_page(state, status, |csrf_token| render(&look, csrf_token))
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
