//! SAML single sign-on in the browser: `GET /sso/saml/{id}/login` sends the browser to the
//! organization's identity provider, `POST /sso/saml/{id}/acs` takes its signed answer and signs
//! the person in with the hosted pages' session cookie; and home realm discovery,
//! `POST /api/v1/sso/lookup` (also behind the login page's "Continue with SSO").

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use gatehouse_domain::{
    model::{Branding, OrganizationId, ReturnPath},
    service::{SamlSignInError, SsoLookup},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use gatehouse_domain::ports::SignInMethod;

use crate::extract::RequestOrigin;
use crate::observe;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{as_is, Fields, ValidJson},
    pages::message_page,
    routes::login::{html, look_for, open_page_session},
    state::AppState,
};

/// The most the assertion consumer reads of a posted form: the adapter takes a `SAMLResponse`
/// of up to 512 KiB of base64, which form encoding can make up to three times longer.
pub const ACS_MAX_BODY_BYTES: usize = 1536 * 1024;

fn page(status: StatusCode, heading: &str, message: &str) -> HttpResponse {
    html(status, message_page(&Branding::default(), heading, message))
}

fn organization_in(path: &str) -> Option<OrganizationId> {
    Uuid::parse_str(path).ok().map(OrganizationId::from_uuid)
}

fn not_configured() -> HttpResponse {
    page(
        StatusCode::NOT_FOUND,
        "Single sign-on is not available",
        "This organization has no active single sign-on. Sign in with your password instead.",
    )
}

fn unavailable() -> HttpResponse {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Single sign-on is not possible right now",
        "Try again in a moment.",
    )
}

/// `GET /sso/saml/{id}/login?return_to=/path`: a new `AuthnRequest`, and the browser on its way
/// to the identity provider.
#[utoipa::path(
    get, path = "/sso/saml/{org_id}/login", tag = "sso", operation_id = "saml_login",
    params(
        ("org_id" = Uuid, Path),
        ("return_to" = Option<String>, Query, description = "A path of this service to come back to (such as a pending `/oauth/authorize?...`); `/login/done` when absent"),
    ),
    responses(
        (status = 302, description = "To the identity provider's single sign-on URL with a deflated `SAMLRequest` (HTTP-Redirect binding) and `RelayState`"),
        (status = 400, content_type = "text/html", body = String, description = "`return_to` is not a path of this service"),
        (status = 404, content_type = "text/html", body = String, description = "No active configuration on a plan with SSO"),
        (status = 503, content_type = "text/html", body = String),
    )
)]
pub async fn login(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> HttpResponse {
    let Some(organization) = organization_in(&path) else {
        return not_configured();
    };
    let return_to = url::form_urlencoded::parse(req.query_string().as_bytes())
        .find(|(name, _)| name == "return_to")
        .map(|(_, value)| value.into_owned());
    let return_to = match return_to.as_deref().map(ReturnPath::parse) {
        None => ReturnPath::done(),
        Some(Ok(path)) => path,
        Some(Err(_)) => {
            return page(
                StatusCode::BAD_REQUEST,
                "This sign-in link is not valid",
                "After signing in you can only be sent to a page of this service.",
            )
        }
    };
    match state.saml.begin(organization, return_to).await {
        Ok(location) => HttpResponse::Found()
            .insert_header((header::LOCATION, location))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish(),
        Err(SamlSignInError::NotConfigured) => not_configured(),
        Err(error) => {
            tracing::error!(%error, org.id = %organization, "starting a SAML sign-in failed");
            unavailable()
        }
    }
}

/// The form the identity provider's page posts (HTTP-POST binding).
#[derive(Deserialize, ToSchema)]
#[allow(non_snake_case, dead_code)]
pub struct AcsForm {
    /// The base64 `Response`.
    SAMLResponse: String,
    /// Echoed from the request; the request's own `return_to` is what counts.
    RelayState: Option<String>,
}

/// `POST /sso/saml/{id}/acs` (form fields `SAMLResponse`, `RelayState`): the identity provider's
/// answer. Success sets the session cookie and sends the browser where the request said;
/// every refusal is the same `403` page, its reason in the log.
#[utoipa::path(
    post, path = "/sso/saml/{org_id}/acs", tag = "sso", operation_id = "saml_acs",
    params(("org_id" = Uuid, Path)),
    request_body(content = AcsForm, content_type = "application/x-www-form-urlencoded"),
    responses(
        (status = 303, description = "Signed in: the session cookie is set, and the browser goes to the request's `return_to`"),
        (status = 403, content_type = "text/html", body = String, description = "Refused (signature, issuer, audience, time, request, replay, domain, provisioning, configuration); nothing is set"),
        (status = 503, content_type = "text/html", body = String),
    )
)]
pub async fn acs(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    path: web::Path<String>,
    body: web::Bytes,
) -> HttpResponse {
    let refused = || {
        page(
            StatusCode::FORBIDDEN,
            "Single sign-on was refused",
            "Your identity provider's answer could not be accepted. Start again from the \
             sign-in page, or ask your administrator.",
        )
    };
    let Some(organization) = organization_in(&path) else {
        return refused();
    };
    let response = url::form_urlencoded::parse(&body)
        .find(|(name, _)| name == "SAMLResponse")
        .map(|(_, value)| value.into_owned());
    let Some(response) = response else {
        tracing::warn!(org.id = %organization, "SAML response refused: no SAMLResponse field");
        return refused();
    };
    let signed_in = state.saml.sign_in(organization, &response, &origin).await;
    observe::sign_in(&state, SignInMethod::Saml, &signed_in);
    match signed_in {
        Ok(signed_in) => {
            tracing::info!(
                org.id = %organization,
                user.id = %signed_in.user_id,
                provisioned = signed_in.provisioned,
                "signed in through SAML"
            );
            open_page_session(
                &state,
                &signed_in.tokens.refresh_token,
                signed_in.return_to.as_str(),
            )
        }
        Err(SamlSignInError::Store(error)) => {
            tracing::error!(%error, org.id = %organization, "a SAML sign-in could not be stored");
            unavailable()
        }
        Err(SamlSignInError::Internal(error)) => {
            tracing::error!(%error, org.id = %organization, "a SAML sign-in failed");
            unavailable()
        }
        Err(reason) => {
            tracing::warn!(%reason, org.id = %organization, "SAML response refused");
            refused()
        }
    }
}

/// The login page's "Continue with SSO": the email's organization, or the page again.
pub async fn continue_with_sso(
    state: &AppState,
    email: &str,
    return_to: &str,
) -> Result<HttpResponse, &'static str> {
    match state.saml.lookup(email).await {
        Ok(Some(found)) => Ok(HttpResponse::SeeOther()
            .insert_header((header::LOCATION, start_url(&found, return_to)))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish()),
        Ok(None) => Err("Single sign-on is not set up for this email. Sign in with your password."),
        Err(error) => {
            tracing::error!(%error, "home realm discovery failed");
            Err("Single sign-on is not possible right now. Try again in a moment.")
        }
    }
}

/// Where a found organization's sign-in starts, coming back to `return_to`.
fn start_url(found: &SsoLookup, return_to: &str) -> String {
    let encoded: String = url::form_urlencoded::byte_serialize(return_to.as_bytes()).collect();
    format!("{}?return_to={encoded}", found.login_url)
}

#[derive(Deserialize, ToSchema)]
pub struct LookupRequest {
    #[schema(example = "grace@example.com")]
    email: Option<String>,
}

#[derive(Serialize, ToSchema)]
pub struct LookupResponse {
    /// The organization whose identity provider the email's domain belongs to.
    organization_id: Uuid,
    /// Where its sign-in starts; add `?return_to=/path` to come back to a page of this service.
    #[schema(example = "https://id.example.com/sso/saml/0192.../login")]
    login_url: String,
}

/// Home realm discovery: which organization's single sign-on an email uses.
#[utoipa::path(
    post, path = "/api/v1/sso/lookup", tag = "sso", operation_id = "sso_lookup",
    request_body = LookupRequest,
    responses(
        (status = 200, body = LookupResponse, description = "An active configuration on a plan with SSO whitelists the email's domain"),
        (status = 404, body = ErrorBody, description = "No single sign-on for this email"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn lookup(
    state: web::Data<AppState>,
    ValidJson(body): ValidJson<LookupRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, as_is);
    let email = fields.finish(|| email)?;
    let found = state
        .saml
        .lookup(&email)
        .await?
        .ok_or_else(|| ApiError::NotFound("no single sign-on for this email".into()))?;
    Ok(HttpResponse::Ok().json(LookupResponse {
        organization_id: found.organization_id.as_uuid(),
        login_url: found.login_url,
    }))
}

/// `GET /login/done`: where a sign-in lands when nothing asked to go anywhere.
pub async fn done(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    if crate::routes::login::signed_in(&req, &state)
        .await
        .is_none()
    {
        return HttpResponse::SeeOther()
            .insert_header((header::LOCATION, "/login"))
            .finish();
    }
    let look = look_for(&state, "/").await;
    html(
        StatusCode::OK,
        message_page(
            &look,
            "You are signed in",
            "You can close this window, or go back to the application you came from.",
        ),
    )
}
