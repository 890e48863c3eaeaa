//! The mail-based account flows: `/api/v1/auth/magic-link`, `/password/forgot`,
//! `/password/reset`, `/email/verify-request`, `/email/verify`, and the pages the mailed links
//! open (`/magic-link/{token}`, `/reset-password/{token}`, `/verify-email/{token}`). A page
//! opened by the link asks for one more click (or the new password): mail scanners that open
//! links do not spend them.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::service::LinkError;
use serde::Deserialize;
use utoipa::ToSchema;

use gatehouse_domain::ports::SignInMethod;

use super::auth::organization_field;
use super::not_stored;
use crate::extract::{origin_of, RequestOrigin};
use crate::observe;
use crate::{
    error::{ApiError, ErrorBody, FieldError, SsoRequiredBody, ValidationErrorBody},
    extract::{as_is, client_address, Authenticated, Fields, ValidJson},
    routes::auth::LoginResponse,
    state::AppState,
};

impl From<LinkError> for ApiError {
    fn from(error: LinkError) -> Self {
        match error {
            LinkError::RateLimited(locked) | LinkError::LockedOut(locked) => {
                Self::LockedOut(locked)
            }
            LinkError::InvalidToken => {
                Self::field(FieldError::invalid("body", "token", error.to_string()))
            }
            LinkError::WeakPassword(_) | LinkError::Reused(_) => Self::field(FieldError::invalid(
                "body",
                "new_password",
                error.to_string(),
            )),
            LinkError::SsoRequired(sso_url) => Self::SsoRequired(sso_url),
            LinkError::NotAdmitted(refused) => refused.into(),
            LinkError::Store(e) => e.into(),
            LinkError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

/// The body of `POST /api/v1/auth/magic-link` and `POST /api/v1/auth/password/forgot`: the
/// `email` to mail the link to (required).
#[derive(Deserialize, ToSchema)]
pub struct EmailRequest {
    #[schema(example = "ada@example.com")]
    email: Option<String>,
}

fn accepted() -> HttpResponse {
    HttpResponse::Accepted().finish()
}

/// Mails a sign-in link (15 minutes, once) to the address, if it has an account. The answer is
/// the same either way.
#[utoipa::path(
    post, path = "/api/v1/auth/magic-link", tag = "auth",
    request_body = EmailRequest,
    responses(
        (status = 202, description = "Mailed, if the address has an account"),
        (status = 403, body = SsoRequiredBody, description = "The address signs in with its organization's single sign-on"),
        (status = 422, body = ValidationErrorBody),
        (status = 429, body = ErrorBody, description = "Asked too often for this address or from this client"),
    )
)]
pub async fn request_magic_link(
    req: HttpRequest,
    state: web::Data<AppState>,
    ValidJson(body): ValidJson<EmailRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, as_is);
    let email = fields.finish(|| email)?;
    state
        .links
        .request_magic_link(&email, client_address(&req), &origin_of(&req))
        .await?;
    Ok(accepted())
}

/// The body of `POST /api/v1/auth/email/verify`: the `token` of the mailed link (required).
#[derive(Deserialize, ToSchema)]
pub struct TokenRequest {
    /// The token of the mailed link (the last part of its path).
    token: Option<String>,
}

/// The body of `POST /api/v1/auth/magic-link/verify`: the mailed link's `token` (required),
/// and optionally the organization the tokens are to speak for.
#[derive(Deserialize, ToSchema)]
pub struct MagicLinkVerifyRequest {
    /// The token of the mailed link (the last part of its path).
    token: Option<String>,
    /// The organization the tokens are to speak for, as at `POST /auth/login`.
    #[schema(format = "uuid")]
    organization_id: Option<String>,
}

/// Signs in with a mailed link's token: the token response, or the second step of a user with
/// MFA, as `POST /auth/login` answers.
#[utoipa::path(
    post, path = "/api/v1/auth/magic-link/verify", tag = "auth",
    request_body = MagicLinkVerifyRequest,
    responses(
        (status = 200, body = LoginResponse),
        (status = 403, body = ErrorBody, description = "The address signs in with its organization's single sign-on (`sso_url` says where); or the organization named does not admit the user (the detail says why; `sso_url` where its single sign-on is the way in)"),
        (status = 422, body = ValidationErrorBody, description = "The token is invalid, expired or used"),
        (status = 429, body = ErrorBody, description = "The account is locked after failed sign-ins"),
    )
)]
pub async fn verify_magic_link(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<MagicLinkVerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let token = fields.required("token", body.token, as_is);
    let organization = organization_field(&mut fields, body.organization_id);
    let (token, organization) = fields.finish(|| Some((token?, organization?)))?;
    let signed_in = state
        .links
        .sign_in_with_link(&token, organization, &origin)
        .await;
    observe::sign_in(&state, SignInMethod::MailedLink, &signed_in);
    let signed_in = signed_in?;
    Ok(not_stored(HttpResponse::Ok()).json(LoginResponse::of(signed_in)))
}

/// Mails a password-reset link (15 minutes, once) to the address, if it has an account. The
/// answer is the same either way.
#[utoipa::path(
    post, path = "/api/v1/auth/password/forgot", tag = "auth",
    request_body = EmailRequest,
    responses(
        (status = 202, description = "Mailed, if the address has an account"),
        (status = 403, body = SsoRequiredBody, description = "The address signs in with its organization's single sign-on"),
        (status = 422, body = ValidationErrorBody),
        (status = 429, body = ErrorBody, description = "Asked too often for this address or from this client"),
    )
)]
pub async fn forgot_password(
    req: HttpRequest,
    state: web::Data<AppState>,
    ValidJson(body): ValidJson<EmailRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, as_is);
    let email = fields.finish(|| email)?;
    state
        .links
        .request_password_reset(&email, client_address(&req), &origin_of(&req))
        .await?;
    Ok(accepted())
}

/// The body of `POST /api/v1/auth/password/reset`: the mailed reset link's `token` and the
/// `new_password`, both required.
#[derive(Deserialize, ToSchema)]
pub struct ResetRequest {
    token: Option<String>,
    new_password: Option<String>,
}

/// Sets a new password with a mailed reset link's token; every session of the user ends.
#[utoipa::path(
    post, path = "/api/v1/auth/password/reset", tag = "auth",
    request_body = ResetRequest,
    responses(
        (status = 204, description = "Password changed; every session ended"),
        (status = 422, body = ValidationErrorBody, description = "The token is invalid, expired or used, or the password is weak"),
    )
)]
pub async fn reset_password(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<ResetRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let token = fields.required("token", body.token, as_is);
    let new_password = fields.required("new_password", body.new_password, as_is);
    let (token, new_password) = fields.finish(|| Some((token?, new_password?)))?;
    state
        .links
        .reset_password(&token, &new_password, &origin)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Mails the caller a link that verifies their address (24 hours, once).
#[utoipa::path(
    post, path = "/api/v1/auth/email/verify-request", tag = "auth",
    security(("bearer" = [])),
    responses(
        (status = 202, description = "Mailed"),
        (status = 401, body = ErrorBody),
        (status = 429, body = ErrorBody, description = "Asked too often"),
    )
)]
pub async fn request_verification(
    req: HttpRequest,
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    state
        .links
        .request_verification(&principal, client_address(&req), &origin_of(&req))
        .await?;
    Ok(accepted())
}

/// Verifies the address with a mailed link's token: the user's `email_verified` becomes true.
#[utoipa::path(
    post, path = "/api/v1/auth/email/verify", tag = "auth",
    request_body = TokenRequest,
    responses(
        (status = 204, description = "Verified"),
        (status = 422, body = ValidationErrorBody, description = "The token is invalid, expired or used"),
    )
)]
pub async fn verify_email(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<TokenRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let token = fields.required("token", body.token, as_is);
    let token = fields.finish(|| token)?;
    state.links.verify_email(&token, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}
