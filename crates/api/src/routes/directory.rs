//! `/api/v1/organizations/{id}/scim-tokens` and `/api/v1/organizations/{id}/scim/group-roles`:
//! what an organization's admins set up for directory sync. The SCIM protocol itself is
//! [`super::scim`]'s.

use std::collections::BTreeMap;

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::model::{
    DirectoryText, GroupRoles, RoleRef, ScimToken, ScimTokenId, ScimTokenName,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::organizations::PageResponse;
use crate::{
    error::{ApiError, ErrorBody, FieldError, ValidationErrorBody},
    extract::{Fields, InOrganization, RequestOrigin, ValidJson},
    query::Query,
    state::AppState,
};

/// A SCIM token, never its secret.
#[derive(Serialize, ToSchema)]
pub struct ScimTokenResponse {
    id: Uuid,
    organization_id: Uuid,
    #[schema(example = "Okta")]
    name: String,
    /// The secret's first characters, to tell tokens apart.
    #[schema(example = "ghsc_AbCdEfG")]
    prefix: String,
    /// The member who created it.
    created_by: Uuid,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    last_used_at: Option<OffsetDateTime>,
}

impl From<ScimToken> for ScimTokenResponse {
    fn from(token: ScimToken) -> Self {
        Self {
            id: token.id.as_uuid(),
            organization_id: token.organization_id.as_uuid(),
            name: token.name.as_ref().to_owned(),
            prefix: token.prefix,
            created_by: token.created_by.as_uuid(),
            created_at: token.created_at,
            last_used_at: token.last_used_at,
        }
    }
}

/// A SCIM token just created: its secret, shown this once, and where the identity provider
/// sends its requests.
#[derive(Serialize, ToSchema)]
pub struct CreatedScimTokenResponse {
    #[serde(flatten)]
    token: ScimTokenResponse,
    /// The bearer token the identity provider sends (`Authorization: Bearer ...`).
    #[schema(example = "ghsc_...")]
    token_secret: String,
    /// The SCIM base URL to give the identity provider: `{public_url}/scim/v2/{organization_id}`.
    scim_base_url: String,
}

/// The body of `POST /api/v1/organizations/{id}/scim-tokens`: `name` (required), a label
/// that tells the token apart, such as the identity provider's name.
#[derive(Deserialize, ToSchema)]
pub struct CreateScimTokenRequest {
    #[schema(example = "Okta")]
    name: Option<String>,
}

fn token_id(raw: &str) -> Result<ScimTokenId, ApiError> {
    Uuid::parse_str(raw)
        .map(ScimTokenId::from_uuid)
        .map_err(|_| ApiError::NotFound("SCIM token not found".into()))
}

/// Creates a SCIM token for the organization's identity provider: shown this once.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/scim-tokens", tag = "directory",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = CreateScimTokenRequest,
    responses(
        (status = 201, body = CreatedScimTokenResponse),
        (status = 403, body = ErrorBody, description = "Missing sso.manage, a plan without directory sync, or not a person"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn create_token(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<CreateScimTokenRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let name = fields.required("name", body.name, |s| ScimTokenName::parse(&s));
    let name = fields.finish(|| name)?;
    let created = state.directory.create_token(&actor, name, &origin).await?;
    let scim_base_url = format!(
        "{}/scim/v2/{}",
        state.public_url, created.token.organization_id
    );
    Ok(HttpResponse::Created().json(CreatedScimTokenResponse {
        token: created.token.into(),
        token_secret: created.secret.expose().to_owned(),
        scim_base_url,
    }))
}

/// The organization's SCIM tokens, oldest first (never their secrets).
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/scim-tokens", tag = "directory",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<ScimTokenResponse>),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list_tokens(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let tokens = state.directory.tokens(&actor, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(tokens, ScimTokenResponse::from)))
}

/// Revokes a SCIM token: the identity provider's requests with it are refused at once.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/scim-tokens/{token_id}", tag = "directory",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("token_id" = Uuid, Path)),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn revoke_token(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = token_id(&path.1)?;
    state.directory.revoke_token(&actor, id, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// `{group display name: role}`: the role the members of each directory group get.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(example = json!({"Engineering": "member", "IT Admins": "admin"}))]
pub struct GroupRolesBody(BTreeMap<String, String>);

impl From<GroupRoles> for GroupRolesBody {
    fn from(roles: GroupRoles) -> Self {
        Self(
            roles
                .iter()
                .map(|(group, role)| (group.as_str().to_owned(), role.to_string()))
                .collect(),
        )
    }
}

/// The organization's map from directory groups to roles.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/scim/group-roles", tag = "directory",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, body = GroupRolesBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn group_roles(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let roles = state.directory.group_roles(&actor).await?;
    Ok(HttpResponse::Ok().json(GroupRolesBody::from(roles)))
}

/// Replaces the map from directory groups to roles (`admin`, `member`, `viewer` or a custom
/// role; never `owner`); every provisioned member gets the role it now gives, at once.
#[utoipa::path(
    put, path = "/api/v1/organizations/{id}/scim/group-roles", tag = "directory",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = GroupRolesBody,
    responses(
        (status = 200, body = GroupRolesBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn save_group_roles(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<GroupRolesBody>,
) -> Result<HttpResponse, ApiError> {
    let mut entries = Vec::with_capacity(body.0.len());
    let mut errors = Vec::new();
    for (group, role) in body.0 {
        let parsed = DirectoryText::parse(&group)
            .map_err(|e| format!("group name {e}"))
            .and_then(|group| {
                role.parse::<RoleRef>()
                    .map(|role| (group, role))
                    .map_err(|e| e.to_string())
            });
        match parsed {
            Ok(entry) => entries.push(entry),
            Err(message) => errors.push(FieldError::invalid("body", &group, message)),
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    let roles = state
        .directory
        .save_group_roles(&actor, entries, &origin)
        .await?;
    Ok(HttpResponse::Ok().json(GroupRolesBody::from(roles)))
}
