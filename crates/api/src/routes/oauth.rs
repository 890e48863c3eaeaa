//! `POST /oauth/token` (RFC 6749 §3.2, §4.1.3, §6): form-encoded, the client authenticated by
//! HTTP Basic or by `client_id` and `client_secret` in the form. The one place where an error
//! body is not `{detail}`: it is RFC 6749's `{error, error_description}` (§5.2), which OAuth
//! client libraries read.

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use base64::{engine::general_purpose::STANDARD, Engine as _};
use gatehouse_domain::{
    model::{Branding, OAuthError, OAuthErrorCode, SecretToken},
    ports::StoreError,
    service::{
        Authorization, AuthorizeError, AuthorizeRequest, ClientCredentials, OAuthTokens,
        TokenEndpointError, TokenGrant,
    },
};
use serde::Serialize;
use utoipa::ToSchema;

use super::{auth::TokenResponse, login};
use crate::{extract::origin_of, pages::message_page, state::AppState};

/// The login's token response and the scope granted. `refresh_token` comes with the code
/// exchange; a refresh answers without one (it stays valid).
#[derive(Serialize, ToSchema)]
pub struct OAuthTokenResponse {
    #[serde(flatten)]
    tokens: TokenResponse,
    #[schema(example = "read:user read:resources")]
    scope: String,
}

impl From<OAuthTokens> for OAuthTokenResponse {
    fn from(tokens: OAuthTokens) -> Self {
        Self {
            tokens: TokenResponse::bearer(
                tokens.access_token,
                tokens.expires_in,
                tokens.refresh_token.map(|t| t.expose().to_owned()),
            ),
            scope: tokens.scope.to_string(),
        }
    }
}

/// RFC 6749 §5.2.
#[derive(Serialize, ToSchema)]
pub struct OAuthErrorBody {
    #[schema(example = "invalid_grant")]
    error: &'static str,
    error_description: String,
}

/// The form's fields; a field sent twice is a request error (RFC 6749 §3.2).
struct Form(Vec<(String, String)>);

impl Form {
    fn parse(req: &HttpRequest, body: &[u8]) -> Result<Self, OAuthError> {
        let form = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.split(';').next().is_some_and(|t| {
                    t.trim()
                        .eq_ignore_ascii_case("application/x-www-form-urlencoded")
                })
            });
        if !form {
            return Err(OAuthError::invalid_request(
                "the body must be application/x-www-form-urlencoded",
            ));
        }
        let fields: Vec<(String, String)> =
            url::form_urlencoded::parse(body).into_owned().collect();
        for (i, (name, _)) in fields.iter().enumerate() {
            if fields[..i].iter().any(|(other, _)| other == name) {
                return Err(OAuthError::invalid_request(format!(
                    "{name} is given more than once"
                )));
            }
        }
        Ok(Self(fields))
    }

    fn get(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }

    fn required(&self, name: &str) -> Result<String, OAuthError> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| OAuthError::invalid_request(format!("{name} is required")))
    }
}

/// The client's credentials: HTTP Basic (`client_secret_basic`, each part form-encoded before
/// base64, RFC 6749 §2.3.1) or the form's `client_id` and `client_secret`
/// (`client_secret_post`); never both.
fn client_credentials(req: &HttpRequest, form: &Form) -> Result<ClientCredentials, OAuthError> {
    let invalid_client = |why: &str| OAuthError::new(OAuthErrorCode::InvalidClient, why);
    let basic = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "));
    let in_form = form.get("client_secret");
    match (basic, in_form) {
        (Some(_), Some(_)) => Err(OAuthError::invalid_request(
            "authenticate the client one way: HTTP Basic or client_secret in the form, not both",
        )),
        (Some(encoded), None) => {
            let decoded = STANDARD
                .decode(encoded.trim())
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(|| invalid_client("malformed HTTP Basic credentials"))?;
            let (id, secret) = decoded
                .split_once(':')
                .ok_or_else(|| invalid_client("malformed HTTP Basic credentials"))?;
            let unescape = |part: &str| {
                url::form_urlencoded::parse(format!("x={part}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            Ok(ClientCredentials {
                client_id: unescape(id),
                client_secret: SecretToken::new(unescape(secret)),
            })
        }
        (None, Some(secret)) => Ok(ClientCredentials {
            client_id: form.required("client_id")?,
            client_secret: SecretToken::new(secret),
        }),
        (None, None) => Err(invalid_client("client authentication is required")),
    }
}

fn grant(form: &Form) -> Result<TokenGrant, OAuthError> {
    match form.required("grant_type")?.as_str() {
        "authorization_code" => Ok(TokenGrant::AuthorizationCode {
            code: form.required("code")?,
            redirect_uri: form.get("redirect_uri"),
            code_verifier: form.get("code_verifier"),
        }),
        "refresh_token" => Ok(TokenGrant::RefreshToken {
            refresh_token: form.required("refresh_token")?,
        }),
        other => Err(OAuthError::new(
            OAuthErrorCode::UnsupportedGrantType,
            format!(
                "grant_type {other:?} is not supported: use authorization_code or refresh_token"
            ),
        )),
    }
}

/// An RFC 6749 error response, never cached.
fn error_response(error: &OAuthError) -> HttpResponse {
    let status = match error.code {
        OAuthErrorCode::InvalidClient => StatusCode::UNAUTHORIZED,
        OAuthErrorCode::ServerError => StatusCode::INTERNAL_SERVER_ERROR,
        OAuthErrorCode::TemporarilyUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut response = HttpResponse::build(status);
    response
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::PRAGMA, "no-cache"));
    if error.code == OAuthErrorCode::InvalidClient {
        response.insert_header((header::WWW_AUTHENTICATE, "Basic realm=\"gatehouse\""));
    }
    response.json(OAuthErrorBody {
        error: error.code.as_str(),
        error_description: error.description.clone(),
    })
}

/// Exchanges an authorization code (with its PKCE verifier) or a refresh token for tokens.
#[utoipa::path(
    post, path = "/oauth/token", tag = "oauth",
    request_body(content_type = "application/x-www-form-urlencoded", content = String,
        description = "grant_type=authorization_code&code=…&redirect_uri=…&code_verifier=… or grant_type=refresh_token&refresh_token=…; client_id and client_secret here or as HTTP Basic"),
    responses(
        (status = 200, body = OAuthTokenResponse),
        (status = 400, body = OAuthErrorBody, description = "invalid_request, invalid_grant, unsupported_grant_type"),
        (status = 401, body = OAuthErrorBody, description = "invalid_client"),
    )
)]
pub async fn token(req: HttpRequest, state: web::Data<AppState>, body: web::Bytes) -> HttpResponse {
    let parsed = Form::parse(&req, &body).and_then(|form| {
        let client = client_credentials(&req, &form)?;
        Ok((client, grant(&form)?))
    });
    let (client, grant) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return error_response(&error),
    };
    match state.oauth.token(client, grant, &origin_of(&req)).await {
        Ok(tokens) => HttpResponse::Ok()
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .insert_header((header::PRAGMA, "no-cache"))
            .json(OAuthTokenResponse::from(tokens)),
        Err(TokenEndpointError::OAuth(error)) => error_response(&error),
        Err(TokenEndpointError::Store(StoreError::Unavailable(cause))) => {
            tracing::warn!(error = %cause, "store unavailable at the token endpoint");
            error_response(&OAuthError::new(
                OAuthErrorCode::TemporarilyUnavailable,
                "the service is unavailable; try again",
            ))
        }
        Err(other) => {
            tracing::error!(error = %other, "the token endpoint failed");
            error_response(&OAuthError::new(
                OAuthErrorCode::ServerError,
                "the token could not be issued",
            ))
        }
    }
}

/// `GET /oauth/authorize` (RFC 6749 §4.1.1 with RFC 7636): back to the client with a code or an
/// error, to the login page first when nobody is signed in, or an error page when the client or
/// its redirect URI cannot be trusted.
#[utoipa::path(
    get, path = "/oauth/authorize", tag = "oauth",
    params(
        ("response_type" = String, Query, description = "code"),
        ("client_id" = String, Query),
        ("redirect_uri" = Option<String>, Query, description = "exactly one the application registered"),
        ("scope" = Option<String>, Query, description = "space-separated, e.g. read:user read:resources"),
        ("state" = Option<String>, Query),
        ("code_challenge" = String, Query, description = "BASE64URL(SHA256(code_verifier))"),
        ("code_challenge_method" = String, Query, description = "S256"),
    ),
    responses(
        (status = 302, description = "to the redirect URI with code and state, or error and state; or to /login first"),
        (status = 400, content_type = "text/html", description = "unknown client or redirect URI: an error page, no redirect"),
    )
)]
pub async fn authorize(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let query = req.query_string();
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
            _ => continue,
        };
        *slot = Some(value);
    }
    let signed_in = login::signed_in(&req, &state).await;
    let found = |location: String| {
        HttpResponse::Found()
            .insert_header((header::LOCATION, location))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish()
    };
    match state
        .oauth
        .authorize(request, signed_in.as_ref(), &origin_of(&req))
        .await
    {
        Ok(Authorization::Granted { redirect })
        | Err(AuthorizeError::Redirect { redirect, .. }) => found(redirect),
        Ok(Authorization::SignIn { .. }) => {
            let back = format!("/oauth/authorize?{query}");
            let encoded: String = url::form_urlencoded::byte_serialize(back.as_bytes()).collect();
            found(format!("/login?return_to={encoded}"))
        }
        Err(AuthorizeError::NotRedirectable(message)) => login::html(
            StatusCode::BAD_REQUEST,
            message_page(
                &Branding::default(),
                "This sign-in link is not valid",
                &message,
            ),
        ),
        Err(AuthorizeError::Store(error)) => {
            tracing::warn!(%error, "the authorization endpoint failed");
            login::html(
                StatusCode::SERVICE_UNAVAILABLE,
                message_page(
                    &Branding::default(),
                    "Signing in is not possible right now",
                    "Try again in a moment.",
                ),
            )
        }
    }
}
