//! Health: `/livez`, `/readyz` and the credential check `/api/v1/health`.

use actix_web::{web, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::not_stored;
use crate::{
    error::{ApiError, ErrorBody},
    extract::InOrganization,
    state::AppState,
};

/// The `200` of `/livez` and `/readyz`: `{"status": "ok"}`.
#[derive(Serialize, ToSchema)]
pub struct Status {
    #[schema(example = "ok")]
    status: &'static str,
}

/// The process is up.
#[utoipa::path(get, path = "/livez", tag = "health", responses((status = 200, body = Status)))]
pub async fn livez() -> HttpResponse {
    HttpResponse::Ok().json(Status { status: "ok" })
}

/// The process can reach its store (one round trip, never cached) and is not stopping: a
/// replica told to stop (SIGTERM) answers `503` while it drains.
#[utoipa::path(
    get, path = "/readyz", tag = "health",
    responses((status = 200, body = Status), (status = 503, body = ErrorBody))
)]
pub async fn readyz(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    if state.stopping.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ApiError::Unavailable(
            "this replica is stopping: send requests to another".to_owned(),
        ));
    }
    state
        .health
        .ping()
        .await
        .map_err(|e| ApiError::StoreUnavailable(Box::new(e)))?;
    Ok(not_stored(HttpResponse::Ok()).json(Status { status: "ok" }))
}

/// The `200` of `GET /api/v1/health`: the credentials work, and act in the organization
/// named by `organization_id`.
#[derive(Serialize, ToSchema)]
pub struct CredentialHealth {
    #[schema(example = "ok")]
    status: &'static str,
    organization_id: uuid::Uuid,
}

/// Tests credentials: an API key (or Bearer token) with `X-Organization-ID`.
#[utoipa::path(
    get, path = "/api/v1/health", tag = "health",
    security(("api_key" = [], "organization" = []), ("bearer" = [], "organization" = [])),
    responses(
        (status = 200, body = CredentialHealth),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "Not a member of the organization"),
    )
)]
pub async fn health(InOrganization(actor): InOrganization) -> HttpResponse {
    HttpResponse::Ok().json(CredentialHealth {
        status: "ok",
        organization_id: actor.organization_id().as_uuid(),
    })
}
