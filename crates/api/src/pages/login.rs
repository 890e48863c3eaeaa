//! The login page: `GET /login` shows it (in the branding of the application an OAuth request
//! names), `POST /login` signs in with a session cookie, `POST /login/sso` goes to the
//! identity provider of the email's organization, `POST /logout` ends the session, and
//! `GET /login/done` is where a sign-in lands when nothing asked to go anywhere.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    ports::SignInMethod,
    service::{LoginError, SignIn},
};

use super::{
    branding::branding_for,
    csrf::{self, safe_return_to},
    errors::{PasswordForm, Refusal, SIGN_IN_UNAVAILABLE},
    forms,
    response::{message, see_other},
    session,
};
use crate::{
    extract::{origin_of, RequestOrigin},
    observe,
    state::AppState,
};

/// `GET /login?return_to=/oauth/authorize?...`
pub async fn page(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let return_to = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(name, _)| name == "return_to")
        .map(|(_, value)| value.into_owned());
    let return_to = safe_return_to(return_to.as_deref());
    forms::login(&state, StatusCode::OK, &return_to, "", None).await
}

/// `POST /login`: email, password, csrf_token, return_to.
pub async fn sign_in(
    RequestOrigin(origin): RequestOrigin,
    state: web::Data<AppState>,
    form: csrf::Form,
) -> HttpResponse {
    let return_to = &form.return_to;
    let email = form.field("email").trim();
    let password = form.field("password").to_owned();
    let signed_in = state.auth.login(email, password, None, &origin).await;
    observe::sign_in(&state, SignInMethod::Password, &signed_in);
    match signed_in {
        Ok(SignIn::Tokens(tokens)) => session::open(&state, &tokens.refresh_token, return_to),
        Ok(SignIn::SecondFactor(needed)) => {
            forms::second_step_needed(&state, return_to, &needed).await
        }
        // The address signs in with its organization's identity provider: there it goes, and
        // back to where this sign-in was going.
        Err(LoginError::SsoRequired(sso_url)) => see_other(&with_return_to(&sso_url, return_to)),
        Err(error) => match Refusal::of_sign_in(&error, PasswordForm::Login) {
            Some(refusal) => forms::login_refused(&state, return_to, email, &refusal).await,
            None => {
                tracing::error!(%error, "signing in on the login page failed");
                let status = StatusCode::SERVICE_UNAVAILABLE;
                forms::login(&state, status, return_to, email, Some(SIGN_IN_UNAVAILABLE)).await
            }
        },
    }
}

/// `url?return_to=<return_to>`: a sign-in that starts at `url` and comes back to `return_to`.
fn with_return_to(url: &str, return_to: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(return_to.as_bytes()).collect();
    format!("{url}?return_to={encoded}")
}

/// `POST /login/sso` (the login form's "Continue with SSO"): to the identity provider of the
/// email's organization (home realm discovery), or the form again saying there is none.
pub async fn sign_in_with_sso(state: web::Data<AppState>, form: csrf::Form) -> HttpResponse {
    let return_to = &form.return_to;
    let email = form.field("email").trim();
    let not_found = match state.saml.lookup(email).await {
        Ok(Some(found)) => return see_other(&with_return_to(&found.login_url, return_to)),
        Ok(None) => "Single sign-on is not set up for this email. Sign in with your password.",
        Err(error) => {
            tracing::error!(%error, "home realm discovery failed");
            "Single sign-on is not possible right now. Try again in a moment."
        }
    };
    forms::login(
        &state,
        StatusCode::NOT_FOUND,
        return_to,
        email,
        Some(not_found),
    )
    .await
}

/// `POST /logout`: ends the session of the cookie, forgets the cookie, back to the login page.
pub async fn sign_out(
    req: HttpRequest,
    state: web::Data<AppState>,
    _form: csrf::Form,
) -> HttpResponse {
    if let Some(signed_in) = session::signed_in(&req, &state).await {
        if let Err(error) = state
            .auth
            .logout(&signed_in.principal(), &origin_of(&req))
            .await
        {
            tracing::warn!(%error, "ending the page's session failed");
        }
    }
    session::forgotten(&state, see_other("/login"))
}

/// `GET /login/done`: where a sign-in lands when nothing asked to go anywhere.
pub async fn done(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    if session::signed_in(&req, &state).await.is_none() {
        return see_other("/login");
    }
    message(
        &branding_for(&state, "/").await,
        StatusCode::OK,
        "You are signed in",
        "You can close this window, or go back to the application you came from.",
    )
}
