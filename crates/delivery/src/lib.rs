//! The webhook sender: the adapter of the domain's [`WebhookSender`] port on hyper and rustls.
//!
//! [`HttpsSender`] POSTs each signed request over HTTPS (HTTP/1.1, pooled keep-alive
//! connections per host), follows no redirect, gives up after a hard overall timeout, reads at
//! most a few KiB of the answer, and refuses to connect to private, loopback and other
//! non-public addresses unless told otherwise (see [`is_public_address`]).
//!
//! Certificates are checked against the Mozilla roots compiled in (`webpki-roots`, so no
//! system CA bundle is needed) plus the PEM roots of an optional CA file. TLS is rustls on the
//! `ring` provider.
//!
//! With the `test-receiver` feature, [`test_receiver`] offers a real HTTPS receiver for tests.

mod connect;
#[cfg(feature = "test-receiver")]
pub mod test_receiver;

use std::{
    fmt,
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use async_trait::async_trait;
use bytes::Bytes;
use gatehouse_domain::ports::{WebhookRequest, WebhookResponse, WebhookSender};
use http::{
    header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, USER_AGENT},
    HeaderName, HeaderValue, Method, Request, Uri,
};
use http_body_util::{BodyExt, Full};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::{
    client::legacy::Client,
    rt::{TokioExecutor, TokioTimer},
};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::{pem::PemObject, CertificateDer};

use crate::connect::{GuardedConnector, RefusedTarget};
pub use gatehouse_domain::model::is_public_address;

/// How long an idle pooled connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// How the sender behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// The hard limit on one attempt: connection, TLS handshake, request and reading the
    /// (capped) answer. Default 10 s.
    pub timeout: Duration,
    /// A PEM file of extra root certificates to trust besides the compiled-in Mozilla roots
    /// (a private CA). Default none.
    pub ca_file: Option<PathBuf>,
    /// Whether private, loopback, link-local and other non-public addresses may be sent to.
    /// Default false; only for tests and closed deployments.
    pub allow_private_targets: bool,
    /// How much of a response body is kept. Default 4096 bytes.
    pub max_response_bytes: usize,
    /// The `User-Agent` of every request (unless the request brings its own). Default
    /// `Service-Webhooks/1.0`.
    pub user_agent: String,
}

impl Default for SenderConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
            ca_file: None,
            allow_private_targets: false,
            max_response_bytes: 4096,
            user_agent: "Service-Webhooks/1.0".to_owned(),
        }
    }
}

/// Why a sender cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SenderError {
    /// The CA file cannot be read, holds no certificate or a certificate rustls refuses.
    #[error("cannot use the CA file {}: {reason}", path.display())]
    CaFile { path: PathBuf, reason: String },
    /// The configured user agent is not a valid header value.
    #[error("the user agent {0:?} is not a valid header value")]
    UserAgent(String),
    /// rustls refused the TLS configuration.
    #[error("the TLS configuration is invalid: {0}")]
    Tls(rustls::Error),
}

type Connector = HttpsConnector<GuardedConnector>;

/// The [`WebhookSender`] over HTTPS. Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub struct HttpsSender {
    config: Arc<SenderConfig>,
    user_agent: HeaderValue,
    client: Client<Connector, Full<Bytes>>,
}

impl fmt::Debug for HttpsSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpsSender")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl HttpsSender {
    /// Builds the sender: the root store, the TLS configuration and the (empty) pool. Needs no
    /// runtime; sending needs Tokio's.
    ///
    /// # Errors
    /// [`SenderError::CaFile`] when `ca_file` is set but cannot be read or holds no usable
    /// certificate; [`SenderError::UserAgent`] when the user agent is not a header value.
    pub fn new(config: SenderConfig) -> Result<Self, SenderError> {
        let user_agent = HeaderValue::from_str(&config.user_agent)
            .map_err(|_| SenderError::UserAgent(config.user_agent.clone()))?;

        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        if let Some(path) = &config.ca_file {
            add_pem_roots(&mut roots, path)?;
        }
        let tls =
            ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(SenderError::Tls)?
                .with_root_certificates(roots)
                .with_no_client_auth();

        let connector = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_only()
            .enable_http1()
            .wrap_connector(GuardedConnector::new(config.allow_private_targets));
        let client = Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector);

        Ok(Self {
            config: Arc::new(config),
            user_agent,
            client,
        })
    }

    /// The configuration the sender was built with.
    pub fn config(&self) -> &SenderConfig {
        &self.config
    }

    /// Builds the HTTP request, or says why it cannot be sent.
    fn prepare(&self, request: WebhookRequest) -> Result<Request<Full<Bytes>>, String> {
        // `url` applies the WHATWG rules: IDNA host names become punycode, IPv4 literals in
        // other notations (`0x7f.1`) become dotted quads, and so get the address check.
        let url = url::Url::parse(request.url.as_ref()).map_err(|e| format!("invalid URL: {e}"))?;
        if url.scheme() != "https" {
            return Err("the URL must use https".to_owned());
        }
        let uri = Uri::try_from(url.as_str()).map_err(|e| format!("invalid URL: {e}"))?;

        let length = request.body.len();
        let mut http = Request::new(Full::new(Bytes::from(request.body)));
        *http.method_mut() = Method::POST;
        *http.uri_mut() = uri;
        let headers = http.headers_mut();
        headers.insert(USER_AGENT, self.user_agent.clone());
        for (name, value) in request.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("invalid header name {name:?}"))?;
            // The value may be a secret's output: not in the message.
            let value = HeaderValue::from_str(&value)
                .map_err(|_| format!("invalid value for header {name}"))?;
            if name == USER_AGENT {
                headers.insert(name, value);
            } else if ![HOST, CONTENT_LENGTH, TRANSFER_ENCODING, CONNECTION].contains(&name) {
                // Framing and routing headers are the sender's business.
                headers.append(name, value);
            }
        }
        headers.insert(CONTENT_LENGTH, HeaderValue::from(length));
        Ok(http)
    }

    /// Sends the request and reads the start of the answer: the status and the capped body.
    async fn exchange(&self, request: Request<Full<Bytes>>) -> Result<(u16, String), String> {
        let response = self
            .client
            .request(request)
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status().as_u16();
        let cap = self.config.max_response_bytes;
        let mut body = response.into_body();
        let mut kept = Vec::with_capacity(cap.min(16 * 1024));
        while kept.len() < cap {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let room = cap - kept.len();
                        kept.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                // The status is what counts; a body cut short is still an answer.
                Some(Err(_)) | None => break,
            }
        }
        Ok((status, decode(&kept)))
    }
}

#[async_trait]
impl WebhookSender for HttpsSender {
    async fn send(&self, request: WebhookRequest) -> WebhookResponse {
        let start = Instant::now();
        let outcome = match self.prepare(request) {
            Ok(request) => {
                let attempt = Box::pin(self.exchange(request));
                match tokio::time::timeout(self.config.timeout, attempt).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(format!("timed out after {}", human(self.config.timeout))),
                }
            }
            Err(error) => Err(error),
        };
        let duration_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        match outcome {
            Ok((status, body)) => WebhookResponse::Answered {
                status,
                body,
                duration_ms,
            },
            Err(error) => WebhookResponse::Failed { error, duration_ms },
        }
    }
}

/// Adds every certificate of the PEM file to the root store.
fn add_pem_roots(roots: &mut RootCertStore, path: &std::path::Path) -> Result<(), SenderError> {
    let fail = |reason: String| SenderError::CaFile {
        path: path.to_owned(),
        reason,
    };
    let mut added = 0;
    for cert in CertificateDer::pem_file_iter(path).map_err(|e| fail(e.to_string()))? {
        let cert = cert.map_err(|e| fail(e.to_string()))?;
        roots.add(cert).map_err(|e| fail(e.to_string()))?;
        added += 1;
    }
    if added == 0 {
        return Err(fail("it holds no PEM certificate".to_owned()));
    }
    Ok(())
}

/// A failure for the delivery log: the refused address alone when the SSRF rule stopped it,
/// otherwise the chain of causes ("connection failed: invalid peer certificate: ...").
fn describe(error: &hyper_util::client::legacy::Error) -> String {
    let mut parts = vec![if error.is_connect() {
        "connection failed".to_owned()
    } else {
        "request failed".to_owned()
    }];
    let mut cause = std::error::Error::source(error);
    while let Some(current) = cause {
        if let Some(refused) = current.downcast_ref::<RefusedTarget>() {
            return refused.to_string();
        }
        let text = current.to_string();
        // An `io::Error` wrapping another error shows the inner error's text and source.
        if parts.last().is_none_or(|last| !last.ends_with(&text)) {
            parts.push(text);
        }
        cause = current.source();
    }
    parts.join(": ")
}

/// The body kept, lossily decoded; a character cut in two by the cap is dropped rather than
/// shown as a replacement character.
fn decode(bytes: &[u8]) -> String {
    let end = match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        _ => bytes.len(),
    };
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `10 s`, `300 ms`.
fn human(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_read_naturally() {
        assert_eq!(human(Duration::from_secs(10)), "10 s");
        assert_eq!(human(Duration::from_millis(300)), "300 ms");
        assert_eq!(human(Duration::from_millis(1500)), "1500 ms");
    }

    #[test]
    fn a_character_cut_by_the_cap_is_dropped() {
        assert_eq!(decode("héllo".as_bytes()), "héllo");
        assert_eq!(decode(&"hé".as_bytes()[..2]), "h");
        assert_eq!(decode(b"a\xffb"), "a\u{fffd}b");
    }

    #[test]
    fn the_default_config_is_the_documented_one() {
        let config = SenderConfig::default();
        assert_eq!(config.timeout, Duration::from_secs(10));
        assert_eq!(config.ca_file, None);
        assert!(!config.allow_private_targets);
        assert_eq!(config.max_response_bytes, 4096);
        assert_eq!(config.user_agent, "Service-Webhooks/1.0");
    }

    #[test]
    fn a_bad_user_agent_is_refused() {
        let config = SenderConfig {
            user_agent: "bad\nagent".to_owned(),
            ..SenderConfig::default()
        };
        assert!(matches!(
            HttpsSender::new(config),
            Err(SenderError::UserAgent(_))
        ));
    }
}
