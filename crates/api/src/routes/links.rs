//! The mail-based account flows: `/api/v1/auth/magic-link`, `/password/forgot`,
//! `/password/reset`, `/email/verify-request`, `/email/verify`, and the pages the mailed links
//! open (`/magic-link/{token}`, `/reset-password/{token}`, `/verify-email/{token}`). A page
//! opened by the link asks for one more click (or the new password): mail scanners that open
//! links do not spend them.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{Branding, TokenKind},
    service::{LinkError, SignIn},
};
use serde::Deserialize;
use utoipa::ToSchema;

use gatehouse_domain::ports::SignInMethod;

use super::auth::organization_field;
use crate::extract::{origin_of, RequestOrigin};
use crate::observe;
use crate::{
    error::{ApiError, ErrorBody, FieldError, SsoRequiredBody, ValidationErrorBody},
    extract::{as_is, client_address, Authenticated, Fields, ValidJson},
    pages::{escape, message_page, token_page, TokenForm},
    routes::{
        auth::LoginResponse,
        login::{checked_form, field, form_fields, html, open_page_session, with_csrf_cookie},
    },
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

#[derive(Deserialize, ToSchema)]
pub struct TokenRequest {
    /// The token of the mailed link (the last part of its path).
    token: Option<String>,
}

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
        (status = 403, body = SsoRequiredBody, description = "The address signs in with its organization's single sign-on; or the organization named does not admit the user (the detail says why)"),
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
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "no-store"))
        .json(LoginResponse::of(signed_in)))
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

// ---------------------------------------------------------------------------------------------
// The pages the mailed links open
// ---------------------------------------------------------------------------------------------

/// What each link's page says and asks.
#[derive(Clone, Copy)]
enum LinkPage {
    MagicLink,
    ResetPassword,
    VerifyEmail,
}

impl LinkPage {
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
}

async fn show(
    state: &AppState,
    status: StatusCode,
    page: LinkPage,
    token: &str,
    error: Option<&str>,
) -> HttpResponse {
    let csrf = state.ports.random.secret(TokenKind::Csrf);
    let body = token_page(
        &Branding::default(),
        &TokenForm {
            heading: page.heading(),
            action: &format!("{}{}", page.action(), escape(token)),
            button: page.button(),
            new_password: matches!(page, LinkPage::ResetPassword),
            error,
            csrf_token: csrf.expose(),
        },
    );
    with_csrf_cookie(state, html(status, body), &csrf)
}

fn message(status: StatusCode, heading: &str, text: &str) -> HttpResponse {
    html(status, message_page(&Branding::default(), heading, text))
}

fn expired() -> HttpResponse {
    message(
        StatusCode::GONE,
        "This link no longer works",
        "Links work once and only for a while. Ask for a new one.",
    )
}

fn link_error(error: LinkError, what: &str) -> HttpResponse {
    match error {
        LinkError::InvalidToken => expired(),
        LinkError::SsoRequired(_) => message(
            StatusCode::FORBIDDEN,
            "Sign in with single sign-on",
            "This account signs in through its organization's identity provider, not with a link \
             or a password.",
        ),
        LinkError::LockedOut(_) | LinkError::RateLimited(_) => message(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many attempts",
            "This account is locked for a while after failed sign-ins. Try again later.",
        ),
        error => {
            tracing::error!(%error, "{what} failed");
            message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Not possible right now",
                "Try again in a moment.",
            )
        }
    }
}

/// `GET /magic-link/{token}`: a page with one button that signs in.
pub async fn magic_link_page(state: web::Data<AppState>, path: web::Path<String>) -> HttpResponse {
    show(&state, StatusCode::OK, LinkPage::MagicLink, &path, None).await
}

/// `POST /magic-link/{token}`: signs in (the session cookie), or asks for the second factor.
pub async fn magic_link_sign_in(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let return_to = match checked_form(&req, &state, &body).await {
        Ok((_, return_to)) => return_to,
        Err(forged) => return forged,
    };
    let signed_in = state
        .links
        .sign_in_with_link(&path, None, &origin_of(&req))
        .await;
    observe::sign_in(&state, SignInMethod::MailedLink, &signed_in);
    match signed_in {
        Ok(SignIn::Tokens(tokens)) => open_page_session(&state, &tokens.refresh_token, &return_to),
        Ok(SignIn::SecondFactor(needed)) => {
            crate::routes::login::show_mfa(
                &state,
                StatusCode::OK,
                &return_to,
                needed.mfa_token.expose(),
                needed.webauthn_options.as_ref(),
                None,
            )
            .await
        }
        Err(error) => link_error(error, "signing in with a mailed link"),
    }
}

/// `GET /reset-password/{token}`: the new-password form.
pub async fn reset_page(state: web::Data<AppState>, path: web::Path<String>) -> HttpResponse {
    show(&state, StatusCode::OK, LinkPage::ResetPassword, &path, None).await
}

/// `POST /reset-password/{token}`: sets the new password.
pub async fn reset_submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    if let Err(forged) = checked_form(&req, &state, &body).await {
        return forged;
    }
    let fields = form_fields(&body);
    let new_password = field(&fields, "new_password");
    match state
        .links
        .reset_password(&path, new_password, &origin_of(&req))
        .await
    {
        Ok(()) => message(
            StatusCode::OK,
            "Your password was changed",
            "You were signed out everywhere. Sign in with the new password.",
        ),
        Err(error @ LinkError::WeakPassword(_)) => {
            // Refused before the link was spent: the form again.
            let reason = error.to_string();
            let text = format!("The {reason}.");
            show(
                &state,
                StatusCode::UNPROCESSABLE_ENTITY,
                LinkPage::ResetPassword,
                &path,
                Some(&text),
            )
            .await
        }
        Err(error @ LinkError::Reused(_)) => message(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Choose another password",
            &format!("The {error}. Ask for a new link and choose another one."),
        ),
        Err(error) => link_error(error, "a password reset"),
    }
}

/// `GET /verify-email/{token}`: a page with one button that verifies the address.
pub async fn verify_page(state: web::Data<AppState>, path: web::Path<String>) -> HttpResponse {
    show(&state, StatusCode::OK, LinkPage::VerifyEmail, &path, None).await
}

/// `POST /verify-email/{token}`: verifies the address.
pub async fn verify_submit(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    if let Err(forged) = checked_form(&req, &state, &body).await {
        return forged;
    }
    match state.links.verify_email(&path, &origin_of(&req)).await {
        Ok(()) => message(
            StatusCode::OK,
            "Your email address is verified",
            "Thank you. You can close this window.",
        ),
        Err(error) => link_error(error, "an email verification"),
    }
}
