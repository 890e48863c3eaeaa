//! The page a mailed sign-in link opens, `/magic-link/{token}`: one button that signs in
//! (mail scanners that open links do not spend them).

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::{ports::SignInMethod, service::SignIn};

use super::{csrf, errors::link_refused, forms, forms::LinkForm, session};
use crate::{extract::origin_of, observe, state::AppState};

/// `GET /magic-link/{token}`: a page with one button that signs in.
pub async fn page(state: web::Data<AppState>, path: web::Path<String>) -> HttpResponse {
    LinkForm::MagicLink.show(&state, StatusCode::OK, &path, None)
}

/// `POST /magic-link/{token}`: signs in (the session cookie), or asks for the second factor.
pub async fn sign_in(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: csrf::Form,
) -> HttpResponse {
    let signed_in = state
        .links
        .sign_in_with_link(&path, None, &origin_of(&req))
        .await;
    observe::sign_in(&state, SignInMethod::MailedLink, &signed_in);
    match signed_in {
        Ok(SignIn::Tokens(tokens)) => session::open(&state, &tokens.refresh_token, &form.return_to),
        Ok(SignIn::SecondFactor(needed)) => {
            forms::second_step_needed(&state, &form.return_to, &needed).await
        }
        Err(error) => link_refused(error, "signing in with a mailed link"),
    }
}
