//! `/api/v1/api-keys`.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::model::{ApiKey, ApiKeyId, ApiKeyName, OrganizationId};
use gatehouse_domain::service::CreatedApiKey;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::not_stored;
use super::organizations::PageResponse;
use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{Authenticated, Fields, ValidJson},
    query::Query,
    state::AppState,
};

/// The body of `POST /api/v1/api-keys`: `name` (a label for the key) and `organization_id`
/// (a UUID of an organization the caller belongs to, where the key will act), both required.
#[derive(Deserialize, ToSchema)]
pub struct CreateApiKeyRequest {
    #[schema(example = "CI deploys")]
    name: Option<String>,
    organization_id: Option<String>,
}

/// The create response: `key` is shown this once.
#[derive(Serialize, ToSchema)]
pub struct CreatedApiKeyResponse {
    id: Uuid,
    name: String,
    key: String,
    prefix: String,
    organization_id: Uuid,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
}

impl From<CreatedApiKey> for CreatedApiKeyResponse {
    fn from(created: CreatedApiKey) -> Self {
        Self {
            id: created.id.as_uuid(),
            name: created.name.as_ref().to_owned(),
            key: created.key,
            prefix: created.prefix,
            organization_id: created.organization_id.as_uuid(),
            created_at: created.created_at,
        }
    }
}

/// An API key as `GET /api/v1/api-keys` lists it: its `prefix` identifies it, but the key
/// itself is never returned after creation.
#[derive(Serialize, ToSchema)]
pub struct ApiKeyResponse {
    id: Uuid,
    name: String,
    prefix: String,
    organization_id: Uuid,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    last_used_at: Option<OffsetDateTime>,
}

impl From<ApiKey> for ApiKeyResponse {
    fn from(key: ApiKey) -> Self {
        Self {
            id: key.id.as_uuid(),
            name: key.name.as_ref().to_owned(),
            prefix: key.prefix,
            organization_id: key.organization_id.as_uuid(),
            created_at: key.created_at,
            last_used_at: key.last_used_at,
        }
    }
}

fn parse_uuid(raw: String) -> Result<Uuid, &'static str> {
    Uuid::parse_str(raw.trim()).map_err(|_| "must be a UUID")
}

/// Creates an API key acting as the caller inside one of their organizations.
#[utoipa::path(
    post, path = "/api/v1/api-keys", tag = "api-keys",
    security(("bearer" = [])),
    request_body = CreateApiKeyRequest,
    responses(
        (status = 201, body = CreatedApiKeyResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Called with an API key (keys are managed by a signed-in user), or by a viewer of the organization (viewers only read)"),
        (status = 404, body = ErrorBody, description = "Not a member of the organization"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    ValidJson(body): ValidJson<CreateApiKeyRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let name = fields.required("name", body.name, |s| ApiKeyName::parse(&s));
    let organization = fields.required("organization_id", body.organization_id, parse_uuid);
    let (name, organization) = fields.finish(|| Some((name?, organization?)))?;
    let created = state
        .api_keys
        .create(
            &principal,
            name,
            OrganizationId::from_uuid(organization),
            &origin,
        )
        .await?;
    Ok(not_stored(HttpResponse::Created()).json(CreatedApiKeyResponse::from(created)))
}

/// The caller's API keys, newest first; never the keys themselves.
#[utoipa::path(
    get, path = "/api/v1/api-keys", tag = "api-keys",
    security(("bearer" = [])),
    params(("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<ApiKeyResponse>),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Called with an API key: keys are managed by a signed-in user"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let keys = state.api_keys.list(&principal, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(keys, ApiKeyResponse::from)))
}

/// Deletes one of the caller's API keys; it stops working at once.
#[utoipa::path(
    delete, path = "/api/v1/api-keys/{id}", tag = "api-keys",
    security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Called with an API key: keys are managed by a signed-in user"),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = Uuid::parse_str(&path).map_err(|_| ApiError::NotFound("API key not found".into()))?;
    state
        .api_keys
        .delete(&principal, ApiKeyId::from_uuid(id), &origin)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}
