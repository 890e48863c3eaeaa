//! SAML single sign-on in the browser: `GET /sso/saml/{id}/login` sends the browser to the
//! organization's identity provider, `POST /sso/saml/{id}/acs` takes its signed answer and
//! signs the person in with the pages' session cookie.

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{Branding, OrganizationId, ReturnPath},
    ports::SignInMethod,
    service::SamlSignInError,
};
use serde::Deserialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    errors::{invalid_sign_in_link, unavailable},
    response::{found, message},
    session,
};
use crate::{extract::RequestOrigin, observe, state::AppState};

/// The most the assertion consumer reads of a posted form: the adapter takes a `SAMLResponse`
/// of up to 512 KiB of base64, which form encoding can make up to three times longer.
pub const ACS_MAX_BODY_BYTES: usize = 1536 * 1024;

fn organization_in(path: &str) -> Option<OrganizationId> {
    Uuid::parse_str(path).ok().map(OrganizationId::from_uuid)
}

fn not_configured() -> HttpResponse {
    message(
        &Branding::default(),
        StatusCode::NOT_FOUND,
        "Single sign-on is not available",
        "This organization has no active single sign-on. Sign in with your password instead.",
    )
}

/// Every refusal of an identity provider's answer: one page, its reason in the log.
fn refused() -> HttpResponse {
    message(
        &Branding::default(),
        StatusCode::FORBIDDEN,
        "Single sign-on was refused",
        "Your identity provider's answer could not be accepted. Start again from the sign-in \
         page, or ask your administrator.",
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
            return invalid_sign_in_link(
                "After signing in you can only be sent to a page of this service.",
            )
        }
    };
    match state.saml.begin(organization, return_to).await {
        Ok(location) => found(&location),
        Err(SamlSignInError::NotConfigured) => not_configured(),
        Err(error) => {
            tracing::error!(%error, org.id = %organization, "starting a SAML sign-in failed");
            unavailable(&Branding::default())
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
            session::open(
                &state,
                &signed_in.tokens.refresh_token,
                signed_in.return_to.as_str(),
            )
        }
        Err(error @ (SamlSignInError::Store(_) | SamlSignInError::Internal(_))) => {
            tracing::error!(%error, org.id = %organization, "a SAML sign-in failed");
            unavailable(&Branding::default())
        }
        Err(reason) => {
            tracing::warn!(%reason, org.id = %organization, "SAML response refused");
            refused()
        }
    }
}
