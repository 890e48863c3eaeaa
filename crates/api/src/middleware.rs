//! Request ids and access logs.

use std::time::Instant;

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    http::header::{HeaderName, HeaderValue},
    middleware::Next,
    Error,
};
use tracing::Instrument;
use uuid::Uuid;

pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Takes `X-Request-ID` from the request (a sane one) or makes one, runs the request inside a
/// tracing span that carries it, echoes it on the response, and logs one line per request.
pub async fn request_id(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| {
            !v.is_empty()
                && v.len() <= 128
                && v.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b))
        })
        .map_or_else(|| Uuid::now_v7().to_string(), str::to_owned);
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %req.method(),
        path = %req.path(),
    );
    let started = Instant::now();
    let mut response = next.call(req).instrument(span.clone()).await?;
    let status = response.status();
    span.in_scope(|| {
        tracing::info!(
            status = status.as_u16(),
            duration_ms = started.elapsed().as_millis() as u64,
            "request finished"
        );
    });
    if let Ok(value) = HeaderValue::from_str(&id) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(REQUEST_ID_HEADER), value);
    }
    Ok(response)
}

pub use json_errors_impl::json_errors;

mod json_errors_impl {
    use actix_web::{
        body::{EitherBody, MessageBody},
        dev::{ServiceRequest, ServiceResponse},
        http::header,
        middleware::Next,
        Error, HttpResponse,
    };

    use crate::error::ErrorBody;

    /// Gives every error response that actix produced by itself (no JSON body) the
    /// `{detail}` shape, so that no client ever meets a plain-text error.
    pub async fn json_errors(
        req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
        let response = next.call(req).await?;
        let status = response.status();
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !(status.is_client_error() || status.is_server_error()) || is_json {
            return Ok(response.map_into_left_body());
        }
        let detail = status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase();
        let (req, _) = response.into_parts();
        let replaced = HttpResponse::build(status).json(ErrorBody { detail });
        Ok(ServiceResponse::new(req, replaced).map_into_right_body())
    }
}
