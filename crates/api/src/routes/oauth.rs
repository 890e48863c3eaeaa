//! The OAuth 2.0 and OpenID Connect endpoints: `POST /oauth/token` (RFC 6749 §3.2, §4.1.3, §4.4,
//! §6), `POST /oauth/revoke` (RFC 7009) and `POST /oauth/introspect` (RFC 7662), form-encoded,
//! the client authenticated by HTTP Basic or by `client_id` and `client_secret` in the form;
//! `GET|POST /oauth/userinfo` with a Bearer token; `GET /oauth/authorize`; and the discovery
//! document. The one place where an error body is not `{detail}`: it is RFC 6749's `{error,
//! error_description}` (§5.2), which OAuth client libraries read.

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use base64::{engine::general_purpose::STANDARD, Engine as _};
use gatehouse_domain::{
    model::{
        Branding, OAuthError, OAuthErrorCode, OrganizationId, SecretToken, TokenKind, UserClaims,
    },
    ports::{Audience, StoreError},
    service::{
        Authorization, AuthorizeError, AuthorizeRequest, ClientCredentials, Discovery,
        IntrospectedKind, Introspection, NotAdmitted, OAuthTokens, TokenEndpointError, TokenGrant,
    },
};
use serde::Serialize;
use utoipa::ToSchema;

use super::{auth::TokenResponse, login};
use crate::{
    error::ApiError,
    extract::{authenticate, origin_of},
    pages::{consent_page, message_page, ConsentForm},
    state::AppState,
};

/// The login's token response and the scope granted. `refresh_token` comes with the code
/// exchange; a refresh, and a machine token (`client_credentials`), answer without one.
/// `id_token` comes with the exchange of a code whose scope holds `openid`.
#[derive(Serialize, ToSchema)]
pub struct OAuthTokenResponse {
    #[serde(flatten)]
    tokens: TokenResponse,
    #[schema(example = "openid email org:read")]
    scope: String,
    /// The OpenID Connect ID token (RS256, `aud` = the client id).
    #[serde(skip_serializing_if = "Option::is_none")]
    id_token: Option<String>,
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
            id_token: tokens.id_token,
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
        "client_credentials" => Ok(TokenGrant::ClientCredentials {
            scope: form.get("scope"),
        }),
        other => Err(OAuthError::new(
            OAuthErrorCode::UnsupportedGrantType,
            format!(
                "grant_type {other:?} is not supported: use authorization_code, refresh_token or client_credentials"
            ),
        )),
    }
}

/// An RFC 6749 error response (RFC 6750's for a Bearer token), never cached.
fn error_response(error: &OAuthError) -> HttpResponse {
    let status = match error.code {
        OAuthErrorCode::InvalidClient | OAuthErrorCode::InvalidToken => StatusCode::UNAUTHORIZED,
        OAuthErrorCode::InsufficientScope => StatusCode::FORBIDDEN,
        OAuthErrorCode::ServerError => StatusCode::INTERNAL_SERVER_ERROR,
        OAuthErrorCode::TemporarilyUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::BAD_REQUEST,
    };
    let mut response = HttpResponse::build(status);
    response
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::PRAGMA, "no-cache"));
    match error.code {
        OAuthErrorCode::InvalidClient => {
            response.insert_header((header::WWW_AUTHENTICATE, "Basic realm=\"gatehouse\""));
        }
        OAuthErrorCode::InvalidToken | OAuthErrorCode::InsufficientScope => {
            response.insert_header((
                header::WWW_AUTHENTICATE,
                format!(
                    "Bearer realm=\"gatehouse\", error=\"{}\"",
                    error.code.as_str()
                ),
            ));
        }
        _ => {}
    }
    response.json(OAuthErrorBody {
        error: error.code.as_str(),
        error_description: error.description.clone(),
    })
}

/// The answer to an OAuth endpoint's failure: its RFC error, `temporarily_unavailable` when
/// the store cannot be reached, `server_error` otherwise (logged here).
fn failure_response(failure: TokenEndpointError) -> HttpResponse {
    match failure {
        TokenEndpointError::OAuth(error) => error_response(&error),
        TokenEndpointError::Store(StoreError::Unavailable(cause)) => {
            tracing::warn!(error = %cause, "store unavailable at an OAuth endpoint");
            error_response(&unavailable())
        }
        other => {
            tracing::error!(error = %other, "an OAuth endpoint failed");
            error_response(&OAuthError::new(
                OAuthErrorCode::ServerError,
                "the request could not be completed",
            ))
        }
    }
}

fn unavailable() -> OAuthError {
    OAuthError::new(
        OAuthErrorCode::TemporarilyUnavailable,
        "the service is unavailable; try again",
    )
}

/// A `200` that no cache keeps.
fn no_store() -> actix_web::HttpResponseBuilder {
    let mut response = HttpResponse::Ok();
    response
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::PRAGMA, "no-cache"));
    response
}

/// The form of a client-authenticated endpoint: the client and the form.
fn client_form(req: &HttpRequest, body: &[u8]) -> Result<(ClientCredentials, Form), OAuthError> {
    let form = Form::parse(req, body)?;
    let client = client_credentials(req, &form)?;
    Ok((client, form))
}

/// Exchanges an authorization code (with its PKCE verifier) or a refresh token for tokens, or
/// issues a machine token to the application (client credentials).
#[utoipa::path(
    post, path = "/oauth/token", tag = "oauth",
    request_body(content_type = "application/x-www-form-urlencoded", content = String,
        description = "grant_type=authorization_code&code=…&redirect_uri=…&code_verifier=…, grant_type=refresh_token&refresh_token=…, or grant_type=client_credentials&scope=org:read members:read (enterprise plan; API scopes only); client_id and client_secret here or as HTTP Basic"),
    responses(
        (status = 200, body = OAuthTokenResponse),
        (status = 400, body = OAuthErrorBody, description = "invalid_request, invalid_grant, unsupported_grant_type, unauthorized_client (client_credentials below the enterprise plan), invalid_scope"),
        (status = 401, body = OAuthErrorBody, description = "invalid_client"),
        (status = 503, body = OAuthErrorBody, description = "temporarily_unavailable"),
    )
)]
pub async fn token(req: HttpRequest, state: web::Data<AppState>, body: web::Bytes) -> HttpResponse {
    let parsed = client_form(&req, &body).and_then(|(client, form)| Ok((client, grant(&form)?)));
    let (client, grant) = match parsed {
        Ok(parsed) => parsed,
        Err(error) => return error_response(&error),
    };
    match state.oauth.token(client, grant, &origin_of(&req)).await {
        Ok(tokens) => no_store().json(OAuthTokenResponse::from(tokens)),
        Err(failure) => failure_response(failure),
    }
}

/// The client and the `token` of a revocation or an introspection.
fn client_and_token(
    req: &HttpRequest,
    body: &[u8],
) -> Result<(ClientCredentials, String), OAuthError> {
    let (client, form) = client_form(req, body)?;
    Ok((client, form.required("token")?))
}

/// RFC 7009 §2.1: revokes a refresh token or an access token the client was issued; its
/// session ends. `token_type_hint` is accepted and not needed.
#[utoipa::path(
    post, path = "/oauth/revoke", tag = "oauth",
    request_body(content_type = "application/x-www-form-urlencoded", content = String,
        description = "token=…[&token_type_hint=refresh_token|access_token]; client_id and client_secret here or as HTTP Basic"),
    responses(
        (status = 200, description = "Revoked, or nothing to revoke (a token that is not the client's or no longer works): the same answer"),
        (status = 400, body = OAuthErrorBody, description = "invalid_request; unsupported_token_type for a machine token"),
        (status = 401, body = OAuthErrorBody, description = "invalid_client"),
        (status = 503, body = OAuthErrorBody, description = "temporarily_unavailable"),
    )
)]
pub async fn revoke(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    let (client, token) = match client_and_token(&req, &body) {
        Ok(parsed) => parsed,
        Err(error) => return error_response(&error),
    };
    match state.oauth.revoke(client, &token, &origin_of(&req)).await {
        Ok(()) => no_store().finish(),
        Err(failure) => failure_response(failure),
    }
}

/// RFC 7662 §2.2: what a token is, for the client it was issued to; `{"active": false}` for
/// anything else.
#[derive(Serialize, ToSchema)]
pub struct IntrospectionResponse {
    active: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "openid email org:read")]
    scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_id: Option<String>,
    /// The user's email; absent for a machine token.
    #[serde(skip_serializing_if = "Option::is_none")]
    username: Option<String>,
    /// `Bearer` for an access token (a machine token's too), `refresh_token` for a refresh
    /// token.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(example = "Bearer")]
    token_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    exp: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    iat: Option<i64>,
    /// The user's id, or a machine token's client id.
    #[serde(skip_serializing_if = "Option::is_none")]
    sub: Option<String>,
    /// An access token's audiences: `gatehouse` and the client id.
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jti: Option<String>,
    /// The organization the token speaks for: a machine token's, or the one the user's
    /// sign-in named.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>, format = Uuid)]
    org_id: Option<OrganizationId>,
}

impl From<Introspection> for IntrospectionResponse {
    fn from(introspection: Introspection) -> Self {
        let Introspection::Active(token) = introspection else {
            return Self {
                active: false,
                scope: None,
                client_id: None,
                username: None,
                token_type: None,
                exp: None,
                iat: None,
                sub: None,
                aud: None,
                iss: None,
                jti: None,
                org_id: None,
            };
        };
        let token = *token;
        Self {
            active: true,
            scope: Some(token.scope.to_string()),
            client_id: Some(token.client_id),
            username: token.username,
            token_type: Some(match token.kind {
                IntrospectedKind::Access => "Bearer",
                IntrospectedKind::Refresh => "refresh_token",
            }),
            exp: Some(token.exp),
            iat: Some(token.iat),
            sub: Some(token.sub),
            aud: token.aud.map(Audience::into_vec),
            iss: Some(token.iss),
            jti: token.jti,
            org_id: token.org_id,
        }
    }
}

/// RFC 7662: introspects a refresh token or an access token for an authenticated client
/// (`token_type_hint` accepted and not needed).
#[utoipa::path(
    post, path = "/oauth/introspect", tag = "oauth",
    request_body(content_type = "application/x-www-form-urlencoded", content = String,
        description = "token=…[&token_type_hint=…]; client_id and client_secret here or as HTTP Basic"),
    responses(
        (status = 200, body = IntrospectionResponse, description = "active with its fields, or {\"active\": false}"),
        (status = 400, body = OAuthErrorBody, description = "invalid_request"),
        (status = 401, body = OAuthErrorBody, description = "invalid_client: client authentication is required"),
        (status = 503, body = OAuthErrorBody, description = "temporarily_unavailable"),
    )
)]
pub async fn introspect(
    req: HttpRequest,
    state: web::Data<AppState>,
    body: web::Bytes,
) -> HttpResponse {
    let (client, token) = match client_and_token(&req, &body) {
        Ok(parsed) => parsed,
        Err(error) => return error_response(&error),
    };
    match state
        .oauth
        .introspect(client, &token, &origin_of(&req))
        .await
    {
        Ok(introspection) => no_store().json(IntrospectionResponse::from(introspection)),
        Err(failure) => failure_response(failure),
    }
}

/// OpenID Connect Core §5.3.2: the claims of the signed-in user the scope allows.
#[derive(Serialize, ToSchema)]
pub struct UserInfoResponse {
    /// The user's id, as the ID token's `sub`.
    #[schema(value_type = String, format = Uuid)]
    sub: String,
    /// With the scope `email`.
    #[serde(skip_serializing_if = "Option::is_none")]
    email: Option<String>,
    /// With the scope `email`.
    #[serde(skip_serializing_if = "Option::is_none")]
    email_verified: Option<bool>,
    /// The full name, with the scope `profile`.
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

impl From<UserClaims> for UserInfoResponse {
    fn from(claims: UserClaims) -> Self {
        Self {
            sub: claims.sub.to_string(),
            email: claims.email,
            email_verified: claims.email_verified,
            name: claims.name,
        }
    }
}

/// The userinfo endpoint (OpenID Connect Core §5.3): `Authorization: Bearer` with an access
/// token of the OAuth flow granted `openid`.
#[utoipa::path(
    get, path = "/oauth/userinfo", tag = "oauth",
    security(("bearer" = [])),
    responses(
        (status = 200, body = UserInfoResponse),
        (status = 400, body = OAuthErrorBody, description = "invalid_request: malformed credentials"),
        (status = 401, body = OAuthErrorBody, description = "invalid_token, with WWW-Authenticate: Bearer error=\"invalid_token\""),
        (status = 403, body = OAuthErrorBody, description = "insufficient_scope: not a token of the OAuth flow with openid (a sign-in's own token, an API key, a machine token)"),
        (status = 503, body = OAuthErrorBody, description = "temporarily_unavailable"),
    )
)]
pub async fn userinfo(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let agent = match authenticate(&req).await {
        Ok(agent) => agent,
        Err(error) => {
            return error_response(&match error {
                ApiError::Unauthorized(detail) => {
                    OAuthError::new(OAuthErrorCode::InvalidToken, detail)
                }
                ApiError::Unavailable(_) => unavailable(),
                ApiError::Internal(cause) => {
                    tracing::error!(error = %cause, "userinfo failed");
                    OAuthError::new(
                        OAuthErrorCode::ServerError,
                        "the request could not be completed",
                    )
                }
                other => OAuthError::invalid_request(other.to_string()),
            })
        }
    };
    match state.oauth.userinfo(&agent).await {
        Ok(claims) => no_store().json(UserInfoResponse::from(claims)),
        Err(failure) => failure_response(failure),
    }
}

/// The userinfo endpoint by `POST` (OpenID Connect Core §5.3.1), as by `GET`.
#[utoipa::path(
    post, path = "/oauth/userinfo", tag = "oauth",
    security(("bearer" = [])),
    responses(
        (status = 200, body = UserInfoResponse),
        (status = 400, body = OAuthErrorBody, description = "invalid_request: malformed credentials"),
        (status = 401, body = OAuthErrorBody, description = "invalid_token, with WWW-Authenticate: Bearer error=\"invalid_token\""),
        (status = 403, body = OAuthErrorBody, description = "insufficient_scope: not a token of the OAuth flow with openid (a sign-in's own token, an API key, a machine token)"),
        (status = 503, body = OAuthErrorBody, description = "temporarily_unavailable"),
    )
)]
pub async fn userinfo_post(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    userinfo(req, state).await
}

/// The OpenID Provider metadata (OpenID Connect Discovery 1.0, RFC 8414).
#[derive(Serialize, ToSchema)]
pub struct DiscoveryDocument {
    #[schema(example = "https://id.example.com")]
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    userinfo_endpoint: String,
    revocation_endpoint: String,
    introspection_endpoint: String,
    jwks_uri: String,
    scopes_supported: Vec<&'static str>,
    response_types_supported: &'static [&'static str],
    response_modes_supported: &'static [&'static str],
    grant_types_supported: &'static [&'static str],
    subject_types_supported: &'static [&'static str],
    id_token_signing_alg_values_supported: &'static [&'static str],
    token_endpoint_auth_methods_supported: &'static [&'static str],
    revocation_endpoint_auth_methods_supported: &'static [&'static str],
    introspection_endpoint_auth_methods_supported: &'static [&'static str],
    code_challenge_methods_supported: &'static [&'static str],
    claims_supported: Vec<&'static str>,
}

impl From<Discovery> for DiscoveryDocument {
    fn from(discovery: Discovery) -> Self {
        Self {
            issuer: discovery.issuer,
            authorization_endpoint: discovery.authorization_endpoint,
            token_endpoint: discovery.token_endpoint,
            userinfo_endpoint: discovery.userinfo_endpoint,
            revocation_endpoint: discovery.revocation_endpoint,
            introspection_endpoint: discovery.introspection_endpoint,
            jwks_uri: discovery.jwks_uri,
            scopes_supported: discovery.scopes_supported,
            response_types_supported: Discovery::RESPONSE_TYPES,
            response_modes_supported: Discovery::RESPONSE_MODES,
            grant_types_supported: Discovery::GRANT_TYPES,
            subject_types_supported: Discovery::SUBJECT_TYPES,
            id_token_signing_alg_values_supported: Discovery::SIGNING_ALGORITHMS,
            token_endpoint_auth_methods_supported: Discovery::CLIENT_AUTH_METHODS,
            revocation_endpoint_auth_methods_supported: Discovery::CLIENT_AUTH_METHODS,
            introspection_endpoint_auth_methods_supported: Discovery::CLIENT_AUTH_METHODS,
            code_challenge_methods_supported: Discovery::CODE_CHALLENGE_METHODS,
            claims_supported: discovery.claims_supported,
        }
    }
}

/// The OpenID Connect discovery document: the issuer, the endpoints, what they support.
#[utoipa::path(
    get, path = "/.well-known/openid-configuration", tag = "oauth",
    responses((status = 200, body = DiscoveryDocument))
)]
pub async fn discovery(state: web::Data<AppState>) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "public, max-age=3600"))
        .json(DiscoveryDocument::from(state.oauth.discovery()))
}

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
        ("code_challenge" = String, Query, description = "BASE64URL(SHA256(code_verifier))"),
        ("code_challenge_method" = String, Query, description = "S256"),
        ("nonce" = Option<String>, Query, description = "OpenID Connect: echoed in the ID token"),
        ("prompt" = Option<String>, Query, description = "OpenID Connect: login (a new sign-in), none (login_required instead of a page), consent, select_account"),
        ("max_age" = Option<String>, Query, description = "OpenID Connect: the most seconds since the sign-in; an older one asks for a new sign-in"),
    ),
    responses(
        (status = 302, description = "to the redirect URI with code and state, or error and state; or to /login first"),
        (status = 400, content_type = "text/html", description = "unknown client or redirect URI: an error page, no redirect"),
    )
)]
pub async fn authorize(req: HttpRequest, state: web::Data<AppState>) -> HttpResponse {
    let query = req.query_string();
    let request = authorize_request(query);
    let signed_in = login::signed_in(&req, &state).await;
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
    body: web::Bytes,
) -> HttpResponse {
    let (fields, return_to) = match login::checked_form(&req, &state, &body).await {
        Ok(form) => form,
        Err(forged) => return forged,
    };
    let Some(query) = return_to.strip_prefix("/oauth/authorize?") else {
        return login::html(
            StatusCode::BAD_REQUEST,
            message_page(
                &Branding::default(),
                "This consent form is not valid",
                "It answers no authorization request. Go back to the application and try again.",
            ),
        );
    };
    let allowed = login::field(&fields, "decision") == "allow";
    let signed_in = login::signed_in(&req, &state).await;
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
    let found = |location: String| {
        HttpResponse::Found()
            .insert_header((header::LOCATION, location))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish()
    };
    match decided {
        Ok(Authorization::Granted { redirect })
        | Err(AuthorizeError::Redirect { redirect, .. }) => found(redirect),
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
            found(format!("/login?return_to={encoded}"))
        }
        Ok(Authorization::Consent {
            application,
            scopes,
        }) => {
            let return_to = format!("/oauth/authorize?{query}");
            let look = login::look_for(state, &return_to).await;
            let token = state.ports.random.secret(TokenKind::Csrf);
            let asked: Vec<(&str, &str)> = scopes
                .scopes()
                .iter()
                .map(|scope| (scope.as_str(), scope.description()))
                .collect();
            let body = consent_page(
                &look,
                &ConsentForm {
                    application: application.name.as_str(),
                    scopes: &asked,
                    csrf_token: token.expose(),
                    return_to: &return_to,
                },
            );
            login::with_csrf_cookie(state, login::html(StatusCode::OK, body), &token)
        }
        Ok(Authorization::NotAdmitted {
            application,
            reason,
        }) => {
            let look = login::look_for(state, &format!("/oauth/authorize?{query}")).await;
            let message = match reason {
                NotAdmitted::SecondFactorNeeded => format!(
                    "The organization behind {} requires multi-factor authentication. Set up an \
                     authenticator app or a security key for your account, then sign in again.",
                    application.name.as_str()
                ),
                NotAdmitted::AddressNotAllowed => format!(
                    "The organization behind {} does not allow sign-ins from your network address.",
                    application.name.as_str()
                ),
            };
            login::html(
                StatusCode::FORBIDDEN,
                message_page(
                    &look,
                    "The organization does not admit this sign-in",
                    &message,
                ),
            )
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
