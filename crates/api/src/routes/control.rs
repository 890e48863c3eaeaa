//! `/control/*`: the control plane, for operators holding `GATEHOUSE_CONTROL_TOKEN`. Unset, every
//! path here is `404`, as an unknown path is.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{DeliveryId, EndpointId, EventSource, EventType, PostedEventData},
    ports::{DeadLetterFilter, EventFilter, ReplaySelection, StoredEvent},
    service::{PostEventError, MAX_REPLAY},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::{
    audit::{filter, AuditRecordResponse},
    not_stored,
    organizations::PageResponse,
    webhooks::DeliveryResponse,
};
use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, FieldError, ValidationErrorBody},
    extract::{Fields, OperatorAuth, ValidJson},
    query::{organization_id, since, Query},
    state::AppState,
};

/// An event as the outbox stored it, as `GET /control/events` lists it and
/// `POST /control/events` answers it: its type, the organization and user it concerns, its
/// data, when it happened and when it was dispatched.
#[derive(Serialize, ToSchema)]
pub struct StoredEventResponse {
    #[schema(example = "0193a0c4-7d1e-7b2c-9d4e-6f8a0b1c2d3e")]
    id: String,
    #[serde(rename = "type")]
    #[schema(example = "member.joined")]
    kind: &'static str,
    organization_id: Option<String>,
    user_id: Option<String>,
    #[schema(value_type = Object)]
    data: serde_json::Value,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    occurred_at: OffsetDateTime,
    /// When it was turned into deliveries; null while it waits in the outbox.
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    dispatched_at: Option<OffsetDateTime>,
}

impl From<StoredEvent> for StoredEventResponse {
    fn from(event: StoredEvent) -> Self {
        Self {
            id: event.id.to_string(),
            kind: event.event_type.as_str(),
            organization_id: event.organization_id.map(|id| id.to_string()),
            user_id: event.user_id.map(|id| id.to_string()),
            data: event.data,
            occurred_at: event.occurred_at,
            dispatched_at: event.dispatched_at,
        }
    }
}

impl From<PostEventError> for ApiError {
    fn from(error: PostEventError) -> Self {
        match error {
            PostEventError::NotBilling(_) => {
                Self::field(FieldError::invalid("body", "type", error.to_string()))
            }
            PostEventError::OrganizationNotFound => Self::NotFound(error.to_string()),
            PostEventError::Store(e) => e.into(),
        }
    }
}

/// The body of `POST /control/events`: a billing event's `type`, `organization_id` and
/// `data`, all required.
#[derive(Deserialize, ToSchema)]
pub struct PostEventRequest {
    /// A billing event type (`source: "billing"` in the catalog).
    #[serde(rename = "type")]
    #[schema(example = "billing.invoice.paid")]
    kind: Option<String>,
    /// The organization it concerns.
    #[schema(example = "0193a0c4-7d1e-7b2c-9d4e-6f8a0b1c2d3e")]
    organization_id: Option<String>,
    /// The event's data, delivered as the payload's `data` (with `organization_id` set).
    #[schema(value_type = Object)]
    data: Option<serde_json::Value>,
}

/// The billing system's events (`billing.*`), into the organization's outbox: delivered to
/// its subscribed endpoints, signed and retried like every event Gatehouse emits.
#[utoipa::path(
    post, path = "/control/events", tag = "control",
    security(("control" = [])),
    request_body = PostEventRequest,
    responses(
        (status = 202, body = StoredEventResponse, description = "Recorded; delivered from the outbox"),
        (status = 404, body = ErrorBody, description = "No such organization, or the control plane is off (no GATEHOUSE_CONTROL_TOKEN)"),
        (status = 422, body = ValidationErrorBody, description = "Not a billing event type, or a field is missing or malformed"),
    )
)]
pub async fn post_event(
    OperatorAuth(operator): OperatorAuth,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<PostEventRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let kind = fields.required("type", body.kind, |raw| match raw.parse::<EventType>() {
        Ok(kind) if kind.source() == EventSource::Billing => Ok(kind),
        Ok(_) => Err("must be a billing event type (source \"billing\" in the catalog)"),
        Err(()) => Err("is not a known event type"),
    });
    let organization = fields.required("organization_id", body.organization_id, |raw| {
        organization_id(&raw)
    });
    let data = fields.required("data", body.data, PostedEventData::parse);
    let (kind, organization, data) = fields.finish(|| Some((kind?, organization?, data?)))?;
    let event = state
        .control
        .post_billing_event(&operator, kind, organization, data, &origin)
        .await?;
    Ok(HttpResponse::Accepted().json(StoredEventResponse::from(event)))
}

/// A delivery that failed for good, as `GET /control/dead-letters` lists it: the delivery
/// with the organization whose endpoint it was for.
#[derive(Serialize, ToSchema)]
pub struct DeadLetterResponse {
    #[serde(flatten)]
    delivery: DeliveryResponse,
    organization_id: String,
}

/// Every organization's audit log, newest first.
#[utoipa::path(
    get, path = "/control/audit", tag = "control",
    security(("control" = [])),
    params(
        ("organization_id" = Option<String>, Query), ("actor_id" = Option<String>, Query),
        ("action" = Option<String>, Query),
        ("since" = Option<String>, Query, description = "RFC 3339; records at or after it"),
        ("until" = Option<String>, Query, description = "RFC 3339; records before it"),
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
    ),
    responses(
        (status = 200, body = PageResponse<AuditRecordResponse>),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn control_log(
    OperatorAuth(operator): OperatorAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let query = Query::of(&req)?;
    let page = query.page()?;
    let filter = filter(&query)?;
    let records = state.control.audit_log(&operator, filter, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(records, AuditRecordResponse::from)))
}

/// Stored events of every organization, newest first.
#[utoipa::path(
    get, path = "/control/events", tag = "control",
    security(("control" = [])),
    params(
        ("organization_id" = Option<String>, Query), ("type" = Option<String>, Query),
        ("since" = Option<String>, Query, description = "RFC 3339; events at or after it"),
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
    ),
    responses(
        (status = 200, body = PageResponse<StoredEventResponse>),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn events(
    OperatorAuth(operator): OperatorAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let query = Query::of(&req)?;
    let page = query.page()?;
    let filter = EventFilter {
        organization_id: query.parse("organization_id", organization_id)?,
        event_type: query.parse("type", |raw| {
            raw.parse::<EventType>()
                .map_err(|()| "is not a known event type")
        })?,
        since: query.parse("since", since)?,
    };
    let events = state.control.events(&operator, filter, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(events, StoredEventResponse::from)))
}

/// Deliveries that failed for good (every automatic attempt failed, or a manual retry did),
/// newest first.
#[utoipa::path(
    get, path = "/control/dead-letters", tag = "control",
    security(("control" = [])),
    params(
        ("organization_id" = Option<String>, Query), ("endpoint_id" = Option<String>, Query),
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
    ),
    responses(
        (status = 200, body = PageResponse<DeadLetterResponse>),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn dead_letters(
    OperatorAuth(operator): OperatorAuth,
    req: HttpRequest,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let query = Query::of(&req)?;
    let page = query.page()?;
    let filter = DeadLetterFilter {
        organization_id: query.parse("organization_id", organization_id)?,
        endpoint_id: query.parse("endpoint_id", |raw| {
            raw.parse::<EndpointId>()
                .map_err(|()| "must be an endpoint id (ep_…)")
        })?,
    };
    let dead = state.control.dead_letters(&operator, filter, page).await?;
    Ok(
        HttpResponse::Ok().json(PageResponse::from_page(dead, |delivery| {
            DeadLetterResponse {
                organization_id: delivery.organization_id.to_string(),
                delivery: delivery.into(),
            }
        })),
    )
}

/// The body of `POST /control/dead-letters/replay`: which dead letters to send again, named
/// either by `delivery_ids` or by `endpoint_id` (with `since`, if wanted), not both.
#[derive(Deserialize, ToSchema)]
pub struct ReplayRequest {
    /// These dead letters (at most 1000); or name `endpoint_id` instead.
    delivery_ids: Option<Vec<String>>,
    /// This endpoint's dead letters (up to 1000 per call, oldest first).
    endpoint_id: Option<String>,
    /// With `endpoint_id`: only deliveries created at or after this time (RFC 3339).
    since: Option<String>,
}

/// The `202` of a replay: how many dead letters it queued.
#[derive(Serialize, ToSchema)]
pub struct ReplayResponse {
    /// How many dead letters were queued again.
    replayed: u64,
}

/// Sends dead letters again, now, oldest first: one more attempt each, with the same
/// `delivery_id` and body, under the endpoint's concurrency bound. An inactive endpoint's
/// deliveries wait until it is turned back on.
#[utoipa::path(
    post, path = "/control/dead-letters/replay", tag = "control",
    security(("control" = [])),
    request_body = ReplayRequest,
    responses(
        (status = 202, body = ReplayResponse),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn replay(
    OperatorAuth(operator): OperatorAuth,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    ValidJson(body): ValidJson<ReplayRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let ids = fields.optional("delivery_ids", body.delivery_ids, |ids| {
        if ids.is_empty() || ids.len() > MAX_REPLAY as usize {
            return Err(format!("must name 1 to {MAX_REPLAY} deliveries"));
        }
        ids.iter()
            .map(|id| {
                id.parse::<DeliveryId>()
                    .map_err(|()| format!("{id:?} is not a delivery id (dlv_…)"))
            })
            .collect::<Result<Vec<_>, _>>()
    });
    let endpoint = fields.optional("endpoint_id", body.endpoint_id, |raw| {
        raw.parse::<EndpointId>()
            .map_err(|()| "must be an endpoint id (ep_…)")
    });
    let since = fields.optional("since", body.since, |raw| since(&raw));
    let (ids, endpoint, since) = fields.finish(|| Some((ids?, endpoint?, since?)))?;
    let selection = match (ids, endpoint) {
        (Some(ids), None) if since.is_none() => ReplaySelection::Deliveries(ids),
        (None, Some(endpoint_id)) => ReplaySelection::Endpoint { endpoint_id, since },
        _ => {
            return Err(ApiError::field(FieldError::invalid(
                "body",
                "delivery_ids",
                "name either delivery_ids, or endpoint_id (with since, if you like)",
            )))
        }
    };
    let replayed = state.control.replay(&operator, selection, &origin).await?;
    Ok(HttpResponse::Accepted().json(ReplayResponse { replayed }))
}

/// The metrics, in the Prometheus text format: requests by route template and status with
/// their latency, sign-ins by outcome, deliveries by outcome with their latency from commit to
/// receipt, pending deliveries, the store's pools, rate-limit refusals (`docs/operations.md`).
#[utoipa::path(
    get, path = "/control/metrics", tag = "control",
    security(("control" = [])),
    responses(
        (status = 200, content_type = "text/plain", body = String, description = "Prometheus text exposition format 0.0.4"),
    )
)]
pub async fn metrics(
    _operator: OperatorAuth,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    scrape(&state).await
}

/// `GET /metrics` on `GATEHOUSE_METRICS_BIND`: the same text, without a token (that listener
/// is the operator's own address and serves nothing else).
pub async fn metrics_listener(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    scrape(&state).await
}

async fn scrape(state: &AppState) -> Result<HttpResponse, ApiError> {
    let gauges = state.control.gauges().await?;
    Ok(not_stored(HttpResponse::Ok())
        .content_type("text/plain; version=0.0.4; charset=utf-8")
        .body(state.metrics.render(&gauges)))
}
