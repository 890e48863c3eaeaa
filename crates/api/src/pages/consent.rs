//! The browser's side of OAuth 2.0 and OpenID Connect: `GET /oauth/authorize` (back to the
//! client with a code, to the login page first, or the consent page) and `POST /oauth/consent`
//! (the consent page's answer).

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::service::{Authorization, AuthorizeError, AuthorizeRequest};

use super::{
    branding::branding_for,
    csrf,
    errors::{invalid_sign_in_link, not_admitted, unavailable},
    layout::{consent_page, ConsentForm},
    response::{found, message},
    session,
};
use crate::{extract::origin_of, state::AppState};

/// `GET /oauth/authorize` (RFC 6749 §4.1.1 with RFC 7636): back to the client with a code or an
/// error, to the login page first when nobody is signed in (or not as `prompt` and `max_age`
/// want), or an error page when the client or its redirect URI cannot be trusted.
#[utoipa::path(
    get, path = "/oauth/authorize", tag = "oauth",
    params(
        ("response_type" = String, Query, description = "code"),
        ("client_id" = String, Query),
        ("redirect_uri" = Option<String>, Query, description = "exactly one the application registered"),
        ("scope" = Option<String>, Query, description = "space-separated, e.g. read:user read:resources"),
        ("state" = Option<String>, Query),
        ("code_challenge" = Option<String>, Query, description = "BASE64URL(SHA256(code_verifier)); optional unless the application requires PKCE (require_pkce)"),
        ("code_challenge_method" = Option<String>, Query, description = "S256, with code_challenge"),
        ("nonce" = Option<String>, Query, description = "OpenID Connect: echoed in the ID token"),
        ("prompt" = Option<String>, Query, description = "OpenID Connect: login (a new sign-in), none (login_required instead of a page), consent, select_account"),
        ("max_age" = Option<String>, Query, description = "OpenID Connect: the most seconds since the sign-in; an older one asks for a new sign-in"),
        ("organization_id" = Option<String>, Query, description = "The organization the tokens speak for: the application's own, the only one its tokens may name (`org_id`, `org_role`, `org_permissions` are in them either way); another is `invalid_request` at the client"),
    ),
    responses(
        (status = 302, description = "to the redirect URI with code and state, or error and state; or to /login first"),
        (status = 400, content_type = "text/html", description = "unknown client or redirect URI: an error page, no redirect"),
    )
)]
pub async fn authorize(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let query = req.query_string();
    let request = authorize_request(query);
    let signed_in = session::signed_in(&req, &state).await;
    let decided = state
        .oauth
        .authorize(request, signed_in.as_ref(), &origin_of(&req))
        .await;
    answer(&state, query, decided).await
}

/// The authorization request's parameters, from its query string.
fn authorize_request(query: &str) -> AuthorizeRequest {
    let mut request = AuthorizeRequest::default();
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()).into_owned() {
        let slot = match name.as_str() {
            "client_id" => &mut request.client_id,
            "redirect_uri" => &mut request.redirect_uri,
            "response_type" => &mut request.response_type,
            "scope" => &mut request.scope,
            "state" => &mut request.state,
            "code_challenge" => &mut request.code_challenge,
            "code_challenge_method" => &mut request.code_challenge_method,
            "nonce" => &mut request.nonce,
            "prompt" => &mut request.prompt,
            "max_age" => &mut request.max_age,
            "organization_id" => &mut request.organization_id,
            _ => continue,
        };
        *slot = Some(value);
    }
    request
}

/// `POST /oauth/consent`: the consent page's answer (`decision` = `allow` or `deny`) to the
/// authorization request it carries as `return_to`; then the client gets its code, or
/// `access_denied`.
pub async fn consent(
    req: HttpRequest,
    state: web::Data<AppState>,
    form: csrf::Form,
) -> HttpResponse {
    let Some(query) = form.return_to.strip_prefix("/oauth/authorize?") else {
        return message(
            &Default::default(),
            StatusCode::BAD_REQUEST,
            "This consent form is not valid",
            "It answers no authorization request. Go back to the application and try again.",
        );
    };
    let allowed = form.field("decision") == "allow";
    let signed_in = session::signed_in(&req, &state).await;
    let decided = state
        .oauth
        .consent(
            authorize_request(query),
            signed_in.as_ref(),
            allowed,
            &origin_of(&req),
        )
        .await;
    answer(&state, query, decided).await
}

/// The answer to an authorization request (its query string) as the browser gets it: a
/// redirect to the client or to the login page, or a page.
async fn answer(
    state: &AppState,
    query: &str,
    decided: Result<Authorization, AuthorizeError>,
) -> HttpResponse {
    match decided {
        Ok(Authorization::Granted { redirect })
        | Err(AuthorizeError::Redirect { redirect, .. }) => found(&redirect),
        Ok(Authorization::SingleSignOn { login_url }) => {
            // Through the organization's identity provider, then back to the same request.
            let back = format!("/oauth/authorize?{query}");
            let encoded: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
            found(&format!("{login_url}?return_to={encoded}"))
        }
        Ok(Authorization::SignIn { .. }) => {
            // The sign-in about to happen is what `prompt=login` and `max_age` ask for: asked
            // again after it, they would ask for another, and another.
            let again: String = url::form_urlencoded::Serializer::new(String::new())
                .extend_pairs(
                    url::form_urlencoded::parse(query.as_bytes())
                        .filter(|(name, _)| name != "prompt" && name != "max_age"),
                )
                .finish();
            let back = format!("/oauth/authorize?{again}");
            let encoded: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
            found(&format!("/login?return_to={encoded}"))
        }
        Ok(Authorization::Consent {
            application,
            scopes,
        }) => {
            let return_to = format!("/oauth/authorize?{query}");
            let look = branding_for(state, &return_to).await;
            let asked: Vec<(&str, &str)> = scopes
                .scopes()
                .iter()
                .map(|scope| (scope.as_str(), scope.description()))
                .collect();
            csrf::form_page(state, StatusCode::OK, |csrf_token| {
                let form = ConsentForm {
                    application: application.name.as_str(),
                    scopes: &asked,
                    csrf_token,
                    return_to: &return_to,
                };
                consent_page(&look, &form)
            })
        }
        Ok(Authorization::NotAdmitted {
            application,
            reason,
        }) => {
            let look = branding_for(state, &format!("/oauth/authorize?{query}")).await;
            not_admitted(&look, application.name.as_str(), reason)
        }
        Err(AuthorizeError::NotRedirectable(text)) => invalid_sign_in_link(&text),
        Err(AuthorizeError::Store(error)) => {
            tracing::warn!(%error, "the authorization endpoint failed");
            unavailable(&Default::default())
        }
    }
}
