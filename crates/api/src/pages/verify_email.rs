//! The page a mailed verification link opens, `/verify-email/{token}`: one button that
//! verifies the address.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::model::Branding;

use super::{csrf, errors::link_refused, forms::LinkForm, response::message};
use crate::{extract::origin_of, state::AppState};

/// `GET /verify-email/{token}`: a page with one button that verifies the address.
pub async fn page(state: web::Data<AppState>, path: web::Path<String>) -> HttpResponse {
    LinkForm::VerifyEmail.show(&state, StatusCode::OK, &path, None)
}

/// `POST /verify-email/{token}`: verifies the address.
pub async fn submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    _form: csrf::Form,
) -> HttpResponse {
    match state.links.verify_email(&path, &origin_of(&req)).await {
        Ok(()) => message(
            &Branding::default(),
            StatusCode::OK,
            "Your email address is verified",
            "Thank you. You can close this window.",
        ),
        Err(error) => link_refused(error, "an email verification"),
    }
}
