//! A real HTTPS webhook receiver for tests (feature `test-receiver`).
//!
//! [`TestReceiver::start`] makes a throw-away CA and a server certificate for `localhost` and
//! `127.0.0.1` (`rcgen`), writes the CA certificate to a temporary PEM file, and serves HTTPS
//! (rustls, hyper HTTP/1.1, keep-alive) on `127.0.0.1` at a free port. It records every
//! request it receives and answers with whatever it was last told: a status, a body, a
//! redirect, after a delay.
//!
//! A sender reaches it with [`SenderConfig::ca_file`](crate::SenderConfig::ca_file) set to
//! [`TestReceiver::ca_pem_path`] and
//! [`SenderConfig::allow_private_targets`](crate::SenderConfig::allow_private_targets) set
//! (the receiver is on loopback).
//!
//! ```no_run
//! # async fn demo() {
//! use std::time::Duration;
//! use gatehouse_delivery::{test_receiver::TestReceiver, HttpsSender, SenderConfig};
//!
//! let receiver = TestReceiver::start().await;
//! let sender = HttpsSender::new(SenderConfig {
//!     ca_file: Some(receiver.ca_pem_path().to_owned()),
//!     allow_private_targets: true,
//!     ..SenderConfig::default()
//! })
//! .unwrap();
//! // ... send to receiver.url("/hook") ...
//! let received = receiver.wait_for(1, Duration::from_secs(5)).await;
//! assert_eq!(received[0].header("content-type"), Some("application/json"));
//! # }
//! ```
//!
//! This is test support: it panics, with a message saying what went wrong, rather than
//! returning errors. The server stops when the receiver is dropped.

// Test support: failing loudly is the point.
#![allow(clippy::expect_used)]

use std::{
    convert::Infallible,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, MutexGuard, PoisonError,
    },
    time::Duration,
};

use bytes::Bytes;
use http::{header::LOCATION, HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::ServerConfig;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
    task::{JoinHandle, JoinSet},
};
use tokio_rustls::TlsAcceptor;

/// One request as the receiver saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceivedRequest {
    /// `POST`, ...
    pub method: String,
    /// The path and query, as sent: `/hook?x=1`.
    pub path: String,
    /// Every header in the order received, names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Which TCP connection carried it, counted from 1 in the order accepted: requests that
    /// share a number shared a (kept-alive) connection.
    pub connection: usize,
    /// When its body had been read in full.
    pub received_at: std::time::SystemTime,
}

impl ReceivedRequest {
    /// The first value of a header (the name is case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.header_values(name).into_iter().next()
    }

    /// Every value of a header, in order.
    pub fn header_values(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The body, lossily decoded.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What the receiver answers.
#[derive(Clone, Debug)]
struct Reply {
    status: StatusCode,
    body: Bytes,
    location: Option<HeaderValue>,
    delay: Duration,
}

impl Default for Reply {
    fn default() -> Self {
        Self {
            status: StatusCode::OK,
            body: Bytes::new(),
            location: None,
            delay: Duration::ZERO,
        }
    }
}

#[derive(Debug)]
struct Shared {
    requests: Mutex<Vec<ReceivedRequest>>,
    answer: Mutex<Reply>,
    /// The number of requests recorded, to wait on.
    received: watch::Sender<usize>,
    connections: AtomicUsize,
    /// Requests being answered now, and the most there ever were at once.
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// Of the requests being answered, how many carry each delivery id
    /// (`X-Service-Delivery-Id`), and the ids that arrived while another request of theirs
    /// was still being answered.
    in_flight_ids: Mutex<std::collections::HashMap<String, usize>>,
    repeated_at_once: Mutex<Vec<String>>,
}

/// A request being answered: counted in [`Shared::in_flight`] until dropped (answered, or the
/// connection gone).
struct Answering {
    shared: Arc<Shared>,
    delivery_id: Option<String>,
}

impl Answering {
    fn start(shared: Arc<Shared>, delivery_id: Option<String>) -> Self {
        let now = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        shared.most_in_flight.fetch_max(now, Ordering::SeqCst);
        if let Some(id) = &delivery_id {
            let mut ids = lock(&shared.in_flight_ids);
            let count = ids.entry(id.clone()).or_insert(0);
            if *count > 0 {
                lock(&shared.repeated_at_once).push(id.clone());
            }
            *count += 1;
        }
        Self {
            shared,
            delivery_id,
        }
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(id) = &self.delivery_id {
            let mut ids = lock(&self.shared.in_flight_ids);
            if let Some(count) = ids.get_mut(id) {
                *count -= 1;
                if *count == 0 {
                    ids.remove(id);
                }
            }
        }
    }
}

/// Locks, ignoring poisoning (a panicking test thread must not hide the receiver's state).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running HTTPS receiver; see the [module docs](self).
#[derive(Debug)]
pub struct TestReceiver {
    addr: SocketAddr,
    ca_pem: String,
    ca_pem_path: PathBuf,
    /// Holds the CA file; deleted on drop.
    _ca_dir: tempfile::TempDir,
    shared: Arc<Shared>,
    server: JoinHandle<()>,
}

impl TestReceiver {
    /// Makes the certificates and starts serving on `127.0.0.1` at a free port. Answers
    /// `200` with an empty body until told otherwise.
    ///
    /// # Panics
    /// When the certificates, the CA file or the listening socket cannot be made.
    pub async fn start() -> Self {
        let (ca_pem, server_config) = certificates();

        let ca_dir = tempfile::tempdir().expect("test receiver: cannot make a temp directory");
        let ca_pem_path = ca_dir.path().join("test-receiver-ca.pem");
        std::fs::write(&ca_pem_path, &ca_pem).expect("test receiver: cannot write the CA file");

        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("test receiver: cannot listen on 127.0.0.1");
        let addr = listener
            .local_addr()
            .expect("test receiver: the listener has no address");

        let shared = Arc::new(Shared {
            requests: Mutex::new(Vec::new()),
            answer: Mutex::new(Reply::default()),
            received: watch::Sender::new(0),
            connections: AtomicUsize::new(0),
            in_flight: AtomicUsize::new(0),
            most_in_flight: AtomicUsize::new(0),
            in_flight_ids: Mutex::default(),
            repeated_at_once: Mutex::default(),
        });
        let acceptor = TlsAcceptor::from(Arc::new(server_config));
        let server = tokio::spawn(serve(listener, acceptor, Arc::clone(&shared)));

        Self {
            addr,
            ca_pem,
            ca_pem_path,
            _ca_dir: ca_dir,
            shared,
            server,
        }
    }

    /// `https://127.0.0.1:{port}{path}`; `path` starts with `/`.
    pub fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.addr.port())
    }

    /// The address it listens on (`127.0.0.1` and its port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The PEM file of the CA that signed its certificate: the `ca_file` of a sender that
    /// should trust it. Valid as long as the receiver lives.
    pub fn ca_pem_path(&self) -> &Path {
        &self.ca_pem_path
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// Every request received so far, in order of arrival (of the whole body).
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The most requests it was ever answering at once (a sender's concurrency, as the
    /// receiver sees it: with [`Self::delay`], each is counted for the whole delay).
    pub fn most_in_flight(&self) -> usize {
        self.shared.most_in_flight.load(Ordering::SeqCst)
    }

    /// The delivery ids (`X-Service-Delivery-Id`) of requests that arrived while another
    /// request with the same id was still being answered: the same delivery sent twice at
    /// once.
    pub fn repeated_at_once(&self) -> Vec<String> {
        lock(&self.shared.repeated_at_once).clone()
    }

    /// How many TCP connections it has accepted, TLS handshakes that failed included.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// From now on, answers `status` with an empty body (and no redirect).
    ///
    /// # Panics
    /// When `status` is not a valid HTTP status (100 to 999).
    pub fn respond_with(&self, status: u16) {
        self.respond_with_body(status, Vec::new());
    }

    /// From now on, answers `status` with `body` (and no redirect).
    ///
    /// # Panics
    /// When `status` is not a valid HTTP status.
    pub fn respond_with_body(&self, status: u16, body: impl Into<Vec<u8>>) {
        let mut answer = lock(&self.shared.answer);
        answer.status = status_code(status);
        answer.body = Bytes::from(body.into());
        answer.location = None;
    }

    /// From now on, answers `status` (a 3xx) with `Location: location` and an empty body.
    ///
    /// # Panics
    /// When `status` is not a valid HTTP status or `location` not a header value.
    pub fn redirect_to(&self, status: u16, location: &str) {
        let mut answer = lock(&self.shared.answer);
        answer.status = status_code(status);
        answer.body = Bytes::new();
        answer.location = Some(
            HeaderValue::from_str(location)
                .expect("test receiver: the redirect location is not a header value"),
        );
    }

    /// From now on, waits this long after receiving a request before answering
    /// (`Duration::ZERO`: answer at once). The request is recorded before the wait.
    pub fn delay(&self, delay: Duration) {
        lock(&self.shared.answer).delay = delay;
    }

    /// Waits until at least `count` requests have been received, and returns them all.
    ///
    /// # Panics
    /// When fewer than `count` have arrived after `timeout`.
    pub async fn wait_for(&self, count: usize, timeout: Duration) -> Vec<ReceivedRequest> {
        let mut received = self.shared.received.subscribe();
        let arrived = tokio::time::timeout(timeout, received.wait_for(|n| *n >= count)).await;
        if arrived.is_err() {
            panic!(
                "test receiver: expected {count} request(s) within {timeout:?}, received {}",
                self.requests().len()
            );
        }
        self.requests()
    }
}

impl Drop for TestReceiver {
    fn drop(&mut self) {
        // Dropping the accept loop drops its `JoinSet`, which aborts every connection.
        self.server.abort();
    }
}

fn status_code(status: u16) -> StatusCode {
    StatusCode::from_u16(status)
        .unwrap_or_else(|_| panic!("test receiver: {status} is not an HTTP status"))
}

/// A fresh CA (PEM) and a server configuration with a certificate it signed for `localhost`,
/// `127.0.0.1` and `::1`.
fn certificates() -> (String, ServerConfig) {
    let ca_key = KeyPair::generate().expect("test receiver: cannot generate the CA key");
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).expect("test receiver: CA parameters");
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Gatehouse test receiver CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params
        .self_signed(&ca_key)
        .expect("test receiver: cannot sign the CA certificate");
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().expect("test receiver: cannot generate the server key");
    let mut server_params = CertificateParams::new(vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "::1".to_owned(),
    ])
    .expect("test receiver: server certificate parameters");
    server_params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let server_cert = server_params
        .signed_by(&server_key, &issuer)
        .expect("test receiver: cannot sign the server certificate");

    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(server_key.serialize_der()));
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("test receiver: TLS protocol versions")
            .with_no_client_auth()
            .with_single_cert(vec![server_cert.der().clone()], key)
            .expect("test receiver: rustls refuses the server certificate");
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    (ca_cert.pem(), config)
}

/// The accept loop; each connection is served by a task of the loop's `JoinSet`.
async fn serve(listener: TcpListener, acceptor: TlsAcceptor, shared: Arc<Shared>) {
    let mut connections = JoinSet::new();
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            // Out of file descriptors and the like: try again shortly.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let id = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
        connections.spawn(serve_connection(
            tcp,
            acceptor.clone(),
            Arc::clone(&shared),
            id,
        ));
        while connections.try_join_next().is_some() {}
    }
}

async fn serve_connection(tcp: TcpStream, acceptor: TlsAcceptor, shared: Arc<Shared>, id: usize) {
    // A failed handshake (a client that does not trust the CA) just ends the connection.
    let Ok(tls) = acceptor.accept(tcp).await else {
        return;
    };
    let service = service_fn(move |request| answer(request, Arc::clone(&shared), id));
    // Errors are the client going away; nothing to do.
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(tls), service)
        .await;
}

async fn answer(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    connection: usize,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = request.into_parts();
    let _answering = Answering::start(
        shared.clone(),
        parts
            .headers
            .get("x-service-delivery-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    );
    let body = body
        .collect()
        .await
        .map(|collected| collected.to_bytes().to_vec())
        .unwrap_or_default();
    let received_at = std::time::SystemTime::now();
    let received = ReceivedRequest {
        method: parts.method.to_string(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), ToString::to_string),
        headers: parts
            .headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body,
        connection,
        received_at,
    };
    {
        let mut requests = lock(&shared.requests);
        requests.push(received);
        // Under the lock, so the counts go up in order.
        shared.received.send_replace(requests.len());
    }

    let answer = lock(&shared.answer).clone();
    if !answer.delay.is_zero() {
        tokio::time::sleep(answer.delay).await;
    }
    let mut response = Response::new(Full::new(answer.body));
    *response.status_mut() = answer.status;
    if let Some(location) = answer.location {
        response.headers_mut().insert(LOCATION, location);
    }
    Ok(response)
}
