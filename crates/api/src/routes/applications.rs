//! `/api/v1/organizations/{id}/applications`: the organization's OAuth clients. Every role may
//! read them; owners and admins (`applications.manage`) register, change, rotate and delete.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{
        Application, ApplicationChange, ApplicationId, ApplicationName, RedirectUri, RedirectUris,
    },
    service::ApplicationWithSecret,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::not_stored;
use super::organizations::PageResponse;
use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{Fields, InOrganization, ValidJson},
    query::Query,
    state::AppState,
};

/// An application (an OAuth client) of the organization, as every read and change returns
/// it; never its client secret.
#[derive(Serialize, ToSchema)]
pub struct ApplicationResponse {
    id: String,
    organization_id: String,
    #[schema(example = "Billing portal")]
    name: String,
    /// The application's public identifier in the OAuth flow.
    #[schema(example = "ghc_0193a1b2c3d4e5f60718293a4b5c6d7e")]
    client_id: String,
    #[schema(example = json!(["https://billing.example.com/oauth/callback"]))]
    redirect_uris: Vec<String>,
    is_active: bool,
    /// Whether every authorization request must carry a PKCE challenge (S256). When `false`,
    /// a request may leave PKCE out; a code issued with a challenge still needs its verifier.
    require_pkce: bool,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

impl From<Application> for ApplicationResponse {
    fn from(app: Application) -> Self {
        Self {
            id: app.id.to_string(),
            organization_id: app.organization_id.to_string(),
            name: app.name.as_str().to_owned(),
            client_id: app.client_id.as_str().to_owned(),
            redirect_uris: app
                .redirect_uris
                .iter()
                .map(|uri| uri.as_str().to_owned())
                .collect(),
            is_active: app.is_active,
            require_pkce: app.require_pkce,
            created_at: app.created_at,
            updated_at: app.updated_at,
        }
    }
}

/// An application with its `client_secret`: the answer of registering one and of rotating
/// its secret, the only times the secret is shown.
#[derive(Serialize, ToSchema)]
pub struct ApplicationWithSecretResponse {
    #[serde(flatten)]
    application: ApplicationResponse,
    /// Shown this once. Lost? Rotate it with `POST .../applications/{app_id}/secret`.
    #[schema(example = "ghcs_…")]
    client_secret: String,
}

impl From<ApplicationWithSecret> for ApplicationWithSecretResponse {
    fn from(created: ApplicationWithSecret) -> Self {
        Self {
            client_secret: created.client_secret.expose().to_owned(),
            application: created.application.into(),
        }
    }
}

fn application_id(raw: &str) -> Result<ApplicationId, ApiError> {
    raw.parse::<uuid::Uuid>()
        .map(ApplicationId::from_uuid)
        .map_err(|_| ApiError::NotFound("application not found".into()))
}

/// Each URI at `redirect_uris.<index>`, then the rules of the list as a whole.
fn redirect_uris(fields: &mut Fields, raw: Option<Vec<String>>) -> Option<RedirectUris> {
    let uris = fields.each("redirect_uris", raw, RedirectUris::MAX, |uri| {
        RedirectUri::parse(&uri)
    })?;
    RedirectUris::new(uris)
        .map_err(|e| fields.invalid("redirect_uris", format!("redirect_uris {e}")))
        .ok()
}

/// The body that registers an application: `name` and `redirect_uris` are required.
#[derive(Deserialize, ToSchema)]
pub struct CreateApplicationRequest {
    #[schema(example = "Billing portal")]
    name: Option<String>,
    /// 1 to 10 absolute URLs: https, or http on 127.0.0.1, [::1] or localhost; no fragment.
    #[schema(example = json!(["https://billing.example.com/oauth/callback"]))]
    redirect_uris: Option<Vec<String>>,
    /// Require a PKCE challenge (S256) on every authorization request; `false` when absent.
    #[schema(default = false)]
    require_pkce: Option<bool>,
}

/// Registers an application. The response carries `client_secret`, shown this once.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/applications", tag = "applications",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path)),
    request_body = CreateApplicationRequest,
    responses(
        (status = 201, body = ApplicationWithSecretResponse),
        (status = 403, body = ErrorBody, description = "Missing applications.manage"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<CreateApplicationRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let name = fields.required("name", body.name, |n| ApplicationName::parse(&n));
    let uris = redirect_uris(&mut fields, body.redirect_uris);
    let (name, uris) = fields.finish(|| Some((name?, uris?)))?;
    let created = state
        .applications
        .create(
            &actor,
            name,
            uris,
            body.require_pkce.unwrap_or(false),
            &origin,
        )
        .await?;
    Ok(not_stored(HttpResponse::Created()).json(ApplicationWithSecretResponse::from(created)))
}

/// The organization's applications, newest first. No secrets.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/applications", tag = "applications",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<ApplicationResponse>),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let apps = state.applications.list(&actor, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(apps, ApplicationResponse::from)))
}

/// One application. No secret.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/applications/{app_id}", tag = "applications",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("app_id" = String, Path)),
    responses((status = 200, body = ApplicationResponse), (status = 404, body = ErrorBody))
)]
pub async fn get(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = application_id(&path.1)?;
    let app = state.applications.get(&actor, id).await?;
    Ok(HttpResponse::Ok().json(ApplicationResponse::from(app)))
}

/// The body that changes an application: every field is optional, and an absent one stays
/// as it is. `redirect_uris` replaces the whole list.
#[derive(Deserialize, ToSchema)]
pub struct UpdateApplicationRequest {
    name: Option<String>,
    redirect_uris: Option<Vec<String>>,
    is_active: Option<bool>,
    /// Require a PKCE challenge (S256) on every authorization request, or stop requiring one.
    require_pkce: Option<bool>,
}

/// Changes the name, the redirect URIs (the whole list), `is_active` or `require_pkce`; absent
/// fields stay.
#[utoipa::path(
    patch, path = "/api/v1/organizations/{id}/applications/{app_id}", tag = "applications",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("app_id" = String, Path)),
    request_body = UpdateApplicationRequest,
    responses(
        (status = 200, body = ApplicationResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ValidJson(body): ValidJson<UpdateApplicationRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = application_id(&path.1)?;
    let mut fields = Fields::new();
    let name = fields.optional("name", body.name, |n| ApplicationName::parse(&n));
    let uris = match body.redirect_uris {
        Some(raw) => redirect_uris(&mut fields, Some(raw)).map(Some),
        None => Some(None),
    };
    let change = fields.finish(|| {
        Some(ApplicationChange {
            name: name?,
            redirect_uris: uris?,
            is_active: body.is_active,
            require_pkce: body.require_pkce,
        })
    })?;
    let app = state
        .applications
        .update(&actor, id, change, &origin)
        .await?;
    Ok(HttpResponse::Ok().json(ApplicationResponse::from(app)))
}

/// Replaces the client secret; the old one stops working at once. The new one is shown once.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/applications/{app_id}/secret", tag = "applications",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("app_id" = String, Path)),
    responses(
        (status = 200, body = ApplicationWithSecretResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn rotate_secret(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = application_id(&path.1)?;
    let rotated = state
        .applications
        .rotate_secret(&actor, id, &origin)
        .await?;
    Ok(not_stored(HttpResponse::Ok()).json(ApplicationWithSecretResponse::from(rotated)))
}

/// Deletes the application; its client id and secret stop working.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/applications/{app_id}", tag = "applications",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("app_id" = String, Path)),
    responses(
        (status = 204),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = application_id(&path.1)?;
    state.applications.delete(&actor, id, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}
