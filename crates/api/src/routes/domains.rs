//! `/api/v1/organizations/{id}/domains`: the organization's email domains, verified by a DNS
//! TXT record. Owners and admins (`domains.manage`), on any plan.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::model::{ClaimableDomain, DomainId, OrganizationDomain};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::organizations::PageResponse;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{Fields, InOrganization, RequestOrigin, ValidJson},
    query::Query,
    state::AppState,
};

/// What proves the domain: a TXT record named `name` holding `value`.
#[derive(Serialize, ToSchema)]
pub struct DomainVerification {
    #[serde(rename = "type")]
    #[schema(example = "dns_txt")]
    kind: &'static str,
    #[schema(example = "_gatehouse-challenge.acme.com")]
    name: String,
    #[schema(example = "ghdv_…")]
    value: String,
}

/// An email domain the organization claimed: its status and the TXT record that verifies it.
#[derive(Serialize, ToSchema)]
pub struct DomainResponse {
    id: String,
    #[schema(example = "acme.com")]
    domain: String,
    /// `pending` until the TXT record is found, then `verified`.
    #[schema(example = "pending")]
    status: &'static str,
    verification: DomainVerification,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    verified_at: Option<OffsetDateTime>,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
}

impl From<OrganizationDomain> for DomainResponse {
    fn from(domain: OrganizationDomain) -> Self {
        Self {
            id: domain.id.to_string(),
            status: domain.status().as_str(),
            verification: DomainVerification {
                kind: "dns_txt",
                name: domain.challenge_name(),
                value: domain.verification_value.clone(),
            },
            domain: domain.domain.to_string(),
            verified_at: domain.verified_at,
            created_at: domain.created_at,
        }
    }
}

/// The body of `POST /api/v1/organizations/{id}/domains`: the `domain` to claim (required).
#[derive(Deserialize, ToSchema)]
pub struct AddDomainRequest {
    /// A domain the organization holds; not a public suffix (`co.uk`) nor a free-mail
    /// provider's (`gmail.com`).
    #[schema(example = "acme.com")]
    domain: Option<String>,
}

fn domain_id(raw: &str) -> Result<DomainId, ApiError> {
    raw.parse::<uuid::Uuid>()
        .map(DomainId::from_uuid)
        .map_err(|_| ApiError::NotFound("domain not found".into()))
}

/// Claims a domain: pending until a TXT record `_gatehouse-challenge.{domain}` holds the
/// returned `verification.value` and `.../verify` is called.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/domains", tag = "domains",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path)),
    request_body = AddDomainRequest,
    responses(
        (status = 201, body = DomainResponse),
        (status = 403, body = ErrorBody, description = "Missing domains.manage"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Claimed by this organization already, or verified by another"),
        (status = 422, body = ValidationErrorBody, description = "Not a domain, a public suffix, a free-mail domain, or past 100 domains"),
    )
)]
pub async fn add(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<AddDomainRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let domain = fields.required("domain", body.domain, |d| ClaimableDomain::parse(&d));
    let domain = fields.finish(|| domain)?;
    let added = state.domains.add(&actor, domain, &origin).await?;
    Ok(HttpResponse::Created().json(DomainResponse::from(added)))
}

/// The organization's domains, oldest first.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/domains", tag = "domains",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<DomainResponse>),
        (status = 403, body = ErrorBody),
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
    let domains = state.domains.list(&actor, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(domains, DomainResponse::from)))
}

/// Looks up the domain's TXT record now: `verified` when a record of
/// `_gatehouse-challenge.{domain}` holds the value; `409` naming what was found otherwise.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/domains/{domain_id}/verify", tag = "domains",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("domain_id" = String, Path)),
    responses(
        (status = 200, body = DomainResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "No TXT record holds the value (the answer names what was found), or another organization verified the domain"),
        (status = 503, body = ErrorBody, description = "The DNS could not be asked"),
    )
)]
pub async fn verify(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = domain_id(&path.1)?;
    let domain = state.domains.verify(&actor, id, &origin).await?;
    Ok(HttpResponse::Ok().json(DomainResponse::from(domain)))
}

/// Removes the domain: single sign-on stops speaking for it at once.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/domains/{domain_id}", tag = "domains",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = String, Path), ("domain_id" = String, Path)),
    responses(
        (status = 204),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn remove(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = domain_id(&path.1)?;
    state.domains.remove(&actor, id, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}
