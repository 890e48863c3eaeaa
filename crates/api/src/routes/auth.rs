//! `/api/v1/auth/*` and the key set.

use actix_web::{web, HttpResponse};
use gatehouse_domain::{
    model::{Email, FullName, OrganizationChoice, OrganizationId},
    service::SignIn,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use gatehouse_domain::ports::SignInMethod;

use super::not_stored;
use crate::extract::RequestOrigin;
use crate::observe;
use crate::{
    error::{ApiError, ErrorBody, SsoRequiredBody, ValidationErrorBody},
    extract::{as_is, nullable, Authenticated, Fields, ValidJson},
    state::AppState,
};

/// The body of `POST /api/v1/auth/register`: `email`, `password` and `full_name`, all
/// required.
#[derive(Deserialize, ToSchema)]
pub struct RegisterRequest {
    #[schema(example = "ada@example.com")]
    email: Option<String>,
    #[schema(
        example = "correct horse battery staple",
        min_length = 8,
        max_length = 128
    )]
    password: Option<String>,
    #[schema(example = "Ada Lovelace")]
    full_name: Option<String>,
}

/// The `201` of a registration: the new user and their personal workspace.
#[derive(Serialize, ToSchema)]
pub struct RegisterResponse {
    user_id: uuid::Uuid,
    email: String,
    /// The personal workspace created for the user.
    organization_id: uuid::Uuid,
}

/// Registers a user and creates their personal workspace.
#[utoipa::path(
    post, path = "/api/v1/auth/register", tag = "auth",
    request_body = RegisterRequest,
    responses(
        (status = 201, body = RegisterResponse),
        (status = 400, body = ErrorBody, description = "Body is not a JSON object"),
        (status = 403, body = SsoRequiredBody, description = "The address signs in with its organization's single sign-on (`sso_url` says where): its account comes from the identity provider"),
        (status = 409, body = ErrorBody, description = "Email already registered"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn register(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<RegisterRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, |s| Email::parse(&s));
    let password = fields.required("password", body.password, as_is);
    let full_name = fields.required("full_name", body.full_name, |s| FullName::parse(&s));
    let (email, password, full_name) = fields.finish(|| Some((email?, password?, full_name?)))?;
    let registered = state
        .auth
        .register(email, &password, full_name, &origin)
        .await?;
    Ok(HttpResponse::Created().json(RegisterResponse {
        user_id: registered.user_id.as_uuid(),
        email: registered.email.as_ref().to_owned(),
        organization_id: registered.organization_id.as_uuid(),
    }))
}

/// The body of `POST /api/v1/auth/login`: `email` and `password` (required), and optionally
/// the organization the tokens are to speak for.
#[derive(Deserialize, ToSchema)]
pub struct LoginRequest {
    email: Option<String>,
    password: Option<String>,
    /// The organization the tokens are to speak for: once it admits the user (membership,
    /// IP allowlist, MFA and SSO policies), the access token carries `org_id`, `org_role` and
    /// `org_permissions`, and the session keeps it for its refreshes. A user with a second
    /// factor names it again at `POST /auth/mfa/verify`.
    #[schema(format = "uuid")]
    organization_id: Option<String>,
}

/// The `organization_id` of a sign-in, when it names one.
pub(crate) fn organization_field(
    fields: &mut Fields,
    raw: Option<String>,
) -> Option<Option<OrganizationId>> {
    fields.optional("organization_id", raw, |raw: String| {
        crate::query::organization_id(raw.trim())
    })
}

/// The login response. `refresh_token` is absent from the refresh response.
#[derive(Serialize, ToSchema)]
pub struct TokenResponse {
    /// RS256 JWT; verify it with the keys at `/.well-known/jwks.json`.
    access_token: String,
    #[schema(example = "Bearer")]
    token_type: &'static str,
    #[schema(example = 3600)]
    expires_in: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    refresh_token: Option<String>,
}

impl TokenResponse {
    /// A `Bearer` access token, and the refresh token when one was issued.
    pub(crate) fn bearer(
        access_token: String,
        expires_in: i64,
        refresh_token: Option<String>,
    ) -> Self {
        Self {
            access_token,
            token_type: "Bearer",
            expires_in,
            refresh_token,
        }
    }
}

/// A user with a second factor: the sign-in goes on at `POST /api/v1/auth/mfa/verify`.
#[derive(Serialize, ToSchema)]
pub struct MfaRequiredResponse {
    /// Always `true`.
    mfa_required: bool,
    /// Names this sign-in at the second step: five minutes, five wrong factors, one use.
    #[schema(example = "ghm_…")]
    mfa_token: String,
    /// The kinds of the user's second factors (`totp`, `webauthn`); a recovery code works too.
    methods: Vec<&'static str>,
    /// The WebAuthn request options (`{"publicKey": {...}}`) when the user has security keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    webauthn_options: Option<serde_json::Value>,
}

/// The login response: the tokens, or the second step a user with MFA still has to pass.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum LoginResponse {
    /// Signed in.
    Tokens(TokenResponse),
    /// A second factor is needed.
    SecondFactor(MfaRequiredResponse),
}

impl LoginResponse {
    pub(crate) fn of(signed_in: SignIn) -> Self {
        match signed_in {
            SignIn::Tokens(pair) => Self::Tokens(TokenResponse::bearer(
                pair.access.access_token,
                pair.access.expires_in,
                Some(pair.refresh_token.expose().to_owned()),
            )),
            SignIn::SecondFactor(needed) => Self::SecondFactor(MfaRequiredResponse {
                mfa_required: true,
                mfa_token: needed.mfa_token.expose().to_owned(),
                methods: needed.methods.iter().map(|m| m.as_str()).collect(),
                webauthn_options: needed.webauthn_options,
            }),
        }
    }
}

/// Logs in with email and password; a user with a second factor gets the second step instead
/// of tokens.
#[utoipa::path(
    post, path = "/api/v1/auth/login", tag = "auth",
    request_body = LoginRequest,
    responses(
        (status = 200, body = LoginResponse),
        (status = 401, body = ErrorBody, description = "Unknown email or wrong password"),
        (status = 403, body = ErrorBody, description = "The password expired under an organization's policy: renew it; or the address signs in with its organization's single sign-on (`sso_url` says where); or the organization named does not admit the user (not a member, IP allowlist, MFA or SSO policy: the detail says which)"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn login(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<LoginRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, as_is);
    let password = fields.required("password", body.password, as_is);
    let organization = organization_field(&mut fields, body.organization_id);
    let (email, password, organization) =
        fields.finish(|| Some((email?, password?, organization?)))?;
    let signed_in = state
        .auth
        .login(&email, password, organization, &origin)
        .await;
    observe::sign_in(&state, SignInMethod::Password, &signed_in);
    let signed_in = signed_in?;
    Ok(not_stored(HttpResponse::Ok()).json(LoginResponse::of(signed_in)))
}

/// The body of `POST /api/v1/auth/refresh`: the `refresh_token` of the login (required), and
/// optionally a change of organization.
#[derive(Deserialize, ToSchema)]
pub struct RefreshRequest {
    refresh_token: Option<String>,
    /// The organization the new token speaks for from now on (admitted again); `null` for
    /// none; absent, the session's own (admitted again: a removal, a role change or a new
    /// policy shows at the next refresh).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, format = "uuid", nullable = true)]
    organization_id: Option<Option<String>>,
}

/// A new access token for a live session.
#[utoipa::path(
    post, path = "/api/v1/auth/refresh", tag = "auth",
    request_body = RefreshRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 401, body = ErrorBody, description = "Refresh token invalid, expired or revoked, or the session idle or older than its policy allows"),
        (status = 403, body = ErrorBody, description = "The password expired under an organization's policy: renew it; or the session's organization does not admit the user (any more): the detail says why"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn refresh(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<RefreshRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let token = fields.required("refresh_token", body.refresh_token, as_is);
    let organization = match body.organization_id {
        None => Some(OrganizationChoice::Keep),
        Some(None) => Some(OrganizationChoice::Clear),
        Some(raw) => organization_field(&mut fields, raw)
            .map(|id| id.map_or(OrganizationChoice::Clear, OrganizationChoice::Switch)),
    };
    let (token, organization) = fields.finish(|| Some((token?, organization?)))?;
    let access = state
        .auth
        .refresh(&token, None, organization, Some(origin.client()))
        .await?;
    Ok(not_stored(HttpResponse::Ok()).json(TokenResponse {
        access_token: access.access_token,
        token_type: access.token_type,
        expires_in: access.expires_in,
        refresh_token: None,
    }))
}

/// Ends the session: its refresh token and access tokens stop working at once.
#[utoipa::path(
    post, path = "/api/v1/auth/logout", tag = "auth",
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Session ended"),
        (status = 401, body = ErrorBody),
    )
)]
pub async fn logout(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    state.auth.logout(&principal, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The body of `POST /api/v1/auth/password`: `current_password` and `new_password`, both
/// required.
#[derive(Deserialize, ToSchema)]
pub struct ChangePasswordRequest {
    current_password: Option<String>,
    new_password: Option<String>,
}

/// Changes the caller's password; every other session of the user ends.
#[utoipa::path(
    post, path = "/api/v1/auth/password", tag = "auth",
    security(("bearer" = [])),
    request_body = ChangePasswordRequest,
    responses(
        (status = 204, description = "Password changed"),
        (status = 401, body = ErrorBody),
        (status = 422, body = ValidationErrorBody, description = "Wrong current password or weak new one"),
    )
)]
pub async fn change_password(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    ValidJson(body): ValidJson<ChangePasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let current = fields.required("current_password", body.current_password, as_is);
    let new = fields.required("new_password", body.new_password, as_is);
    let (current, new) = fields.finish(|| Some((current?, new?)))?;
    state
        .auth
        .change_password(&principal, current, &new, &origin)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The body of `POST /api/v1/auth/password/renew`: `email`, `current_password` (the expired
/// one) and `new_password`, all required.
#[derive(Deserialize, ToSchema)]
pub struct RenewPasswordRequest {
    email: Option<String>,
    current_password: Option<String>,
    new_password: Option<String>,
}

/// Sets a new password with email and current password, for someone whose password expired
/// under an organization's policy (login and refresh answer `403` until then). Every session of
/// the user ends; log in again with the new password.
#[utoipa::path(
    post, path = "/api/v1/auth/password/renew", tag = "auth",
    request_body = RenewPasswordRequest,
    responses(
        (status = 204, description = "Password changed"),
        (status = 401, body = ErrorBody, description = "Unknown email or wrong password"),
        (status = 422, body = ValidationErrorBody, description = "The new password breaks a policy"),
    )
)]
pub async fn renew_password(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<RenewPasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, as_is);
    let current = fields.required("current_password", body.current_password, as_is);
    let new = fields.required("new_password", body.new_password, as_is);
    let (email, current, new) = fields.finish(|| Some((email?, current?, new?)))?;
    state
        .auth
        .renew_password(&email, current, &new, &origin)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The JSON Web Key Set.
#[derive(Serialize, ToSchema)]
pub struct Jwks {
    #[schema(value_type = Vec<Object>)]
    keys: Vec<gatehouse_domain::ports::PublicJwk>,
}

/// The public keys that verify access tokens (RS256), by `kid`.
#[utoipa::path(
    get, path = "/.well-known/jwks.json", tag = "auth",
    responses((status = 200, body = Jwks))
)]
pub async fn jwks(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let keys = state
        .signer
        .public_keys()
        .await
        .map_err(|e| ApiError::Internal(Box::new(e)))?;
    Ok(HttpResponse::Ok()
        .insert_header(("Cache-Control", "public, max-age=300"))
        .json(Jwks { keys }))
}
