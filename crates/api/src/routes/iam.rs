//! `/api/v1/organizations/{id}/service-accounts` and `/api/v1/organizations/{id}/api-keys`: an
//! organization's service accounts and their keys, and every key that acts in it.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::model::{
    custom_permissions, CustomRole, ListedRole, Page, PermissionSet, RoleDescription, RoleKey,
    RoleName,
};
use gatehouse_domain::model::{
    ApiKey, ApiKeyId, ApiKeyName, Permission, Role, RoleRef, ServiceAccount, ServiceAccountId,
    ServiceAccountName,
};
use gatehouse_domain::ports::RoleChange;
use gatehouse_domain::service::{NewRole, ServiceAccountChange};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::api_keys::CreatedApiKeyResponse;
use super::not_stored;
use super::organizations::PageResponse;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{AuthenticatedAgent, Fields, InOrganization, RequestOrigin, ValidJson},
    query::Query,
    state::AppState,
};

/// A service account of the organization: a non-human member with a role, acting through
/// its API keys.
#[derive(Serialize, ToSchema)]
pub struct ServiceAccountResponse {
    id: Uuid,
    organization_id: Uuid,
    #[schema(example = "CI deploys")]
    name: String,
    /// `admin`, `member` or `viewer`.
    #[schema(example = "member")]
    role: String,
    /// The member who created it.
    created_by: Uuid,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

impl From<ServiceAccount> for ServiceAccountResponse {
    fn from(account: ServiceAccount) -> Self {
        Self {
            id: account.id.as_uuid(),
            organization_id: account.organization_id.as_uuid(),
            name: account.name.as_ref().to_owned(),
            role: account.role.to_string(),
            created_by: account.created_by.as_uuid(),
            created_at: account.created_at,
            updated_at: account.updated_at,
        }
    }
}

/// The body of `POST /api/v1/organizations/{id}/service-accounts`: `name` and `role`, both
/// required.
#[derive(Deserialize, ToSchema)]
pub struct CreateServiceAccountRequest {
    #[schema(example = "CI deploys")]
    name: Option<String>,
    /// `admin`, `member` or `viewer`, no higher than the caller's own.
    #[schema(example = "member")]
    role: Option<String>,
}

/// The body of `PATCH /api/v1/organizations/{id}/service-accounts/{sa_id}`: a new `name`, a
/// new `role`, or both; an absent field stays as it is.
#[derive(Deserialize, ToSchema)]
pub struct UpdateServiceAccountRequest {
    name: Option<String>,
    /// `admin`, `member` or `viewer`, no higher than the caller's own.
    role: Option<String>,
}

/// The body of `POST /api/v1/organizations/{id}/service-accounts/{sa_id}/keys`: the key's
/// `name` (required), a label that tells it apart.
#[derive(Deserialize, ToSchema)]
pub struct CreateServiceAccountKeyRequest {
    #[schema(example = "deploy pipeline")]
    name: Option<String>,
}

/// A key that acts in the organization, never its secret: a member's (`user_id`) or a service
/// account's (`service_account_id`).
#[derive(Serialize, ToSchema)]
pub struct OrganizationApiKeyResponse {
    id: Uuid,
    name: String,
    prefix: String,
    organization_id: Uuid,
    /// The member the key acts as; null for a service account's key.
    user_id: Option<Uuid>,
    /// The service account the key acts as; null for a member's key.
    service_account_id: Option<Uuid>,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    last_used_at: Option<OffsetDateTime>,
}

impl From<ApiKey> for OrganizationApiKeyResponse {
    fn from(key: ApiKey) -> Self {
        Self {
            id: key.id.as_uuid(),
            name: key.name.as_ref().to_owned(),
            prefix: key.prefix,
            organization_id: key.organization_id.as_uuid(),
            user_id: key.holder.user_id().map(|id| id.as_uuid()),
            service_account_id: key.holder.service_account_id().map(|id| id.as_uuid()),
            created_at: key.created_at,
            last_used_at: key.last_used_at,
        }
    }
}

fn service_account_id(raw: &str) -> Result<ServiceAccountId, ApiError> {
    Uuid::parse_str(raw)
        .map(ServiceAccountId::from_uuid)
        .map_err(|_| ApiError::NotFound("service account not found".into()))
}

/// Creates a service account: a non-human member with a role, acting through its keys.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/service-accounts", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = CreateServiceAccountRequest,
    responses(
        (status = 201, body = ServiceAccountResponse),
        (status = 403, body = ErrorBody, description = "Missing service_accounts.manage, a role above the caller's, or not a person"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn create_service_account(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<CreateServiceAccountRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let name = fields.required("name", body.name, |s| ServiceAccountName::parse(&s));
    let role = fields.required("role", body.role, |s| s.parse::<RoleRef>());
    let (name, role) = fields.finish(|| Some((name?, role?)))?;
    let account = state
        .iam
        .create_service_account(&actor, name, role, &origin)
        .await?;
    Ok(HttpResponse::Created().json(ServiceAccountResponse::from(account)))
}

/// The organization's service accounts, oldest first.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/service-accounts", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<ServiceAccountResponse>),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list_service_accounts(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let accounts = state.iam.service_accounts(&actor, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(
        accounts,
        ServiceAccountResponse::from,
    )))
}

/// One service account.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/service-accounts/{sa_id}", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("sa_id" = Uuid, Path)),
    responses(
        (status = 200, body = ServiceAccountResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get_service_account(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = service_account_id(&path.1)?;
    let account = state.iam.service_account(&actor, id).await?;
    Ok(HttpResponse::Ok().json(ServiceAccountResponse::from(account)))
}

/// Renames a service account or changes its role; its keys act with the new role at once.
#[utoipa::path(
    patch, path = "/api/v1/organizations/{id}/service-accounts/{sa_id}", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("sa_id" = Uuid, Path)),
    request_body = UpdateServiceAccountRequest,
    responses(
        (status = 200, body = ServiceAccountResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn update_service_account(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ValidJson(body): ValidJson<UpdateServiceAccountRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = service_account_id(&path.1)?;
    let mut fields = Fields::new();
    let name = fields.optional("name", body.name, |s| ServiceAccountName::parse(&s));
    let role = fields.optional("role", body.role, |s| s.parse::<RoleRef>());
    let (name, role) = fields.finish(|| Some((name?, role?)))?;
    let account = state
        .iam
        .update_service_account(&actor, id, ServiceAccountChange { name, role }, &origin)
        .await?;
    Ok(HttpResponse::Ok().json(ServiceAccountResponse::from(account)))
}

/// Deletes a service account: every key of it stops at once.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/service-accounts/{sa_id}", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("sa_id" = Uuid, Path)),
    responses(
        (status = 204, description = "Deleted, with its keys"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn delete_service_account(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = service_account_id(&path.1)?;
    state
        .iam
        .delete_service_account(&actor, id, &origin)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Creates a key for a service account: shown this once; it acts as the account (with
/// `X-API-Key` and `X-Organization-ID`), whoever made it.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/service-accounts/{sa_id}/keys", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("sa_id" = Uuid, Path)),
    request_body = CreateServiceAccountKeyRequest,
    responses(
        (status = 201, body = CreatedApiKeyResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn create_service_account_key(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ValidJson(body): ValidJson<CreateServiceAccountKeyRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = service_account_id(&path.1)?;
    let mut fields = Fields::new();
    let name = fields.required("name", body.name, |s| ApiKeyName::parse(&s));
    let name = fields.finish(|| name)?;
    let created = state
        .iam
        .create_service_account_key(&actor, id, name, &origin)
        .await?;
    Ok(not_stored(HttpResponse::Created()).json(CreatedApiKeyResponse::from(created)))
}

/// Every key that acts in the organization, members' and service accounts', newest first;
/// never the keys themselves.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/api-keys", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(
        ("id" = Uuid, Path),
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
    ),
    responses(
        (status = 200, body = PageResponse<OrganizationApiKeyResponse>),
        (status = 403, body = ErrorBody, description = "Missing api_keys.manage"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn organization_keys(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let keys = state.iam.organization_keys(&actor, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(
        keys,
        OrganizationApiKeyResponse::from,
    )))
}

/// Revokes any key that acts in the organization: it stops at once.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/api-keys/{key_id}", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("key_id" = Uuid, Path)),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, body = ErrorBody, description = "Missing api_keys.manage"),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn revoke_organization_key(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = Uuid::parse_str(&path.1)
        .map(ApiKeyId::from_uuid)
        .map_err(|_| ApiError::NotFound("API key not found".into()))?;
    state.iam.revoke_key(&actor, id, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// One entry of the permission catalogue (`GET /api/v1/iam/permissions`): a dotted
/// permission, what it lets one do, and who holds it.
#[derive(Serialize, ToSchema)]
pub struct PermissionResponse {
    /// The dotted name, as `403` bodies and `org_permissions` name it.
    #[schema(example = "organization.members.read")]
    name: &'static str,
    description: &'static str,
    /// The built-in roles that hold it.
    #[schema(example = json!(["owner", "admin", "member", "viewer"]))]
    roles: Vec<&'static str>,
    /// Held by the owner alone: no other role, built-in or custom, holds it.
    owner_only: bool,
}

/// The permission catalogue: every dotted permission, what it lets one do, and the built-in
/// roles that hold it. A fixed list, paged in memory.
#[utoipa::path(
    get, path = "/api/v1/iam/permissions", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<PermissionResponse>),
        (status = 401, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn permissions(
    req: HttpRequest,
    _caller: AuthenticatedAgent,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let catalogue: Vec<PermissionResponse> = Permission::ALL
        .into_iter()
        .map(|permission| PermissionResponse {
            name: permission.as_str(),
            description: permission.description(),
            roles: Role::ALL
                .into_iter()
                .filter(|role| role.grants(permission))
                .map(Role::as_str)
                .collect(),
            owner_only: Permission::OWNER_ONLY.contains(&permission),
        })
        .collect();
    Ok(HttpResponse::Ok().json(PageResponse::from_page(
        Page::of_all(catalogue, page),
        |permission| permission,
    )))
}

/// A role as the organization has it: one of the four built-in roles (read-only, `built_in`),
/// or one of its custom roles.
#[derive(Serialize, ToSchema)]
pub struct RoleResponse {
    /// The name a member, an invitation or a service account is given (`billing-manager`).
    #[schema(example = "auditor")]
    key: String,
    #[schema(example = "Auditor")]
    name: String,
    description: String,
    /// The dotted permissions it grants, in the catalogue's order.
    #[schema(example = json!(["organization.read", "organization.members.read", "audit.read"]))]
    permissions: Vec<&'static str>,
    /// One of the four built-in roles: read-only.
    built_in: bool,
    /// Null for a built-in role.
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    created_at: Option<OffsetDateTime>,
    /// Null for a built-in role.
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    updated_at: Option<OffsetDateTime>,
}

impl RoleResponse {
    fn built_in(role: Role) -> Self {
        let description = match role {
            Role::Owner => "Full control, deleting and handing over the organization included",
            Role::Admin => {
                "Manages members, applications, settings, policies, webhooks, branding, SSO, service accounts and keys"
            }
            Role::Member => "Reads the organization and its members, uses its applications, creates API keys",
            Role::Viewer => "Reads the organization and its members; read-only",
        };
        Self {
            key: role.as_str().to_owned(),
            name: role.as_str().to_owned(),
            description: description.to_owned(),
            permissions: PermissionSet::of_role(role)
                .iter()
                .map(Permission::as_str)
                .collect(),
            built_in: true,
            created_at: None,
            updated_at: None,
        }
    }
}

impl From<CustomRole> for RoleResponse {
    fn from(role: CustomRole) -> Self {
        Self {
            key: role.key.as_ref().to_owned(),
            name: role.name.as_ref().to_owned(),
            description: role.description.as_ref().to_owned(),
            permissions: role.permissions.iter().map(Permission::as_str).collect(),
            built_in: false,
            created_at: Some(role.created_at),
            updated_at: Some(role.updated_at),
        }
    }
}

/// The body of `POST /api/v1/organizations/{id}/roles`: `key`, `name` and `permissions` are
/// required, `description` is optional.
#[derive(Deserialize, ToSchema)]
pub struct CreateRoleRequest {
    /// Lowercase letters, digits and single hyphens, 2 to 40 characters, not a built-in role's
    /// name.
    #[schema(example = "auditor")]
    key: Option<String>,
    #[schema(example = "Auditor")]
    name: Option<String>,
    #[schema(example = "Reads members and the audit log")]
    description: Option<String>,
    /// Dotted permissions from `GET /api/v1/iam/permissions`, none of the owner's own.
    #[schema(example = json!(["organization.read", "organization.members.read", "audit.read"]))]
    permissions: Option<Vec<String>>,
}

/// The body of `PATCH /api/v1/organizations/{id}/roles/{key}`: every field is optional, and
/// an absent one stays as it is. The key cannot change.
#[derive(Deserialize, ToSchema)]
pub struct UpdateRoleRequest {
    name: Option<String>,
    description: Option<String>,
    /// The whole new set of dotted permissions.
    permissions: Option<Vec<String>>,
}

/// The custom role a path names; a built-in role's name is refused (they are read-only).
fn role_key(raw: &str) -> Result<RoleKey, ApiError> {
    if raw.parse::<Role>().is_ok() {
        return Err(ApiError::Forbidden(
            "the built-in roles are read-only: define a custom role instead".into(),
        ));
    }
    RoleKey::parse(raw).map_err(|_| ApiError::NotFound("role not found".into()))
}

fn permission_set(names: Vec<String>) -> Result<PermissionSet, String> {
    custom_permissions(names.iter().map(String::as_str))
}

/// The organization's roles: the four built-in ones, then its custom roles by key.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/roles", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<RoleResponse>),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list_roles(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let roles = state.iam.roles(&actor, page).await?;
    Ok(
        HttpResponse::Ok().json(PageResponse::from_page(roles, |role| match role {
            ListedRole::BuiltIn(role) => RoleResponse::built_in(role),
            ListedRole::Custom(role) => RoleResponse::from(role),
        })),
    )
}

/// Defines a custom role (business and enterprise plans): `roles.manage`, and no permission
/// the caller's own role does not hold.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/roles", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = CreateRoleRequest,
    responses(
        (status = 201, body = RoleResponse),
        (status = 403, body = ErrorBody, description = "Missing roles.manage, the plan, or a permission the caller lacks"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "The key is taken"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn create_role(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<CreateRoleRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let key = fields.required("key", body.key, |s| RoleKey::parse(&s));
    let name = fields.required("name", body.name, |s| RoleName::parse(&s));
    let description = fields.optional("description", body.description, |s| {
        RoleDescription::parse(&s)
    });
    let permissions = fields.required("permissions", body.permissions, permission_set);
    let new = fields.finish(|| {
        Some(NewRole {
            key: key?,
            name: name?,
            description: description?.unwrap_or_default(),
            permissions: permissions?,
        })
    })?;
    let role = state.iam.create_role(&actor, new, &origin).await?;
    Ok(HttpResponse::Created().json(RoleResponse::from(role)))
}

/// One custom role.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/roles/{key}", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("key" = String, Path)),
    responses(
        (status = 200, body = RoleResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get_role(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    if let Ok(role) = path.1.parse::<Role>() {
        return Ok(HttpResponse::Ok().json(RoleResponse::built_in(role)));
    }
    let key = role_key(&path.1)?;
    let role = state.iam.role(&actor, &key).await?;
    Ok(HttpResponse::Ok().json(RoleResponse::from(role)))
}

/// Changes a custom role: its holders act with what it grants from their next request.
#[utoipa::path(
    patch, path = "/api/v1/organizations/{id}/roles/{key}", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("key" = String, Path)),
    request_body = UpdateRoleRequest,
    responses(
        (status = 200, body = RoleResponse),
        (status = 403, body = ErrorBody, description = "A built-in role, missing roles.manage, the plan, or a permission the caller lacks"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn update_role(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ValidJson(body): ValidJson<UpdateRoleRequest>,
) -> Result<HttpResponse, ApiError> {
    let key = role_key(&path.1)?;
    let mut fields = Fields::new();
    let name = fields.optional("name", body.name, |s| RoleName::parse(&s));
    let description = fields.optional("description", body.description, |s| {
        RoleDescription::parse(&s)
    });
    let permissions = fields.optional("permissions", body.permissions, permission_set);
    let change = fields.finish(|| {
        Some(RoleChange {
            name: name?,
            description: description?,
            permissions: permissions?,
        })
    })?;
    let role = state.iam.update_role(&actor, &key, change, &origin).await?;
    Ok(HttpResponse::Ok().json(RoleResponse::from(role)))
}

/// Deletes a custom role nobody holds.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/roles/{key}", tag = "iam",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("key" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Members, pending invitations or service accounts hold it"),
    )
)]
pub async fn delete_role(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let key = role_key(&path.1)?;
    state.iam.delete_role(&actor, &key, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}
