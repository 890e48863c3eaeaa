//! `/api/v1/organizations`.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::model::{
    DefaultRole, Organization, OrganizationChange, OrganizationFilter, OrganizationName,
    OrganizationType, Page, Slug,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{Authenticated, Fields, InOrganization, ValidJson},
    query::Query,
    state::AppState,
};

/// An organization's `settings`: the role new members get, and whether members who are not
/// admins may invite.
#[derive(Serialize, ToSchema)]
pub struct SettingsResponse {
    #[schema(example = "member")]
    default_role: &'static str,
    allow_member_invite: bool,
}

/// An organization, as the listing, the detail, creation and change return it, with its
/// settings and its counts of members and applications.
#[derive(Serialize, ToSchema)]
pub struct OrganizationResponse {
    id: Uuid,
    name: String,
    slug: String,
    #[serde(rename = "type")]
    #[schema(example = "team")]
    kind: &'static str,
    #[schema(example = "free")]
    plan: &'static str,
    is_active: bool,
    settings: SettingsResponse,
    member_count: u64,
    application_count: u64,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

impl From<Organization> for OrganizationResponse {
    fn from(org: Organization) -> Self {
        Self {
            id: org.id.as_uuid(),
            name: org.name.as_ref().to_owned(),
            slug: org.slug.as_ref().to_owned(),
            kind: org.kind.as_str(),
            plan: org.plan.as_str(),
            is_active: org.is_active,
            settings: SettingsResponse {
                default_role: org.settings.default_role.role().as_str(),
                allow_member_invite: org.settings.allow_member_invite,
            },
            member_count: org.member_count,
            application_count: org.application_count,
            created_at: org.created_at,
            updated_at: org.updated_at,
        }
    }
}

/// The pagination envelope.
#[derive(Serialize, ToSchema)]
pub struct PageResponse<T: ToSchema> {
    items: Vec<T>,
    total: u64,
    page: u32,
    page_size: u32,
    has_next: bool,
    has_prev: bool,
}

impl<T: ToSchema> PageResponse<T> {
    /// The envelope of one page of the domain's results, each item shaped by `f`.
    pub fn from_page<D>(page: Page<D>, f: impl FnMut(D) -> T) -> Self {
        let page = page.map(f);
        Self {
            total: page.total(),
            page: page.page(),
            page_size: page.page_size(),
            has_next: page.has_next(),
            has_prev: page.has_prev(),
            items: page.into_items(),
        }
    }
}

/// The caller's organizations.
#[utoipa::path(
    get, path = "/api/v1/organizations", tag = "organizations",
    security(("bearer" = []), ("api_key" = [])),
    params(
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
        ("type" = Option<String>, Query, description = "personal or team"),
        ("search" = Option<String>, Query, description = "case-insensitive part of the name"),
    ),
    responses(
        (status = 200, body = PageResponse<OrganizationResponse>),
        (status = 401, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let query = Query::of(&req)?;
    let page = query.page()?;
    let filter = OrganizationFilter {
        kind: query.parse("type", |raw| raw.parse::<OrganizationType>())?,
        search: query.search()?,
    };
    let organizations = state.organizations.list(&principal, filter, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(
        organizations,
        OrganizationResponse::from,
    )))
}

/// The body of `POST /api/v1/organizations`: `name` (required), `slug` (generated from the
/// name when absent) and `type` (`team` when absent, or `personal`).
#[derive(Deserialize, ToSchema)]
pub struct CreateOrganizationRequest {
    #[schema(example = "Acme Research")]
    name: Option<String>,
    #[schema(example = "acme-research")]
    slug: Option<String>,
    #[serde(rename = "type")]
    #[schema(example = "team")]
    kind: Option<String>,
}

/// Creates an organization; the caller becomes its owner.
#[utoipa::path(
    post, path = "/api/v1/organizations", tag = "organizations",
    security(("bearer" = [])),
    request_body = CreateOrganizationRequest,
    responses(
        (status = 201, body = OrganizationResponse),
        (status = 401, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Slug taken"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    ValidJson(body): ValidJson<CreateOrganizationRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let name = fields.required("name", body.name, |s| OrganizationName::parse(&s));
    let slug = fields.optional("slug", body.slug, |s| Slug::parse(&s));
    let kind = fields.optional("type", body.kind, |s| s.parse::<OrganizationType>());
    let (name, slug, kind) = fields.finish(|| Some((name?, slug?, kind?)))?;
    let organization = state
        .organizations
        .create(
            &principal,
            name,
            slug,
            kind.unwrap_or(OrganizationType::Team),
            &origin,
        )
        .await?;
    Ok(HttpResponse::Created().json(OrganizationResponse::from(organization)))
}

/// The organization with settings and counts.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}", tag = "organizations",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, body = OrganizationResponse),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let organization = state.organizations.get(&actor).await?;
    Ok(HttpResponse::Ok().json(OrganizationResponse::from(organization)))
}

/// The `settings` of an organization's change: `default_role` (`member` or `viewer`) and
/// `allow_member_invite`; an absent field stays as it is.
#[derive(Deserialize, ToSchema)]
pub struct SettingsRequest {
    #[schema(example = "viewer")]
    default_role: Option<String>,
    allow_member_invite: Option<bool>,
}

/// The body of `PATCH /api/v1/organizations/{id}`: only the fields sent change.
#[derive(Deserialize, ToSchema)]
pub struct UpdateOrganizationRequest {
    name: Option<String>,
    slug: Option<String>,
    settings: Option<SettingsRequest>,
}

/// Changes the fields sent; the others stay.
#[utoipa::path(
    patch, path = "/api/v1/organizations/{id}", tag = "organizations",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = UpdateOrganizationRequest,
    responses(
        (status = 200, body = OrganizationResponse),
        (status = 403, body = ErrorBody, description = "Missing organization.update"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Slug taken"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<UpdateOrganizationRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let name = fields.optional("name", body.name, |s| OrganizationName::parse(&s));
    let slug = fields.optional("slug", body.slug, |s| Slug::parse(&s));
    let (default_role, allow_member_invite) = match body.settings {
        Some(settings) => (
            fields.optional("settings.default_role", settings.default_role, |s| {
                DefaultRole::parse(&s)
            }),
            Some(settings.allow_member_invite),
        ),
        None => (Some(None), Some(None)),
    };
    let change = fields.finish(|| {
        Some(OrganizationChange {
            name: name?,
            slug: slug?,
            default_role: default_role?,
            allow_member_invite: allow_member_invite?,
        })
    })?;
    let organization = state.organizations.update(&actor, change, &origin).await?;
    Ok(HttpResponse::Ok().json(OrganizationResponse::from(organization)))
}

/// The `200` of deleting an organization: its `id`, `is_active` now `false`, and when it
/// was deleted.
#[derive(Serialize, ToSchema)]
pub struct DeletedResponse {
    id: Uuid,
    is_active: bool,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    deleted_at: OffsetDateTime,
}

/// Deletes the organization (owner only): members lose access at once; the data goes for good
/// after 30 days.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}", tag = "organizations",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, body = DeletedResponse),
        (status = 403, body = ErrorBody, description = "Not the owner"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "A personal workspace"),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let deleted = state.organizations.delete(&actor, &origin).await?;
    Ok(HttpResponse::Ok().json(DeletedResponse {
        id: deleted.id.as_uuid(),
        is_active: false,
        deleted_at: deleted.deleted_at,
    }))
}
