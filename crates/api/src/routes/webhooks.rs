//! `/api/v1/webhooks/*`: endpoints, the event catalog, the delivery log, manual retries.
//! The organization comes from `X-Organization-ID`.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{
        Delivery, DeliveryId, DeliveryStatus, EndpointDescription, EndpointId, EventType,
        RetrySchedule, WebhookEndpoint, WebhookUrl, WebhookUrlError,
    },
    ports::{DeliveryFilter, EndpointDetail},
    service::{EndpointUpdate, NewEndpointRequest, SigningSecret},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;

use super::not_stored;
use super::organizations::PageResponse;
use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, FieldError, ValidationErrorBody},
    extract::{as_is, AuthenticatedAgent, Fields, InOrganization, ValidJson},
    query::Query,
    state::AppState,
};

/// A webhook endpoint of the organization: where deliveries go and which event types it
/// subscribes to; never its signing secret.
#[derive(Serialize, ToSchema)]
pub struct EndpointResponse {
    #[schema(example = "ep_01939f1e8f5a7b2c9d4e6f8a0b1c2d3e")]
    id: String,
    url: String,
    description: String,
    #[schema(example = json!(["member.invited", "member.joined"]))]
    events: Vec<&'static str>,
    is_active: bool,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

impl From<WebhookEndpoint> for EndpointResponse {
    fn from(endpoint: WebhookEndpoint) -> Self {
        Self {
            id: endpoint.id.to_string(),
            url: endpoint.url.as_ref().to_owned(),
            description: endpoint.description,
            events: endpoint.events.iter().map(|e| e.as_str()).collect(),
            is_active: endpoint.is_active,
            created_at: endpoint.created_at,
            updated_at: endpoint.updated_at,
        }
    }
}

/// The `201` of `POST /api/v1/webhooks/endpoints`: the new endpoint with its
/// `signing_secret`, the only time the secret is returned.
#[derive(Serialize, ToSchema)]
pub struct CreatedEndpointResponse {
    #[serde(flatten)]
    endpoint: EndpointResponse,
    /// Shown this once: it signs every delivery. Lost? Rotate it with PATCH `secret`.
    signing_secret: String,
}

/// An endpoint's `delivery_stats`: how many deliveries it has in all, how many succeeded and
/// how many failed.
#[derive(Serialize, ToSchema)]
pub struct DeliveryStatsResponse {
    total: u64,
    successful: u64,
    failed: u64,
}

/// The `200` of `GET /api/v1/webhooks/endpoints/{id}`: the endpoint, when it last received a
/// delivery, and its delivery counts.
#[derive(Serialize, ToSchema)]
pub struct EndpointDetailResponse {
    #[serde(flatten)]
    endpoint: EndpointResponse,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    last_delivery_at: Option<OffsetDateTime>,
    delivery_stats: DeliveryStatsResponse,
}

impl From<EndpointDetail> for EndpointDetailResponse {
    fn from(detail: EndpointDetail) -> Self {
        Self {
            endpoint: detail.endpoint.into(),
            last_delivery_at: detail.last_delivery_at,
            delivery_stats: DeliveryStatsResponse {
                total: detail.stats.total,
                successful: detail.stats.successful,
                failed: detail.stats.failed,
            },
        }
    }
}

/// One delivery of an event to an endpoint, as the delivery log lists it: its status, the
/// attempt it is at, what was sent and what the receiver answered.
#[derive(Serialize, ToSchema)]
pub struct DeliveryResponse {
    #[schema(example = "dlv_01939f1e8f5a7b2c9d4e6f8a0b1c2d3e")]
    id: String,
    webhook_id: String,
    event: &'static str,
    #[schema(example = "failed")]
    status: &'static str,
    http_status: Option<u16>,
    attempt: u32,
    #[schema(example = 5)]
    max_attempts: u32,
    #[schema(value_type = Object)]
    request_body: Option<serde_json::Value>,
    response_body: Option<String>,
    duration_ms: Option<u64>,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    delivered_at: Option<OffsetDateTime>,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    next_retry_at: Option<OffsetDateTime>,
}

impl From<Delivery> for DeliveryResponse {
    fn from(delivery: Delivery) -> Self {
        Self {
            id: delivery.id.to_string(),
            webhook_id: delivery.webhook_id.to_string(),
            event: delivery.event.as_str(),
            status: delivery.status.as_str(),
            http_status: delivery.http_status,
            attempt: delivery.attempt,
            max_attempts: RetrySchedule::MAX_ATTEMPTS,
            request_body: delivery.request_body,
            response_body: delivery.response_body,
            duration_ms: delivery.duration_ms,
            delivered_at: delivery.delivered_at,
            next_retry_at: delivery.next_retry_at,
        }
    }
}

/// An event type an endpoint can subscribe to, as `GET /api/v1/webhooks/events` lists it.
#[derive(Serialize, ToSchema)]
pub struct EventTypeResponse {
    #[serde(rename = "type")]
    #[schema(example = "member.joined")]
    kind: &'static str,
    #[schema(example = "member")]
    category: &'static str,
    description: &'static str,
    /// Who emits it: `gatehouse` itself, or `billing` (the billing system posts it to
    /// `POST /control/events`).
    #[schema(example = "gatehouse")]
    source: &'static str,
}

fn endpoint_id(raw: &str) -> Result<EndpointId, ApiError> {
    raw.parse()
        .map_err(|()| ApiError::NotFound("webhook endpoint not found".into()))
}

/// `https` only: a plain `http` URL is the spec's `400`; anything else malformed is a `422`.
fn webhook_url(raw: String) -> Result<WebhookUrl, ApiError> {
    WebhookUrl::parse(&raw).map_err(|e| match e {
        WebhookUrlError::NotHttps => {
            ApiError::BadRequest("url must use https: plain http endpoints are refused".into())
        }
        other => ApiError::field(FieldError::invalid("body", "url", format!("url {other}"))),
    })
}

/// Event types by name, at most [`WebhookEndpoint::MAX_EVENTS`]; an unknown one is a `422`
/// naming its index.
fn event_types(raw: Vec<String>) -> Result<Vec<EventType>, ApiError> {
    if raw.len() > WebhookEndpoint::MAX_EVENTS {
        return Err(ApiError::field(FieldError::too_many_items(
            "events",
            WebhookEndpoint::MAX_EVENTS,
        )));
    }
    let mut errors = Vec::new();
    let mut events = Vec::new();
    for (i, name) in raw.iter().enumerate() {
        match name.parse::<EventType>() {
            Ok(event) if event.subscribable() => events.push(event),
            Ok(_) => errors.push(FieldError {
                loc: vec!["body".into(), "events".into(), i.into()],
                msg: format!(
                    "{name:?} cannot be subscribed to: it is sent by POST \
                     /api/v1/webhooks/endpoints/{{id}}/test only"
                ),
                kind: "value_error",
            }),
            Err(()) => errors.push(FieldError {
                loc: vec!["body".into(), "events".into(), i.into()],
                msg: format!("unknown event type {name:?}: see GET /api/v1/webhooks/events"),
                kind: "value_error",
            }),
        }
    }
    if errors.is_empty() {
        Ok(events)
    } else {
        Err(ApiError::Validation(errors))
    }
}

/// The body of `POST /api/v1/webhooks/endpoints`: `url` (https) and `events` are required,
/// `description` and `secret` optional.
#[derive(Deserialize, ToSchema)]
pub struct CreateEndpointRequest {
    #[schema(example = "https://hooks.example.com/gatehouse")]
    url: Option<String>,
    #[schema(example = json!(["member.invited", "member.joined"]))]
    events: Option<Vec<String>>,
    description: Option<String>,
    /// A signing secret of your own (24 to 128 printable characters); generated when omitted.
    secret: Option<String>,
}

/// Registers an endpoint. The response carries `signing_secret`, shown this once.
#[utoipa::path(
    post, path = "/api/v1/webhooks/endpoints", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    request_body = CreateEndpointRequest,
    responses(
        (status = 201, body = CreatedEndpointResponse),
        (status = 400, body = ErrorBody, description = "URL is not https"),
        (status = 403, body = ErrorBody, description = "Missing webhooks.manage"),
        (status = 422, body = ValidationErrorBody, description = "Unknown event type or bad field; or, as {detail}, the organization already has as many endpoints as its plan allows (free 5, starter 10, pro 20, business 50, enterprise 200)"),
    )
)]
pub async fn create(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<CreateEndpointRequest>,
) -> Result<HttpResponse, ApiError> {
    let url = body.url.map(webhook_url).transpose()?;
    let events = body.events.map(event_types).transpose()?;
    let mut fields = Fields::new();
    let url = fields.required("url", url, as_is);
    let events = fields.required("events", events, |events| {
        if events.is_empty() {
            Err("must name at least one event type")
        } else {
            Ok(events)
        }
    });
    let description = fields.optional("description", body.description, |d| {
        EndpointDescription::parse(&d)
    });
    let secret = fields.optional("secret", body.secret, |s| SigningSecret::parse(&s));
    let (url, events, description, secret) =
        fields.finish(|| Some((url?, events?, description?, secret?)))?;
    let created = state
        .webhooks
        .create(
            &actor,
            NewEndpointRequest {
                url,
                events,
                description: description.unwrap_or_default(),
                secret,
            },
            &origin,
        )
        .await?;
    Ok(
        not_stored(HttpResponse::Created()).json(CreatedEndpointResponse {
            endpoint: created.endpoint.into(),
            signing_secret: created.signing_secret.expose().to_owned(),
        }),
    )
}

/// The organization's endpoints.
#[utoipa::path(
    get, path = "/api/v1/webhooks/endpoints", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
        ("is_active" = Option<bool>, Query),
    ),
    responses(
        (status = 200, body = PageResponse<EndpointResponse>),
        (status = 403, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let query = Query::of(&req)?;
    let page = query.page()?;
    let is_active = query.parse("is_active", |raw| match raw {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("must be true or false"),
    })?;
    let endpoints = state.webhooks.list(&actor, is_active, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(endpoints, EndpointResponse::from)))
}

/// One endpoint, with when it last received a delivery and its delivery counts. No secret.
#[utoipa::path(
    get, path = "/api/v1/webhooks/endpoints/{id}", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(("id" = String, Path)),
    responses(
        (status = 200, body = EndpointDetailResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let detail = state.webhooks.get(&actor, endpoint_id(&path)?).await?;
    Ok(HttpResponse::Ok().json(EndpointDetailResponse::from(detail)))
}

/// The body of `PATCH /api/v1/webhooks/endpoints/{id}`: every field is optional, and an
/// absent one stays as it is.
#[derive(Deserialize, ToSchema)]
pub struct UpdateEndpointRequest {
    url: Option<String>,
    /// Replaces the list.
    events: Option<Vec<String>>,
    description: Option<String>,
    /// Rotates the signing secret to this one.
    secret: Option<String>,
    is_active: Option<bool>,
}

/// Changes the fields sent. `secret` rotates the signing secret; `is_active` turns the endpoint
/// off or back on.
#[utoipa::path(
    patch, path = "/api/v1/webhooks/endpoints/{id}", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(("id" = String, Path)),
    request_body = UpdateEndpointRequest,
    responses(
        (status = 200, body = EndpointResponse),
        (status = 400, body = ErrorBody, description = "URL is not https"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<String>,
    ValidJson(body): ValidJson<UpdateEndpointRequest>,
) -> Result<HttpResponse, ApiError> {
    let id = endpoint_id(&path)?;
    let url = body.url.map(webhook_url).transpose()?;
    let events = body.events.map(event_types).transpose()?;
    let mut fields = Fields::new();
    let events = fields.optional("events", events, |events| {
        if events.is_empty() {
            Err("must name at least one event type")
        } else {
            Ok(events)
        }
    });
    let description = fields.optional("description", body.description, |d| {
        EndpointDescription::parse(&d)
    });
    let secret = fields.optional("secret", body.secret, |s| SigningSecret::parse(&s));
    let update = fields.finish(|| {
        Some(EndpointUpdate {
            url,
            description: description?,
            events: events?,
            secret: secret?,
            is_active: body.is_active,
        })
    })?;
    let endpoint = state.webhooks.update(&actor, id, update, &origin).await?;
    Ok(HttpResponse::Ok().json(EndpointResponse::from(endpoint)))
}

/// Removes the endpoint; deliveries still pending for it are cancelled.
#[utoipa::path(
    delete, path = "/api/v1/webhooks/endpoints/{id}", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(("id" = String, Path)),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn delete(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    state
        .webhooks
        .delete(&actor, endpoint_id(&path)?, &origin)
        .await?;
    Ok(HttpResponse::NoContent().finish())
}

/// Every event type an endpoint can subscribe to, with who emits it (`source`): the same for
/// every organization, so no `X-Organization-ID` is needed (an API key still comes with its
/// own, as everywhere). A bare array, as the spec shows it, not a page.
#[utoipa::path(
    get, path = "/api/v1/webhooks/events", tag = "webhooks",
    security(("bearer" = []), ("api_key" = [], "organization" = [])),
    responses((status = 200, body = Vec<EventTypeResponse>), (status = 401, body = ErrorBody))
)]
pub async fn events(_caller: AuthenticatedAgent) -> HttpResponse {
    HttpResponse::Ok().json(
        EventType::ALL
            .iter()
            .filter(|event| event.subscribable())
            .map(|event| EventTypeResponse {
                kind: event.as_str(),
                category: event.category().as_str(),
                description: event.description(),
                source: event.source().as_str(),
            })
            .collect::<Vec<_>>(),
    )
}

/// The endpoint's delivery log, newest first.
#[utoipa::path(
    get, path = "/api/v1/webhooks/endpoints/{id}/deliveries", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(
        ("id" = String, Path),
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
        ("status" = Option<String>, Query, description = "success, failed or pending"),
        ("event" = Option<String>, Query, description = "an event type"),
    ),
    responses(
        (status = 200, body = PageResponse<DeliveryResponse>),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn deliveries(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = endpoint_id(&path)?;
    let query = Query::of(&req)?;
    let page = query.page()?;
    let filter = DeliveryFilter {
        status: query.parse("status", |raw| raw.parse::<DeliveryStatus>())?,
        event: query.parse("event", |raw| {
            raw.parse::<EventType>()
                .map_err(|()| "is not a known event type")
        })?,
    };
    let deliveries = state.webhooks.deliveries(&actor, id, filter, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(deliveries, DeliveryResponse::from)))
}

/// The `200` of `POST /api/v1/webhooks/deliveries/{id}/retry`: the delivery, queued again
/// now (`next_retry_at` null), with its attempt count.
#[derive(Serialize, ToSchema)]
pub struct RetryResponse {
    id: String,
    #[schema(example = "pending")]
    status: &'static str,
    attempt: u32,
    max_attempts: u32,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    next_retry_at: Option<OffsetDateTime>,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    queued_at: OffsetDateTime,
}

/// Sends a failed delivery again now, as a new attempt.
#[utoipa::path(
    post, path = "/api/v1/webhooks/deliveries/{id}/retry", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(("id" = String, Path)),
    responses(
        (status = 200, body = RetryResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Not failed (already pending, or it succeeded), or a test ping (never retried)"),
    )
)]
pub async fn retry(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id: DeliveryId = path
        .parse()
        .map_err(|()| ApiError::NotFound("delivery not found".into()))?;
    let delivery = state.webhooks.retry(&actor, id, &origin).await?;
    Ok(HttpResponse::Ok().json(RetryResponse {
        id: delivery.id.to_string(),
        status: delivery.status.as_str(),
        attempt: delivery.attempt,
        max_attempts: RetrySchedule::MAX_ATTEMPTS,
        next_retry_at: None,
        queued_at: state.clock.now(),
    }))
}

/// The `200` of `POST /api/v1/webhooks/endpoints/{id}/test`: what came of the ping.
#[derive(Serialize, ToSchema)]
pub struct TestResponse {
    /// The ping's delivery, in the endpoint's delivery log (event `webhook.test`).
    #[schema(example = "dlv_01939f1e8f5a7b2c9d4e6f8a0b1c2d3e")]
    delivery_id: String,
    /// The endpoint answered with a 2xx.
    success: bool,
    /// The endpoint's HTTP status; null when it did not answer.
    status_code: Option<u16>,
    duration_ms: u64,
    /// Why the ping failed: the endpoint's non-2xx status, or why it could not be reached.
    error: Option<String>,
}

/// Sends a signed `webhook.test` to the endpoint now, active or not, and answers with what
/// came of it. The ping is in the endpoint's delivery log and is never retried.
#[utoipa::path(
    post, path = "/api/v1/webhooks/endpoints/{id}/test", tag = "webhooks",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(("id" = String, Path)),
    responses(
        (status = 200, body = TestResponse, description = "Sent; `success` says whether the endpoint took it"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn test(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let outcome = state
        .webhooks
        .test(&actor, endpoint_id(&path)?, &origin)
        .await?;
    Ok(HttpResponse::Ok().json(TestResponse {
        delivery_id: outcome.delivery_id.to_string(),
        success: outcome.success,
        status_code: outcome.status_code,
        duration_ms: outcome.duration_ms,
        error: outcome.error,
    }))
}
