//! Request ids and access logs, panics caught, JSON error bodies, bounded heads and bodies.

use std::time::Instant;

use actix_web::{
    body::MessageBody,
    dev::{ServiceRequest, ServiceResponse},
    http::header::{HeaderName, HeaderValue},
    middleware::Next,
    Error, HttpMessage, HttpRequest,
};
use tracing::Instrument;
use uuid::Uuid;

use crate::access::{RequestSpan, Routed};
pub use crate::extract::{RequestId, REQUEST_ID_HEADER};

/// The first segment of a request's path (at most 64 characters), as a request that reached no
/// route is logged.
fn unrouted_target(req: &HttpRequest) -> String {
    let path = req.path();
    let first = path
        .get(1..)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_default();
    let shown: String = first.chars().take(64).collect();
    let cut = shown.len() < first.len();
    let more = path.len() > first.len() + 1;
    format!(
        "/{shown}{}{}",
        if cut { "…" } else { "" },
        if more { "/…" } else { "" }
    )
}

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
        path = tracing::field::Empty,
    );
    req.extensions_mut().insert(RequestId(id.clone()));
    req.extensions_mut().insert(RequestSpan(span.clone()));
    let method = req.method().clone();
    let metrics = req
        .app_data::<actix_web::web::Data<crate::AppState>>()
        .map(|state| state.metrics.clone());
    let started = Instant::now();
    let outcome = next.call(req).instrument(span.clone()).await;
    let status = match &outcome {
        Ok(response) => response.status(),
        Err(error) => error.as_response_error().status_code(),
    };
    let elapsed = started.elapsed();
    // The route the request reached: its template labels the metrics, and its gate logged the
    // path. A request refused before routing has none, and its path is logged by its first
    // segment. (An error that no middleware turned into a response was routed: only a handler
    // or the body's timer gives one.)
    let routed = match &outcome {
        Ok(response) => {
            let routed = response.request().extensions().get::<Routed>().cloned();
            if routed.is_none() {
                span.record("path", unrouted_target(response.request()).as_str());
            }
            routed
        }
        Err(_) => None,
    };
    span.in_scope(|| {
        tracing::info!(
            status = status.as_u16(),
            duration_ms = elapsed.as_millis() as u64,
            "request finished"
        );
    });
    if let Some(metrics) = metrics {
        // The route's template, never the path: an id must not become a metrics label. (An
        // error that no middleware turned into a response has no request left to ask.)
        metrics.request(
            method.as_str(),
            routed
                .as_ref()
                .and_then(|routed| routed.0.as_deref())
                .unwrap_or("unmatched"),
            status.as_u16(),
            elapsed,
        );
    }
    let mut response = outcome?;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response
            .headers_mut()
            .insert(HeaderName::from_static(REQUEST_ID_HEADER), value);
    }
    Ok(response)
}

pub use catch_panics_impl::{catch_panics, panic_message, PanicCount};

mod catch_panics_impl {
    use std::{
        any::Any,
        panic::AssertUnwindSafe,
        sync::{
            atomic::{AtomicU64, Ordering},
            Arc,
        },
    };

    use actix_web::{
        body::MessageBody,
        dev::{ServiceRequest, ServiceResponse},
        http::{header::HeaderValue, StatusCode},
        middleware::Next,
        web, Error, HttpMessage, HttpResponse, ResponseError,
    };
    use futures_util::FutureExt;

    use super::{RequestId, REQUEST_ID_HEADER};
    use crate::error::ErrorBody;

    /// How many panics [`catch_panics`] caught in this process, shared by every worker.
    #[derive(Clone, Debug, Default)]
    pub struct PanicCount(Arc<AtomicU64>);

    impl PanicCount {
        /// Panics caught so far.
        pub fn get(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }

        fn add_one(&self) -> u64 {
            self.0.fetch_add(1, Ordering::Relaxed).saturating_add(1)
        }
    }

    /// What a panic said, when it said it with a string.
    pub fn panic_message(payload: &(dyn Any + Send)) -> &str {
        payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("(no message)")
    }

    /// A request whose handling panicked: `500 {detail}` naming the request id, which the
    /// response carries in `X-Request-ID` too.
    #[derive(Debug, thiserror::Error)]
    #[error("internal error; request id {request_id}")]
    struct Panicked {
        request_id: String,
    }

    impl ResponseError for Panicked {
        fn status_code(&self) -> StatusCode {
            StatusCode::INTERNAL_SERVER_ERROR
        }

        fn error_response(&self) -> HttpResponse {
            let mut response = HttpResponse::build(self.status_code());
            if let Ok(id) = HeaderValue::from_str(&self.request_id) {
                response.insert_header((REQUEST_ID_HEADER, id));
            }
            response.json(ErrorBody {
                detail: self.to_string(),
            })
        }
    }

    /// Turns a panic anywhere below it into `500 {detail}` naming the request id, logs it at
    /// error level and counts it (in the app data's [`PanicCount`], when there is one). The
    /// worker that ran the request lives on, and so do the other requests it serves: without
    /// this, a panic unwinds through actix-web's worker and ends it. Sits inside
    /// [`request_id`](super::request_id), whose id it reports.
    pub async fn catch_panics(
        req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<impl MessageBody>, Error> {
        // Taken before the request goes down: a panic takes the request with it.
        let request_id = req
            .extensions()
            .get::<RequestId>()
            .map(|id| id.0.clone())
            .unwrap_or_default();
        let count = req.app_data::<web::Data<PanicCount>>().cloned();
        match AssertUnwindSafe(next.call(req)).catch_unwind().await {
            Ok(response) => response,
            Err(payload) => {
                let caught = count.map(|count| count.add_one());
                tracing::error!(
                    %request_id,
                    panic = panic_message(payload.as_ref()),
                    panics_caught = caught,
                    "a request handler panicked; the request was answered 500"
                );
                Err(Panicked { request_id }.into())
            }
        }
    }
}

pub use bounded_head_impl::{bounded_head, MAX_HEADER_BYTES, MAX_URI_BYTES};

mod bounded_head_impl {
    use actix_web::{
        body::{EitherBody, MessageBody},
        dev::{ServiceRequest, ServiceResponse},
        http::StatusCode,
        middleware::Next,
        Error, HttpResponse,
    };

    use gatehouse_domain::service::Spender;

    use crate::{error::ErrorBody, extract::client_address};

    /// Longest request target (path and query string) accepted, in bytes.
    pub const MAX_URI_BYTES: usize = 8 * 1024;

    /// Most bytes of header names and values a request may carry.
    pub const MAX_HEADER_BYTES: usize = 16 * 1024;

    /// Refuses, before anything parses them, a request whose path and query string are longer
    /// than [`MAX_URI_BYTES`] (`414`) or whose headers hold more than [`MAX_HEADER_BYTES`]
    /// (`431`), with a `{detail}` body. actix-web bounds the head further out, as it reads it:
    /// 96 headers and 128 KiB at most, else a bare `431`.
    pub async fn bounded_head(
        req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
        let target = req.path().len() + req.query_string().len();
        let headers: usize = req
            .headers()
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len())
            .sum();
        let refusal = if target > MAX_URI_BYTES {
            Some((
                StatusCode::URI_TOO_LONG,
                format!("the request's path and query are longer than {MAX_URI_BYTES} bytes"),
            ))
        } else if headers > MAX_HEADER_BYTES {
            Some((
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                format!("the request's headers hold more than {MAX_HEADER_BYTES} bytes"),
            ))
        } else {
            None
        };
        let Some((status, detail)) = refusal else {
            return Ok(next.call(req).await?.map_into_left_body());
        };
        // Refused before routing, but counted against the client's address all the same: a
        // flood of oversized requests spends the budget that every other request does.
        if let Ok(app) = crate::extract::state(req.request()) {
            let spender = Spender::Anonymous(client_address(req.request()).0);
            if let Ok(decision) = app.rate_limits.check(&spender).await {
                if !decision.allowed {
                    let response = crate::access::too_many_requests(&app, &decision);
                    return Ok(req.into_response(response).map_into_right_body());
                }
            }
        }
        let response = HttpResponse::build(status).json(ErrorBody { detail });
        Ok(req.into_response(response).map_into_right_body())
    }
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
    /// `{detail}` shape, so that no client ever meets a plain-text error. The hosted pages'
    /// answers (HTML, for a person) and the SCIM endpoints' (SCIM's error schema) are left as
    /// they are.
    pub async fn json_errors(
        req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<EitherBody<impl MessageBody>>, Error> {
        let response = next.call(req).await?;
        let status = response.status();
        let ours = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| {
                v.starts_with("application/json")
                    || v.starts_with("text/html")
                    || v.starts_with(gatehouse_scim::SCIM_CONTENT_TYPE)
            });
        if !(status.is_client_error() || status.is_server_error()) || ours {
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

pub use bounded_body_impl::{bounded_body, DEFAULT_BODY_TIMEOUT};

mod bounded_body_impl {
    use std::{
        cell::{Cell, RefCell},
        pin::Pin,
        rc::Rc,
        task::{Context, Poll},
    };

    use actix_web::{
        body::{BodySize, BoxBody, EitherBody, MessageBody},
        dev::{Payload, ServiceRequest, ServiceResponse},
        error::PayloadError,
        http::{header, ConnectionType},
        middleware::Next,
        rt::time::{sleep, Sleep},
        web::Bytes,
        Error, HttpMessage, ResponseError,
    };
    use futures_util::{FutureExt, Stream, StreamExt};

    use crate::{error::ApiError, extract::state};

    pub use crate::state::DEFAULT_BODY_TIMEOUT;

    /// The request's body as the handler reads it, watched: whether it arrived whole, whether its
    /// time ran out, and the body itself, held until the response is on its way.
    #[derive(Default)]
    pub struct Watched {
        payload: RefCell<Option<Payload>>,
        finished: Cell<bool>,
        expired: Cell<bool>,
    }

    /// What the handler reads in place of the body: the body, until the deadline.
    struct Deadline {
        watched: Rc<Watched>,
        timer: Pin<Box<Sleep>>,
    }

    impl Stream for Deadline {
        type Item = Result<Bytes, PayloadError>;

        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
            if self.watched.expired.get() || self.watched.finished.get() {
                return Poll::Ready(None);
            }
            let polled = match self.watched.payload.borrow_mut().as_mut() {
                Some(payload) => payload.poll_next_unpin(cx),
                None => Poll::Ready(None),
            };
            match polled {
                Poll::Ready(None) => {
                    self.watched.finished.set(true);
                    Poll::Ready(None)
                }
                Poll::Ready(Some(chunk)) => Poll::Ready(Some(chunk)),
                Poll::Pending => match self.timer.poll_unpin(cx) {
                    Poll::Ready(()) => {
                        self.watched.expired.set(true);
                        Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the request body did not arrive in time",
                        )))))
                    }
                    Poll::Pending => Poll::Pending,
                },
            }
        }
    }

    /// Whether the request announces a body: a `Transfer-Encoding`, or a `Content-Length` other
    /// than 0.
    fn announces_body(req: &ServiceRequest) -> bool {
        let headers = req.headers();
        headers.contains_key(header::TRANSFER_ENCODING)
            || headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .is_none_or(|v| v.trim() != "0")
                && headers.contains_key(header::CONTENT_LENGTH)
    }

    /// Bounds the time a request body may take (`GATEHOUSE_BODY_TIMEOUT_SECS`, in
    /// [`AppState::body_timeout`](crate::AppState)): a body still arriving when it runs out is
    /// answered `408 {detail}`, whatever the handler made of the cut-off body, and the connection
    /// closes. A body the handler never read is not read afterwards either: the connection closes
    /// after the response instead of draining it, so a client cannot hold a connection open by
    /// sending a body (chunked, to a route that takes none) that never ends.
    pub async fn bounded_body(
        mut req: ServiceRequest,
        next: Next<impl MessageBody + 'static>,
    ) -> Result<ServiceResponse<EitherBody<impl MessageBody, HoldingBody>>, Error> {
        if !announces_body(&req) {
            return Ok(next.call(req).await?.map_into_left_body());
        }
        let timeout = state(req.request()).map_or(DEFAULT_BODY_TIMEOUT, |s| s.body_timeout);
        let watched = Rc::new(Watched {
            payload: RefCell::new(Some(req.take_payload())),
            ..Watched::default()
        });
        let deadline = Deadline {
            watched: watched.clone(),
            timer: Box::pin(sleep(timeout)),
        };
        req.set_payload(Payload::Stream {
            payload: Box::pin(deadline),
        });
        let outcome = next.call(req).await;
        let timed_out = || ApiError::BodyTimeout(timeout.as_secs());
        let response = match outcome {
            Ok(response) if watched.expired.get() => {
                let (request, _) = response.into_parts();
                ServiceResponse::new(request, timed_out().error_response().map_into_boxed_body())
            }
            Ok(response) if !watched.finished.get() => response.map_into_boxed_body(),
            Ok(response) => return Ok(response.map_into_left_body()),
            Err(_) if watched.expired.get() => return Err(timed_out().into()),
            Err(error) => return Err(error),
        };
        // The body was not read to its end: it is held until the response's last byte is
        // written, and the connection closes then instead of reading on.
        let mut response = response.map_body(|_, body| HoldingBody {
            body,
            _held: watched,
        });
        response
            .response_mut()
            .head_mut()
            .set_connection_type(ConnectionType::Close);
        Ok(response.map_into_right_body())
    }

    /// A response's body that holds the unread request body until it is sent: actix-web closes
    /// a connection whose request body is unread (and still held) when its response ends, but
    /// reads on a dropped chunked one, for as long as it comes.
    pub struct HoldingBody {
        body: BoxBody,
        _held: Rc<Watched>,
    }

    impl MessageBody for HoldingBody {
        type Error = <BoxBody as MessageBody>::Error;

        fn size(&self) -> BodySize {
            self.body.size()
        }

        fn poll_next(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Bytes, Self::Error>>> {
            Pin::new(&mut self.body).poll_next(cx)
        }
    }
}
