//! The OAuth 2.0 and OpenID Connect endpoints: `POST /oauth/token` (RFC 6749 §3.2, §4.1.3, §4.4,
//! §6), `POST /oauth/revoke` (RFC 7009) and `POST /oauth/introspect` (RFC 7662), form-encoded,
//! the client authenticated by HTTP Basic or by `client_id` and `client_secret` in the form;
//! `GET|POST /oauth/userinfo` with a Bearer token; and the discovery document. (The browser's
//! side, `/oauth/authorize` and its consent page, is [`crate::pages::consent`].) The one place
//! where an error body is not `{detail}`: it is RFC 6749's `{error, error_description}` (§5.2),
//! which OAuth client libraries read.

use actix_web::{
    http::{header, StatusCode},
    web, HttpRequest, HttpResponse,
};
use base64::{engine::general_purpose::STANDARD, Engine as _};
use gatehouse_domain::{
    model::{OAuthError, OAuthErrorCode, OrganizationId, SecretToken, UserClaims},
    ports::{Audience, StoreError},
    service::{
        ClientCredentials, Discovery, IntrospectedKind, Introspection, OAuthTokens,
        TokenEndpointError, TokenGrant,
    },
};
use serde::Serialize;
use utoipa::ToSchema;

use super::auth::TokenResponse;
use crate::{access::authenticate, error::ApiError, extract::origin_of, state::AppState};

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

/// Exchanges an authorization code (with its PKCE verifier when it was issued with a challenge)
/// or a refresh token for tokens, or issues a machine token to the application (client
/// credentials).
#[utoipa::path(
    post, path = "/oauth/token", tag = "oauth",
    request_body(content_type = "application/x-www-form-urlencoded", content = String,
        description = "grant_type=authorization_code&code=…&redirect_uri=…[&code_verifier=…, exactly when the code was issued with a code_challenge], grant_type=refresh_token&refresh_token=…, or grant_type=client_credentials&scope=org:read members:read (enterprise plan; API scopes only); client_id and client_secret here or as HTTP Basic"),
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
                ApiError::StoreUnavailable(_) => unavailable(),
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
