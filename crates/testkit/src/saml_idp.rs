//! A real SAML 2.0 identity provider for tests: `saml_idp/idp.py` (pysaml2, with `xmlsec1`
//! doing the signatures), run as a child process.
//!
//! [`TestIdp::start`] runs it with the Python of `GATEHOUSE_TEST_PYTHON` (default `python3`),
//! which needs pysaml2 and lxml (`pip install -r scripts/test-requirements.txt`, as
//! `scripts/test` does into `.venv`), and Debian's `xmlsec1` on `PATH`. Anything missing is a
//! panic that says what to install: the tests are never skipped.
//!
//! The IdP prints one JSON line (its addresses and certificates) when it is ready, serves
//! until its standard input closes, and is ended when the [`TestIdp`] is dropped (its stdin is
//! closed and the process killed). A `TestIdp` kept in a `static` lives as long as the test
//! process: its stdin closes, and the IdP exits, when the process does.
//!
//! ```no_run
//! # async fn demo() {
//! use gatehouse_testkit::saml_idp::TestIdp;
//!
//! let idp = TestIdp::start();
//! let signed = idp
//!     .respond(serde_json::json!({
//!         "acs_url": "https://sp.example.com/acs",
//!         "audience": "https://sp.example.com/metadata",
//!         "email": "ada@example.com",
//!         "sign": "both",
//!     }))
//!     .await;
//! let saml_response = signed["saml_response"].as_str().unwrap();
//! # let _ = saml_response;
//! # }
//! ```

use std::ffi::OsString;
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Environment variable naming the Python that runs the IdP (default `python3`).
pub const PYTHON_ENV: &str = "GATEHOUSE_TEST_PYTHON";

/// How long the IdP may take to print its JSON line.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How long one request to the IdP may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// At most this much of the IdP's stderr is kept (the end of it), for failure messages.
const STDERR_KEPT: usize = 64 * 1024;

/// What to install when the IdP cannot start.
const INSTALL_HINT: &str = "the SAML test IdP needs Python 3 with pysaml2 and lxml \
     (`pip install -r scripts/test-requirements.txt`, which scripts/test installs into .venv; \
     point GATEHOUSE_TEST_PYTHON at that Python, e.g. .venv/bin/python) and Debian's `xmlsec1` \
     (`apt-get install xmlsec1`)";

/// The path of `idp.py`.
pub fn idp_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("saml_idp/idp.py")
}

/// The running test IdP. See the [module documentation](self).
pub struct TestIdp {
    child: Child,
    stdin: Option<ChildStdin>,
    url: String,
    entity_id: String,
    sso_url: String,
    certificate: String,
    other_certificate: String,
    http: reqwest::Client,
}

impl fmt::Debug for TestIdp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestIdp")
            .field("pid", &self.child.id())
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl TestIdp {
    /// Starts the IdP and waits (at most 30 s) for its JSON line.
    ///
    /// # Panics
    /// When Python, pysaml2, lxml or `xmlsec1` is missing, or the IdP does not start: the
    /// message names what to install and ends with what the IdP wrote to stderr.
    pub fn start() -> Self {
        if find_on_path("xmlsec1").is_none() && !Path::new("/usr/bin/xmlsec1").exists() {
            panic!("`xmlsec1` is not on PATH: {INSTALL_HINT}");
        }
        let python = std::env::var_os(PYTHON_ENV).unwrap_or_else(|| OsString::from("python3"));
        let script = idp_script();
        let mut child = match Command::new(&python)
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
        {
            Ok(child) => child,
            Err(error) => panic!(
                "cannot run {} ({PYTHON_ENV} or python3) for {}: {error}; {INSTALL_HINT}",
                Path::new(&python).display(),
                script.display()
            ),
        };
        let stdin = child.stdin.take();
        let stderr = Arc::new(Mutex::new(String::new()));
        if let Some(pipe) = child.stderr.take() {
            let kept = Arc::clone(&stderr);
            std::thread::spawn(move || keep_stderr(pipe, &kept));
        }
        let (lines, line) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut first = String::new();
                let read = BufReader::new(stdout).read_line(&mut first);
                let _ = lines.send(read.map(|_| first));
            });
        }

        let fail = |mut child: Child, why: String| -> ! {
            let _ = child.kill();
            let _ = child.wait();
            // Give the stderr thread a moment to collect the traceback.
            std::thread::sleep(Duration::from_millis(200));
            let stderr = stderr.lock().map(|s| s.clone()).unwrap_or_default();
            let missing = if stderr.contains("No module named") {
                "a Python module is missing; "
            } else {
                ""
            };
            panic!(
                "the SAML test IdP ({}) did not start: {why}; {missing}{INSTALL_HINT}\n\
                 --- its stderr ---\n{stderr}",
                script.display()
            )
        };

        let first = match line.recv_timeout(START_TIMEOUT) {
            Ok(Ok(first)) if !first.trim().is_empty() => first,
            Ok(Ok(_)) => fail(child, "it exited before printing its JSON line".to_owned()),
            Ok(Err(error)) => fail(child, format!("reading its stdout failed: {error}")),
            Err(_) => fail(
                child,
                format!("no JSON line within {} s", START_TIMEOUT.as_secs()),
            ),
        };
        let info: serde_json::Value = match serde_json::from_str(&first) {
            Ok(info) => info,
            Err(error) => fail(
                child,
                format!("its first line is not JSON ({error}): {first}"),
            ),
        };
        let field = |name: &str| info[name].as_str().map(str::to_owned);
        let (Some(url), Some(entity_id), Some(sso_url), Some(certificate), Some(other_certificate)) = (
            field("url"),
            field("entity_id"),
            field("sso_url"),
            field("certificate"),
            field("other_certificate"),
        ) else {
            fail(child, format!("its JSON line lacks a field: {first}"))
        };
        let http = match reqwest::Client::builder()
            .no_proxy()
            // A fresh connection per request: tests each run their own Tokio runtime, and a
            // pooled connection belongs to the runtime that opened it.
            .pool_max_idle_per_host(0)
            .timeout(REQUEST_TIMEOUT)
            .build()
        {
            Ok(http) => http,
            Err(error) => fail(child, format!("building the HTTP client failed: {error}")),
        };
        Self {
            child,
            stdin,
            url,
            entity_id,
            sso_url,
            certificate,
            other_certificate,
            http,
        }
    }

    /// Its base URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Its entity id (the URL of its metadata): the `Issuer` of what it signs.
    pub fn entity_id(&self) -> &str {
        &self.entity_id
    }

    /// Its single sign-on URL (HTTP-Redirect binding).
    pub fn sso_url(&self) -> &str {
        &self.sso_url
    }

    /// The PEM certificate of its signing key.
    pub fn certificate(&self) -> &str {
        &self.certificate
    }

    /// The PEM certificate of the attacker's key (`"key": "other"`).
    pub fn other_certificate(&self) -> &str {
        &self.other_certificate
    }

    /// `POST /response`: a crafted response (see `build_response` in `idp.py` for the fields:
    /// `acs_url`, `audience`, `email`, `in_response_to`, `sign`, `key`, `algorithm`, `issuer`,
    /// `destination`, `recipient`, the time offsets, `name`, `attack`, ...), answered
    /// `{saml_response, xml, assertion_id}`.
    ///
    /// # Panics
    /// On any answer but 200, with its body (a 400 names the bad field, a 500 holds the
    /// traceback).
    pub async fn respond(&self, request: serde_json::Value) -> serde_json::Value {
        let url = format!("{}/response", self.url);
        let sent = self.http.post(&url).json(&request).send().await;
        json_answer("POST /response", sent).await
    }

    /// `GET` of the redirect URL a service provider produced (the IdP's `/sso` with
    /// `SAMLRequest` and `RelayState`), with `email` and `format=json` appended: what the IdP
    /// read from the AuthnRequest and its signed answer for that user,
    /// `{request_id, acs_url, audience, relay_state, saml_response, xml, assertion_id}`.
    ///
    /// # Panics
    /// When the URL does not parse, or on any answer but 200 (pysaml2 refusing the
    /// AuthnRequest is a 400 saying why), with its body.
    pub async fn answer(&self, redirect_url: &str, email: &str) -> serde_json::Value {
        let mut url = match reqwest::Url::parse(redirect_url) {
            Ok(url) => url,
            Err(error) => panic!("not a URL ({error}): {redirect_url}"),
        };
        url.query_pairs_mut()
            .append_pair("email", email)
            .append_pair("format", "json");
        let sent = self.http.get(url).send().await;
        json_answer("GET /sso", sent).await
    }
}

impl Drop for TestIdp {
    fn drop(&mut self) {
        // EOF on its stdin ends the IdP; kill it too, in case it hangs.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn json_answer(
    what: &str,
    sent: Result<reqwest::Response, reqwest::Error>,
) -> serde_json::Value {
    let response = match sent {
        Ok(response) => response,
        Err(error) => panic!("the SAML test IdP did not answer {what}: {error}"),
    };
    let status = response.status();
    let body = match response.text().await {
        Ok(body) => body,
        Err(error) => panic!("reading the SAML test IdP's answer to {what} failed: {error}"),
    };
    if status != reqwest::StatusCode::OK {
        panic!("the SAML test IdP answered {what} with {status}:\n{body}");
    }
    match serde_json::from_str(&body) {
        Ok(value) => value,
        Err(error) => panic!("the SAML test IdP's answer to {what} is not JSON ({error}):\n{body}"),
    }
}

/// Reads the IdP's stderr to its end, keeping the last [`STDERR_KEPT`] bytes.
fn keep_stderr(pipe: impl Read, kept: &Mutex<String>) {
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
        if let Ok(mut kept) = kept.lock() {
            kept.push_str(&String::from_utf8_lossy(&line));
            if kept.len() > STDERR_KEPT {
                let mut cut = kept.len() - STDERR_KEPT;
                while !kept.is_char_boundary(cut) {
                    cut += 1;
                }
                kept.drain(..cut);
            }
        }
        line.clear();
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}
