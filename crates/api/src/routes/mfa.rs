//! `/api/v1/auth/mfa*`: the caller's second factors (authenticator apps and security keys),
//! recovery codes, and the second step of a sign-in.

use actix_web::{web, HttpResponse};
use gatehouse_domain::{
    model::{timestamp, MfaFactor, MfaFactorId, SecretToken},
    service::{Confirmed, SecondFactorProof},
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use gatehouse_domain::ports::SignInMethod;

use super::not_stored;
use crate::extract::RequestOrigin;
use crate::observe;
use crate::{
    error::{ApiError, ErrorBody, FieldError, ValidationErrorBody},
    extract::{as_is, Authenticated, Fields, ValidJson},
    routes::auth::TokenResponse,
    state::AppState,
};

/// A second factor, as listed (never its secret).
#[derive(Serialize, ToSchema)]
pub struct MfaMethodResponse {
    /// `totp` (an authenticator app) or `webauthn` (a security key or passkey).
    #[serde(rename = "type")]
    #[schema(example = "totp")]
    kind: &'static str,
    id: Uuid,
    created_at: String,
    last_used_at: Option<String>,
}

impl From<&MfaFactor> for MfaMethodResponse {
    fn from(factor: &MfaFactor) -> Self {
        Self {
            kind: factor.kind.as_str(),
            id: factor.id.as_uuid(),
            created_at: timestamp::format(factor.created_at),
            last_used_at: factor.last_used_at.map(timestamp::format),
        }
    }
}

/// The `200` of `GET /api/v1/auth/mfa`: the caller's second factors and how many recovery
/// codes they have left.
#[derive(Serialize, ToSchema)]
pub struct MfaOverviewResponse {
    /// The confirmed second factors, oldest first.
    methods: Vec<MfaMethodResponse>,
    /// Recovery codes not used yet.
    recovery_codes_left: u32,
}

/// The caller's second factors.
#[utoipa::path(
    get, path = "/api/v1/auth/mfa", tag = "mfa",
    security(("bearer" = [])),
    responses(
        (status = 200, body = MfaOverviewResponse),
        (status = 401, body = ErrorBody),
    )
)]
pub async fn overview(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let overview = state.mfa.overview(&principal).await?;
    Ok(HttpResponse::Ok().json(MfaOverviewResponse {
        methods: overview.methods.iter().map(Into::into).collect(),
        recovery_codes_left: overview.recovery_codes_left,
    }))
}

/// The `201` of `POST /api/v1/auth/mfa/totp`: a pending authenticator app, with its secret
/// shown this once.
#[derive(Serialize, ToSchema)]
pub struct TotpEnrolmentResponse {
    /// Confirm the enrolment with `POST /api/v1/auth/mfa/totp/{id}/confirm`.
    id: Uuid,
    /// The secret, base32, to type into an authenticator app: shown this once.
    #[schema(example = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP")]
    secret: String,
    /// The same secret as an `otpauth://` URI, for a QR code.
    otpauth_uri: String,
}

/// Starts adding an authenticator app: a new TOTP secret, pending until a code confirms it.
#[utoipa::path(
    post, path = "/api/v1/auth/mfa/totp", tag = "mfa",
    security(("bearer" = [])),
    responses(
        (status = 201, body = TotpEnrolmentResponse),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The user holds the most second factors allowed"),
    )
)]
pub async fn enroll_totp(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let enrolment = state.mfa.enroll_totp(&principal).await?;
    Ok(
        not_stored(HttpResponse::Created()).json(TotpEnrolmentResponse {
            id: enrolment.id.as_uuid(),
            secret: enrolment.secret,
            otpauth_uri: enrolment.otpauth_uri,
        }),
    )
}

/// The body of `POST /api/v1/auth/mfa/totp/{id}/confirm`: the app's current `code`
/// (required).
#[derive(Deserialize, ToSchema)]
pub struct ConfirmTotpRequest {
    /// The six-digit code the app shows now.
    #[schema(example = "123456")]
    code: Option<String>,
}

/// Recovery codes, shown this once: the answer of confirming an authenticator app and of
/// asking for new codes.
#[derive(Serialize, ToSchema)]
pub struct RecoveryCodesResponse {
    /// Ten codes, each good for one sign-in instead of a second factor: shown this once. Empty
    /// when the user had a second factor already (their codes stay).
    recovery_codes: Vec<String>,
}

fn shown(codes: Vec<SecretToken>) -> Vec<String> {
    codes.iter().map(|code| code.expose().to_owned()).collect()
}

fn factor_id(raw: &str) -> Result<MfaFactorId, ApiError> {
    Uuid::parse_str(raw)
        .map(MfaFactorId::from_uuid)
        .map_err(|_| ApiError::NotFound("no such second factor".into()))
}

/// Confirms an authenticator app with its current code. The first second factor of a user
/// turns MFA on (`auth.mfa_enabled`) and brings ten recovery codes.
#[utoipa::path(
    post, path = "/api/v1/auth/mfa/totp/{id}/confirm", tag = "mfa",
    security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    request_body = ConfirmTotpRequest,
    responses(
        (status = 200, body = RecoveryCodesResponse),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such pending enrolment"),
        (status = 409, body = ErrorBody, description = "Confirmed already"),
        (status = 422, body = ValidationErrorBody, description = "The code is not valid"),
    )
)]
pub async fn confirm_totp(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    RequestOrigin(origin): RequestOrigin,
    path: web::Path<String>,
    ValidJson(body): ValidJson<ConfirmTotpRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = factor_id(&path)?;
    let mut fields = Fields::new();
    let code = fields.required("code", body.code, as_is);
    let code = fields.finish(|| code)?;
    let Confirmed { recovery_codes, .. } = state
        .mfa
        .confirm_totp(&principal, id, &code, &origin)
        .await?;
    Ok(not_stored(HttpResponse::Ok()).json(RecoveryCodesResponse {
        recovery_codes: shown(recovery_codes),
    }))
}

/// The `200` of `POST /api/v1/auth/mfa/webauthn/register`: the challenge to finish with, and
/// the options to hand the browser.
#[derive(Serialize, ToSchema)]
pub struct WebauthnStartResponse {
    /// Finish with `POST /api/v1/auth/mfa/webauthn/register/{challenge_id}`.
    challenge_id: Uuid,
    /// `{"publicKey": PublicKeyCredentialCreationOptions}` with base64url fields:
    /// `PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey)`.
    #[schema(value_type = Object)]
    options: serde_json::Value,
}

/// Starts registering a security key or passkey (five minutes to finish).
#[utoipa::path(
    post, path = "/api/v1/auth/mfa/webauthn/register", tag = "mfa",
    security(("bearer" = [])),
    responses(
        (status = 200, body = WebauthnStartResponse),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The user holds the most second factors allowed"),
        (status = 503, body = ErrorBody, description = "Security keys are unavailable: GATEHOUSE_PUBLIC_URL's host is not a domain name"),
    )
)]
pub async fn start_webauthn(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let started = state.mfa.start_webauthn_registration(&principal).await?;
    Ok(not_stored(HttpResponse::Ok()).json(WebauthnStartResponse {
        challenge_id: started.challenge_id.as_uuid(),
        options: started.options,
    }))
}

/// The body of `POST /api/v1/auth/mfa/webauthn/register/{challenge_id}`: the browser's
/// `credential` (required).
#[derive(Deserialize, ToSchema)]
pub struct FinishWebauthnRequest {
    /// The browser's `PublicKeyCredential`, as `credential.toJSON()` gives it.
    #[schema(value_type = Option<Object>)]
    credential: Option<serde_json::Value>,
}

/// The `201` of a finished security-key registration: the new factor's `id`, and the
/// recovery codes of a first second factor.
#[derive(Serialize, ToSchema)]
pub struct WebauthnRegisteredResponse {
    id: Uuid,
    /// Ten recovery codes when this is the user's first second factor (shown once), else none.
    recovery_codes: Vec<String>,
}

/// Finishes registering a security key with the browser's answer.
#[utoipa::path(
    post, path = "/api/v1/auth/mfa/webauthn/register/{challenge_id}", tag = "mfa",
    security(("bearer" = [])),
    params(("challenge_id" = Uuid, Path)),
    request_body = FinishWebauthnRequest,
    responses(
        (status = 201, body = WebauthnRegisteredResponse),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such registration under way (or it expired)"),
        (status = 409, body = ErrorBody, description = "The key is registered already"),
        (status = 422, body = ValidationErrorBody, description = "The answer does not verify"),
        (status = 503, body = ErrorBody, description = "Security keys are unavailable: GATEHOUSE_PUBLIC_URL's host is not a domain name"),
    )
)]
pub async fn finish_webauthn(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    RequestOrigin(origin): RequestOrigin,
    path: web::Path<String>,
    ValidJson(body): ValidJson<FinishWebauthnRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = factor_id(&path)?;
    let mut fields = Fields::new();
    let credential = fields.required("credential", body.credential, as_is);
    let credential = fields.finish(|| credential)?;
    let confirmed = state
        .mfa
        .finish_webauthn_registration(&principal, id, &credential, &origin)
        .await?;
    Ok(
        not_stored(HttpResponse::Created()).json(WebauthnRegisteredResponse {
            id: confirmed.id.as_uuid(),
            recovery_codes: shown(confirmed.recovery_codes),
        }),
    )
}

/// The body of `DELETE /api/v1/auth/mfa/{id}` and `POST /api/v1/auth/mfa/recovery-codes`:
/// the caller's `password` (required), confirming the change.
#[derive(Deserialize, ToSchema)]
pub struct PasswordRequest {
    /// The caller's current password.
    password: Option<String>,
}

/// Removes a second factor, with the password. The last one cannot go while an organization
/// of the user requires MFA (`409`); with the last one go the recovery codes.
#[utoipa::path(
    delete, path = "/api/v1/auth/mfa/{id}", tag = "mfa",
    security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    request_body = PasswordRequest,
    responses(
        (status = 204, description = "Removed"),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "An organization of the user requires MFA and this is their last second factor"),
        (status = 422, body = ValidationErrorBody, description = "Wrong password"),
    )
)]
pub async fn remove(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    RequestOrigin(origin): RequestOrigin,
    path: web::Path<String>,
    ValidJson(body): ValidJson<PasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = factor_id(&path)?;
    let mut fields = Fields::new();
    let password = fields.required("password", body.password, as_is);
    let password = fields.finish(|| password)?;
    state.mfa.remove(&principal, id, password, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Ten new recovery codes, with the password; the old ones stop working.
#[utoipa::path(
    post, path = "/api/v1/auth/mfa/recovery-codes", tag = "mfa",
    security(("bearer" = [])),
    request_body = PasswordRequest,
    responses(
        (status = 200, body = RecoveryCodesResponse),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "MFA is not enabled"),
        (status = 422, body = ValidationErrorBody, description = "Wrong password"),
    )
)]
pub async fn recovery_codes(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<PasswordRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let password = fields.required("password", body.password, as_is);
    let password = fields.finish(|| password)?;
    let codes = state
        .mfa
        .regenerate_recovery_codes(&principal, password, &origin)
        .await?;
    Ok(not_stored(HttpResponse::Ok()).json(RecoveryCodesResponse {
        recovery_codes: shown(codes),
    }))
}

/// The body of `POST /api/v1/auth/mfa/verify`: the `mfa_token` of the login (required) and
/// exactly one factor (`code`, `recovery_code` or `webauthn`).
#[derive(Deserialize, ToSchema)]
pub struct VerifyRequest {
    /// From the login response.
    mfa_token: Option<String>,
    /// A code from the authenticator app...
    code: Option<String>,
    /// ... or one of the recovery codes...
    recovery_code: Option<String>,
    /// ... or the WebAuthn assertion (`credential.toJSON()`); exactly one of the three.
    #[schema(value_type = Option<Object>)]
    webauthn: Option<serde_json::Value>,
    /// The organization the tokens are to speak for, as at `POST /auth/login`.
    #[schema(format = "uuid")]
    organization_id: Option<String>,
}

/// The second step of a sign-in: the `mfa_token` and one factor. Answers like a login.
#[utoipa::path(
    post, path = "/api/v1/auth/mfa/verify", tag = "mfa",
    request_body = VerifyRequest,
    responses(
        (status = 200, body = TokenResponse),
        (status = 401, body = ErrorBody, description = "The mfa_token is invalid, expired or used up, or the factor is wrong"),
        (status = 403, body = ErrorBody, description = "The organization named does not admit the user (the detail says why); the mfa_token is not spent"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn verify(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<VerifyRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let token = fields.required("mfa_token", body.mfa_token, as_is);
    let organization = super::auth::organization_field(&mut fields, body.organization_id);
    let (token, organization) = fields.finish(|| Some((token?, organization?)))?;
    let proof = match (body.code, body.recovery_code, body.webauthn) {
        (Some(code), None, None) => SecondFactorProof::Code(code),
        (None, Some(code), None) => SecondFactorProof::RecoveryCode(code),
        (None, None, Some(assertion)) => SecondFactorProof::Webauthn(assertion),
        _ => {
            return Err(ApiError::field(FieldError::invalid(
                "body",
                "code",
                "send exactly one of code, recovery_code and webauthn",
            )))
        }
    };
    let pair = state.mfa.verify(&token, proof, organization, &origin).await;
    observe::sign_in(&state, SignInMethod::SecondFactor, &pair);
    let pair = pair?;
    Ok(not_stored(HttpResponse::Ok()).json(TokenResponse::bearer(
        pair.access.access_token,
        pair.access.expires_in,
        Some(pair.refresh_token.expose().to_owned()),
    )))
}
