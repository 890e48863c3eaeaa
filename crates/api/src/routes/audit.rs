//! The audit log: an organization's own at `GET /api/v1/organizations/{id}/audit-log`
//! (`audit.read`: owners and admins), and its records and filters, which every organization's
//! at `GET /control/audit` (the operator's, in [`super::control`]) shares: same shape, same
//! filters.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::model::{AuditAction, AuditFilter, AuditRecord};
use serde::Serialize;
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::organizations::PageResponse;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::InOrganization,
    query::{organization_id, since, Query},
    state::AppState,
};

/// Who acted in an audit record: the kind of actor and, where there is one, its id.
#[derive(Serialize, ToSchema)]
pub struct AuditActorResponse {
    /// `user`, `api_key`, `service_account`, `application`, `operator` or `system`.
    #[serde(rename = "type")]
    #[schema(example = "user")]
    kind: &'static str,
    /// The user's, the key's or the application's id; null for the operator, the system, and a sign-in attempt for
    /// an address with no account.
    id: Option<String>,
}

/// What an audited action was done to: the kind of thing and its id.
#[derive(Serialize, ToSchema)]
pub struct AuditTargetResponse {
    /// `user`, `member`, `api_key`, `webhook_endpoint`, `organization`, `invitation`,
    /// `delivery`, `application` or `mfa_factor`.
    #[serde(rename = "type")]
    #[schema(example = "member")]
    kind: &'static str,
    id: String,
}

/// One entry of the audit log, as both `GET /control/audit` and
/// `GET /api/v1/organizations/{id}/audit-log` list it: who did what to what, when, from where,
/// and whether it succeeded.
#[derive(Serialize, ToSchema)]
pub struct AuditRecordResponse {
    id: Uuid,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    occurred_at: OffsetDateTime,
    actor: AuditActorResponse,
    organization_id: Option<Uuid>,
    /// What was done (`member.role_changed`, `auth.login_failed`, ...: docs/operations.md).
    #[schema(example = "member.role_changed")]
    action: &'static str,
    target: Option<AuditTargetResponse>,
    /// The client's address (through `GATEHOUSE_TRUSTED_PROXIES`).
    ip: Option<String>,
    user_agent: Option<String>,
    request_id: Option<String>,
    /// `success` or `failure`.
    #[schema(example = "success")]
    outcome: &'static str,
}

impl From<AuditRecord> for AuditRecordResponse {
    fn from(record: AuditRecord) -> Self {
        Self {
            id: record.id,
            occurred_at: record.occurred_at,
            actor: AuditActorResponse {
                kind: record.actor.kind(),
                id: record.actor.id(),
            },
            organization_id: record.organization_id.map(|id| id.as_uuid()),
            action: record.action.as_str(),
            target: record.target.map(|target| AuditTargetResponse {
                kind: target.kind.as_str(),
                id: target.id,
            }),
            ip: record.origin.ip.map(|ip| ip.to_string()),
            user_agent: record.origin.user_agent,
            request_id: record.origin.request_id,
            outcome: record.outcome.as_str(),
        }
    }
}

/// The filters both listings take (the organization's own ignores `organization_id`).
pub(super) fn filter(query: &Query) -> Result<AuditFilter, ApiError> {
    Ok(AuditFilter {
        organization_id: query.parse("organization_id", organization_id)?,
        actor_id: query.parse("actor_id", |raw| {
            Uuid::parse_str(raw)
                .map(|id| id.to_string())
                .map_err(|_| "must be a user's or an API key's id (UUID)")
        })?,
        action: query.parse("action", |raw| {
            raw.parse::<AuditAction>()
                .map_err(|()| "is not a known audit action")
        })?,
        since: query.parse("since", since)?,
        until: query.parse("until", since)?,
    })
}

/// The organization's audit log, newest first (owners and admins).
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/audit-log", tag = "organizations",
    params(
        ("id" = String, Path),
        ("actor_id" = Option<String>, Query), ("action" = Option<String>, Query),
        ("since" = Option<String>, Query, description = "RFC 3339; records at or after it"),
        ("until" = Option<String>, Query, description = "RFC 3339; records before it"),
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
    ),
    responses(
        (status = 200, body = PageResponse<AuditRecordResponse>),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Missing permission audit.read"),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn organization_log(
    InOrganization(actor): InOrganization,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let query = Query::of(&req)?;
    let page = query.page()?;
    let filter = filter(&query)?;
    let records = state
        .audit_log
        .organization_log(&actor, filter, page)
        .await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(records, AuditRecordResponse::from)))
}
