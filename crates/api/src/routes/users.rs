//! `/api/v1/users/me`.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{FullName, User},
    service::ProfileChange,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::organizations::PageResponse;
use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{Authenticated, Fields, ValidJson},
    query::Query,
    state::AppState,
};

/// The caller's profile, as `GET` and `PATCH /api/v1/users/me` return it.
#[derive(Serialize, ToSchema)]
pub struct UserResponse {
    id: uuid::Uuid,
    email: String,
    full_name: String,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
    /// Whether the user proved the address is theirs (a mailed link, or single sign-on).
    email_verified: bool,
}

impl From<User> for UserResponse {
    fn from(user: User) -> Self {
        Self {
            id: user.id.as_uuid(),
            email: user.email.as_ref().to_owned(),
            full_name: user.full_name.as_ref().to_owned(),
            created_at: user.created_at,
            updated_at: user.updated_at,
            email_verified: user.email_verified,
        }
    }
}

/// The caller's profile.
#[utoipa::path(
    get, path = "/api/v1/users/me", tag = "users",
    security(("bearer" = []), ("api_key" = [])),
    responses((status = 200, body = UserResponse), (status = 401, body = ErrorBody))
)]
pub async fn me(
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let user = state
        .auth
        .me(&principal)
        .await?
        .ok_or_else(|| ApiError::Unauthorized("the user no longer exists".into()))?;
    Ok(HttpResponse::Ok().json(UserResponse::from(user)))
}

/// The body of `PATCH /api/v1/users/me`: a new `full_name`; absent, it stays as it is.
#[derive(Deserialize, ToSchema)]
pub struct UpdateMeRequest {
    full_name: Option<String>,
}

/// Changes the caller's profile; only the fields sent change. Emits `user.updated`.
#[utoipa::path(
    patch, path = "/api/v1/users/me", tag = "users",
    security(("bearer" = []), ("api_key" = [])),
    request_body = UpdateMeRequest,
    responses(
        (status = 200, body = UserResponse),
        (status = 401, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn update_me(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    ValidJson(body): ValidJson<UpdateMeRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let full_name = fields.optional("full_name", body.full_name, |s| FullName::parse(&s));
    let change = fields.finish(|| {
        Some(ProfileChange {
            full_name: full_name?,
        })
    })?;
    let user = state.auth.update_me(&principal, change, &origin).await?;
    Ok(HttpResponse::Ok().json(UserResponse::from(user)))
}

/// Deletes the caller's account, personal workspace and memberships. Refused (409) while the
/// caller owns a team that has other members. Emits `user.deleted`.
#[utoipa::path(
    delete, path = "/api/v1/users/me", tag = "users",
    security(("bearer" = [])),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Owns a team with other members"),
    )
)]
pub async fn delete_me(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    state.members.delete_me(&principal, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// A consent the caller gave an application.
#[derive(Serialize, ToSchema)]
pub struct ConsentResponse {
    /// The application's client id.
    client_id: String,
    /// The application's name.
    application_name: String,
    /// The API scopes consented to.
    #[schema(example = "org:read members:read")]
    scope: String,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    granted_at: OffsetDateTime,
}

/// The consents the caller gave applications on the consent page, newest first.
#[utoipa::path(
    get, path = "/api/v1/users/me/consents", tag = "users",
    security(("bearer" = []), ("api_key" = [])),
    params(("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<ConsentResponse>),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "A token issued to an application"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn consents(
    req: HttpRequest,
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let consents = state.oauth.consents(&principal, page).await?;
    Ok(
        HttpResponse::Ok().json(PageResponse::from_page(consents, |consent| {
            ConsentResponse {
                client_id: consent.client_id.as_str().to_owned(),
                application_name: consent.application_name.as_str().to_owned(),
                scope: consent.scopes.to_string(),
                granted_at: consent.granted_at,
            }
        })),
    )
}

/// Takes back the caller's consent to an application: the application's sessions of the
/// caller end at once, and its next authorization asks again.
#[utoipa::path(
    delete, path = "/api/v1/users/me/consents/{client_id}", tag = "users",
    security(("bearer" = []), ("api_key" = [])),
    params(("client_id" = String, Path, description = "The application's client id")),
    responses(
        (status = 204, description = "Revoked"),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "A token issued to an application"),
        (status = 404, body = ErrorBody, description = "No consent to that application"),
    )
)]
pub async fn revoke_consent(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    client_id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state
        .oauth
        .revoke_consent(&principal, &client_id, &origin)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
