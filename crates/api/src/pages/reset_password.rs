//! The page a mailed password-reset link opens, `/reset-password/{token}`: the new password.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::{model::Branding, service::LinkError};

use super::{csrf, errors::link_refused, forms::LinkForm, response::message};
use crate::{extract::origin_of, state::AppState};

/// `GET /reset-password/{token}`: the new-password form.
pub async fn page(state: web::Data<AppState>, path: web::Path<String>) -> HttpResponse {
    LinkForm::ResetPassword.show(&state, StatusCode::OK, &path, None)
}

/// `POST /reset-password/{token}`: sets the new password.
pub async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    form: csrf::Form,
) -> HttpResponse {
    let new_password = form.field("new_password");
    match state
        .links
        .reset_password(&path, new_password, &origin_of(&req))
        .await
    {
        Ok(()) => message(
            &Branding::default(),
            StatusCode::OK,
            "Your password was changed",
            "You were signed out everywhere. Sign in with the new password.",
        ),
        // Refused before the link was spent: the form again.
        Err(error @ LinkError::WeakPassword(_)) => {
            let text = format!("The {error}.");
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            LinkForm::ResetPassword.show(&state, status, &path, Some(&text))
        }
        Err(error) => link_refused(error, "a password reset"),
    }
}
