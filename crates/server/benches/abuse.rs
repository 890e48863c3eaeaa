//! `just bench-abuse`: what one abusive client costs everyone else, measured against the real
//! `gatehouse` binary (issue 30's findings, each as a figure).
//!
//! ```text
//! cargo bench -p gatehouse-server --bench abuse -- [--backend sqlite|postgres|both]
//!                                                  [--binary PATH] [--seconds N] [--flooders N]
//! ```
//!
//! 1. **The SAML ACS flooded**: an organization's admin, with an IdP of their own, posts a
//!    370 KB response nested 20 deep (3,800 elements, the most the pre-scan admits) and signed
//!    with that IdP's key, from `--flooders` clients
//!    as fast as the server answers, for `--seconds`; `GET /readyz` is probed beside it (and
//!    before it, idle): its p50, p99 and worst latency, and the ACS's answers a second.
//! 2. **Connections held**: 1,000 connections each send `GET /livez` with a chunked body that
//!    never ends; how many are still open 15 s later.
//! 3. **Log bytes per request**: 1,000 requests with 7 KB paths (404) and 1,000 with 60 KB paths
//!    (414), at the default log level: bytes of log each.
//! 4. **One person's requests a minute**: a user with 20 API keys sends 2,000 requests in a
//!    minute's window, spread over the keys and their access token, at the default limits: how
//!    many are served.
//!
//! `--binary` runs another build (the commit before a change, say) through the same phases.
//! Needs `openssl` and `xmlsec1` (Debian's: `apt-get install xmlsec1`) to make and sign the
//! IdP's response.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{
    fmt::Write as _,
    fs,
    io::Read as _,
    net::{SocketAddr, TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use base64::Engine as _;
use gatehouse_testkit::TestDatabase;
use serde_json::{json, Value};

const BINARY: &str = env!("CARGO_BIN_EXE_gatehouse");
const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
const PASSWORD: &str = "a bench of abuse and patience";

struct Options {
    backends: Vec<&'static str>,
    binary: PathBuf,
    seconds: u64,
    flooders: usize,
}

fn options() -> Options {
    let mut options = Options {
        backends: vec!["sqlite", "postgres"],
        binary: PathBuf::from(BINARY),
        seconds: 20,
        flooders: 8,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--backend" => {
                options.backends = match args.next().as_deref() {
                    Some("sqlite") => vec!["sqlite"],
                    Some("postgres") => vec!["postgres"],
                    _ => vec!["sqlite", "postgres"],
                }
            }
            "--binary" => options.binary = PathBuf::from(args.next().expect("--binary PATH")),
            "--seconds" => {
                options.seconds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--seconds N")
            }
            "--flooders" => {
                options.flooders = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .expect("--flooders N")
            }
            // `cargo bench` passes `--bench`.
            _ => {}
        }
    }
    options
}

fn main() {
    let options = options();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut out = format!(
        "# Abuse bench\n\nbinary `{}`, {} cores, {} flooders for {} s\n",
        options.binary.display(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        options.flooders,
        options.seconds
    );
    for backend in &options.backends {
        out.push_str(&runtime.block_on(run_backend(backend, &options)));
    }
    println!("{out}");
}

struct Server {
    child: Child,
    base: String,
    log: PathBuf,
    database_url: String,
    _database: Option<TestDatabase>,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    async fn start(backend: &str, options: &Options, extra: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (database_url, database) = match backend {
            "postgres" => {
                let database = TestDatabase::create().await;
                (database.url().to_owned(), Some(database))
            }
            _ => (gatehouse_testkit::sqlite_url(&dir), None),
        };
        let address = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let log = dir.path().join("server.log");
        let child = Command::new(&options.binary)
            .current_dir(dir.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GATEHOUSE_BIND", address.to_string())
            .env("GATEHOUSE_DATABASE_URL", &database_url)
            .env("GATEHOUSE_SECRET_KEY", SECRET_KEY)
            .envs(extra.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let server = Self {
            child,
            base: format!("http://{address}"),
            log,
            database_url,
            _database: database,
            _dir: dir,
        };
        let client = reqwest::Client::new();
        for _ in 0..300 {
            if let Ok(response) = client.get(format!("{}/readyz", server.base)).send().await {
                if response.status() == 200 {
                    return server;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!(
            "the server did not start: {}",
            fs::read_to_string(&server.log).unwrap_or_default()
        );
    }

    fn address(&self) -> SocketAddr {
        self.base.trim_start_matches("http://").parse().unwrap()
    }

    fn log_bytes(&self) -> u64 {
        fs::metadata(&self.log).map_or(0, |m| m.len())
    }
}

async fn post(client: &reqwest::Client, url: &str, token: Option<&str>, body: &Value) -> Value {
    let mut request = client.post(url).json(body);
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let body = response.json::<Value>().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{url}: {status} {body}");
    body
}

/// Registers and signs in `email`: (access token, personal organization).
async fn user(client: &reqwest::Client, base: &str, email: &str) -> (String, String) {
    let registered = post(
        client,
        &format!("{base}/api/v1/auth/register"),
        None,
        &json!({ "email": email, "password": PASSWORD, "full_name": "Bench" }),
    )
    .await;
    let tokens = post(
        client,
        &format!("{base}/api/v1/auth/login"),
        None,
        &json!({ "email": email, "password": PASSWORD }),
    )
    .await;
    (
        tokens["access_token"].as_str().unwrap().to_owned(),
        registered["organization_id"].as_str().unwrap().to_owned(),
    )
}

/// Nearest-rank percentile of milliseconds.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// `/readyz` probed `count` times, 20 ms apart, each on a fresh connection: p50, p99, max (ms).
async fn probe_readyz(base: &str, count: usize) -> (f64, f64, f64) {
    let mut latencies = Vec::with_capacity(count);
    for _ in 0..count {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let started = Instant::now();
        let ok = client
            .get(format!("{base}/readyz"))
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        latencies.push(if ok {
            started.elapsed().as_secs_f64() * 1000.0
        } else {
            f64::INFINITY
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let max = latencies.iter().copied().fold(0.0, f64::max);
    (
        percentile(&mut latencies, 0.50),
        percentile(&mut latencies, 0.99),
        max,
    )
}

/// A SAML response for `acs`, padded to about 370 KB with elements nested 20 deep, signed
/// (enveloped, RSA-SHA256) with the IdP key in `dir` by xmlsec1; base64.
fn signed_response(dir: &Path, acs: &str, entity_id: &str) -> String {
    // The worst the pre-scan admits: 190 runs of 20 nested elements (about 3,800 elements, under
    // its bound of 4,096), their text making up the rest of the 370 KB.
    let (depth, runs) = (20, 190);
    let tags: String = (0..depth).map(|i| format!("<p{i}>")).collect();
    let ends: String = (0..depth).rev().map(|i| format!("</p{i}>")).collect();
    let leaf = "x".repeat(370_000 / runs - tags.len() - ends.len());
    let padding = format!("{tags}{leaf}{ends}").repeat(runs);
    let document = format!(
        r##"<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" xmlns:saml="urn:oasis:names:tc:SAML:2.0:assertion" ID="_bench" Version="2.0" IssueInstant="2026-01-01T00:00:00Z" Destination="{acs}" InResponseTo="_unknown"><saml:Issuer>{entity_id}</saml:Issuer><ds:Signature xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:SignedInfo><ds:CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/><ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/><ds:Reference URI="#_bench"><ds:Transforms><ds:Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"/><ds:Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"/></ds:Transforms><ds:DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"/><ds:DigestValue></ds:DigestValue></ds:Reference></ds:SignedInfo><ds:SignatureValue></ds:SignatureValue></ds:Signature><samlp:Status><samlp:StatusCode Value="urn:oasis:names:tc:SAML:2.0:status:Success"/></samlp:Status><saml:Assertion ID="_assertion" Version="2.0" IssueInstant="2026-01-01T00:00:00Z"><saml:Issuer>{entity_id}</saml:Issuer><saml:Subject><saml:NameID Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress">ada@example.com</saml:NameID><saml:SubjectConfirmation Method="urn:oasis:names:tc:SAML:2.0:cm:bearer"><saml:SubjectConfirmationData NotOnOrAfter="2099-01-01T00:00:00Z" Recipient="{acs}" InResponseTo="_unknown"/></saml:SubjectConfirmation></saml:Subject><saml:AttributeStatement><saml:Attribute Name="padding"><saml:AttributeValue>{padding}</saml:AttributeValue></saml:Attribute></saml:AttributeStatement></saml:Assertion></samlp:Response>"##
    );
    let template = dir.join("response.xml");
    let signed = dir.join("signed.xml");
    fs::write(&template, document).unwrap();
    let key = dir.join("idp.key");
    let status = Command::new("xmlsec1")
        .arg("--sign")
        .arg("--privkey-pem")
        .arg(format!(
            "{},{}",
            key.display(),
            dir.join("idp.pem").display()
        ))
        .args([
            "--id-attr:ID",
            "urn:oasis:names:tc:SAML:2.0:protocol:Response",
            "--output",
        ])
        .arg(&signed)
        .arg(&template)
        .status()
        .expect("xmlsec1 is needed (apt-get install xmlsec1)");
    assert!(status.success(), "xmlsec1 could not sign the response");
    base64::engine::general_purpose::STANDARD.encode(fs::read(&signed).unwrap())
}

/// Phase 1: the ACS flooded by an organization's own admin, `/readyz` beside it.
async fn acs_flood(backend: &str, options: &Options) -> String {
    let server = Server::start(
        backend,
        options,
        &[
            ("GATEHOUSE_RATE_LIMITS", "free=1000000,business=1000000"),
            ("GATEHOUSE_LOG", "warn"),
        ],
    )
    .await;
    let client = reqwest::Client::new();
    let (token, _) = user(&client, &server.base, "flooder@example.com").await;
    let team = post(
        &client,
        &format!("{}/api/v1/organizations", server.base),
        Some(&token),
        &json!({ "name": "Flood" }),
    )
    .await;
    let org = team["id"].as_str().unwrap().to_owned();
    let set_plan = Command::new(&options.binary)
        .args(["orgs", "set-plan", &org, "business"])
        .env("GATEHOUSE_DATABASE_URL", &server.database_url)
        .env("GATEHOUSE_SECRET_KEY", SECRET_KEY)
        .output()
        .unwrap();
    assert!(
        set_plan.status.success(),
        "{}",
        String::from_utf8_lossy(&set_plan.stderr)
    );
    let keys = tempfile::tempdir().unwrap();
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "3650",
            "-subj",
            "/CN=bench-idp",
            "-keyout",
        ])
        .arg(keys.path().join("idp.key"))
        .arg("-out")
        .arg(keys.path().join("idp.pem"))
        .output()
        .expect("openssl is needed");
    assert!(made.status.success());
    let entity_id = "https://idp.bench.example";
    let configured = post(
        &client,
        &format!("{}/api/v1/sso/configurations", server.base),
        Some(&token),
        &json!({
            "organization_id": org,
            "provider": "saml",
            "idp_entity_id": entity_id,
            "idp_sso_url": "https://idp.bench.example/sso",
            "idp_certificate": fs::read_to_string(keys.path().join("idp.pem")).unwrap(),
            "domain_whitelist": ["example.com"],
            "auto_provision": true,
            "default_role": "member",
        }),
    )
    .await;
    let acs = configured["sp_acs_url"].as_str().unwrap().to_owned();
    let response = signed_response(keys.path(), &acs, entity_id);

    let idle = probe_readyz(&server.base, 200).await;
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicU64::new(0));
    let mut flooders = Vec::new();
    for _ in 0..options.flooders {
        let (stop, answered, response, url) = (
            stop.clone(),
            answered.clone(),
            response.clone(),
            format!("{}/sso/saml/{org}/acs", server.base),
        );
        flooders.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            while !stop.load(Ordering::Relaxed) {
                if client
                    .post(&url)
                    .form(&[("SAMLResponse", response.as_str()), ("RelayState", "/")])
                    .send()
                    .await
                    .is_ok()
                {
                    answered.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let started = Instant::now();
    let before = answered.load(Ordering::Relaxed);
    let probes = usize::try_from(options.seconds * 1000 / 40).unwrap_or(200);
    let flooded = probe_readyz(&server.base, probes).await;
    let per_sec =
        (answered.load(Ordering::Relaxed) - before) as f64 / started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for flooder in flooders {
        let _ = flooder.await;
    }
    format!(
        "| ACS flooded: `/readyz` p50 / p99 / max | idle {:.1} / {:.1} / {:.1} ms | flooded {:.1} / {:.1} / {:.1} ms | {per_sec:.1} ACS answers/s |\n",
        idle.0, idle.1, idle.2, flooded.0, flooded.1, flooded.2
    )
}

/// Phase 2: connections that send a chunked body that never ends to a route that takes none.
async fn held_connections(backend: &str, options: &Options) -> String {
    let server = Server::start(backend, options, &[("GATEHOUSE_LOG", "warn")]).await;
    let address = server.address();
    let mut streams = Vec::new();
    for _ in 0..1000 {
        if let Ok(mut stream) = TcpStream::connect(address) {
            use std::io::Write as _;
            let _ = stream.write_all(
                b"GET /livez HTTP/1.1\r\nHost: bench\r\nTransfer-Encoding: chunked\r\n\r\n",
            );
            streams.push(stream);
        }
    }
    tokio::time::sleep(Duration::from_secs(15)).await;
    let mut open = 0;
    for stream in &mut streams {
        stream
            .set_read_timeout(Some(Duration::from_millis(1)))
            .unwrap();
        let mut buffer = [0_u8; 4096];
        let still_open = loop {
            match stream.read(&mut buffer) {
                Ok(0) => break false,
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break true
                }
                Err(_) => break false,
            }
        };
        if still_open {
            open += 1;
        }
    }
    format!("| connections still open 15 s after a never-ending chunked body to `GET /livez` | {open} of {} |\n", streams.len())
}

/// Phase 3: bytes of log per request with long paths.
async fn log_bytes(backend: &str, options: &Options) -> String {
    let server = Server::start(
        backend,
        options,
        &[("GATEHOUSE_RATE_LIMITS", "free=1000000")],
    )
    .await;
    let client = reqwest::Client::new();
    let mut out = String::new();
    for (label, length) in [("7 KB paths (404)", 7_000), ("60 KB paths (414)", 60_000)] {
        let path = format!("/api/v1/{}", "p".repeat(length));
        let before = server.log_bytes();
        for _ in 0..1000 {
            let _ = client.get(format!("{}{path}", server.base)).send().await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        let per_request = (server.log_bytes() - before) as f64 / 1000.0;
        let _ = writeln!(out, "| log bytes per request, {label} | {per_request:.0} |");
    }
    out
}

/// Phase 4: what one person with many keys is served in one minute's window.
async fn one_person(backend: &str, options: &Options) -> String {
    let server = Server::start(backend, options, &[("GATEHOUSE_LOG", "warn")]).await;
    let client = reqwest::Client::new();
    let (token, org) = user(&client, &server.base, "many-keys@example.com").await;
    let mut keys = Vec::new();
    for n in 0..20 {
        let response = client
            .post(format!("{}/api/v1/api-keys", server.base))
            .bearer_auth(&token)
            .json(&json!({ "name": format!("key {n}"), "organization_id": org }))
            .send()
            .await
            .unwrap();
        if response.status() == 201 {
            keys.push(
                response.json::<Value>().await.unwrap()["key"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
    }
    let mut served = 0;
    for n in 0..2000 {
        let request = client.get(format!("{}/api/v1/users/me", server.base));
        let request = match keys.get(n % (keys.len() + 1)) {
            Some(key) => request
                .header("X-API-Key", key)
                .header("X-Organization-ID", &org),
            None => request.bearer_auth(&token),
        };
        if request.send().await.is_ok_and(|r| r.status() == 200) {
            served += 1;
        }
    }
    format!(
        "| one person, {} keys and a token, 2,000 requests in a minute's window (free plan, 60/min) | {served} served ({} key creations counted too) |\n",
        keys.len(),
        keys.len()
    )
}

async fn run_backend(backend: &str, options: &Options) -> String {
    let mut out = format!("\n## {backend}\n\n| finding | figure | | |\n|---|---|---|---|\n");
    out.push_str(&acs_flood(backend, options).await);
    out.push_str(&held_connections(backend, options).await);
    out.push_str(&log_bytes(backend, options).await);
    out.push_str(&one_person(backend, options).await);
    out
}
