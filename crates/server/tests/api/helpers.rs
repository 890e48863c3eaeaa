//! One running Gatehouse per test, with a helper per endpoint.

use std::collections::HashMap;

use gatehouse_server::{Application, Config};
use gatehouse_testkit::TestDatabase;
use reqwest::{header, Response, StatusCode};
use serde_json::{json, Value};

/// Runs the test body once against each backend: `<name>::sqlite` and `<name>::postgres`.
/// `#[on_both_backends]` over `async fn name(app: TestApp)`: the test runs as `name::sqlite` and
/// `name::postgres`, each against a server of its own on that backend.
pub(crate) use gatehouse_test_macros::on_both_backends;

#[derive(Clone, Copy, Debug)]
pub enum Backend {
    Sqlite,
    Postgres,
}

enum Database {
    Sqlite(#[allow(dead_code)] tempfile::TempDir),
    Postgres(#[allow(dead_code)] TestDatabase),
}

pub struct TestApp {
    pub base: String,
    /// The public URL the server names itself by (`http://127.0.0.1:PORT` unless
    /// [`Options::localhost`]).
    pub public_url: String,
    pub client: reqwest::Client,
    /// Where the server writes its mail.
    pub mail_dir: tempfile::TempDir,
    /// `http://ADDRESS/metrics` of the `GATEHOUSE_METRICS_BIND` listener, when started with
    /// [`Options::metrics_bind`].
    metrics_url: Option<String>,
    env: HashMap<&'static str, String>,
    _database: std::sync::Arc<Database>,
}

/// Settings a test changes from the defaults.
#[derive(Default)]
pub struct Options {
    pub rate_limits: Option<&'static str>,
    pub redis_url: Option<String>,
    /// Seconds between delivery attempts (`GATEHOUSE_WEBHOOK_RETRY_SCHEDULE`).
    pub retry_schedule: Option<&'static str>,
    /// Trust this CA and allow loopback targets: for a test receiver.
    pub webhook_ca_file: Option<std::path::PathBuf>,
    /// `GATEHOUSE_TRUSTED_PROXIES`.
    pub trusted_proxies: Option<&'static str>,
    /// Serve as `http://localhost:PORT` (a free port picked first): a public URL whose host is
    /// a domain name, which WebAuthn needs (browsers refuse an IP address as its RP id).
    pub localhost: bool,
    /// Leave `GATEHOUSE_CONTROL_TOKEN` unset (else it is [`CONTROL_TOKEN`]).
    pub control_plane_off: bool,
    /// Serve `/metrics` on a listener of its own (`GATEHOUSE_METRICS_BIND`, a free port).
    pub metrics_bind: bool,
    /// `GATEHOUSE_DNS_RESOLVER`; unset, the tests' shared DNS server ([`dns`]).
    pub dns_resolver: Option<std::net::SocketAddr>,
    /// Any other `GATEHOUSE_*` settings, set last (over those the fields above make).
    pub env: Vec<(&'static str, String)>,
}

/// A registered user with a live session.
pub struct LoggedIn {
    pub user_id: String,
    pub organization_id: String,
    pub email: String,
    pub access_token: String,
    pub refresh_token: String,
}

pub const PASSWORD: &str = "correct horse battery";

/// `GATEHOUSE_CONTROL_TOKEN` of every test server but those started with
/// [`Options::control_plane_off`].
pub const CONTROL_TOKEN: &str = "test-operator-token-7f3a9c1e5b";

/// The Python that runs the tests' other parties (authlib, PyJWT): `GATEHOUSE_TEST_PYTHON`,
/// which `scripts/test` points at the project's virtual environment, else `python3`.
pub fn python() -> String {
    std::env::var("GATEHOUSE_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

/// Runs one of the OAuth client scripts of `tests/oauth_client` (a party written with authlib)
/// with [`python`], and returns the JSON object it prints; fails the test when it fails.
pub async fn oauth_client(script: &str, args: &[&str]) -> Value {
    let path = format!("{}/tests/oauth_client/{script}", env!("CARGO_MANIFEST_DIR"));
    let output = tokio::process::Command::new(python())
        .arg(path)
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!("python3 is needed for this test (apt-get install python3): {e}")
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("ModuleNotFoundError"),
        "authlib and requests are needed: run scripts/test, which installs them, or pip install authlib requests\n{stderr}"
    );
    assert!(output.status.success(), "{script} failed:\n{stderr}");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The DNS server every test server asks (`GATEHOUSE_DNS_RESOLVER`): a real one on loopback,
/// started once for the whole test binary on a thread of its own (each test's runtime ends with
/// the test). Tests publish their TXT records with `add_txt`, each its own random value.
pub fn dns() -> &'static gatehouse_dns::test_server::TestDnsServer {
    static DNS: std::sync::OnceLock<gatehouse_dns::test_server::TestDnsServer> =
        std::sync::OnceLock::new();
    DNS.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let server = gatehouse_dns::test_server::TestDnsServer::start()
                    .await
                    .unwrap();
                tx.send(server).unwrap();
                std::future::pending::<()>().await;
            });
        });
        rx.recv().unwrap()
    })
}

impl TestApp {
    /// A server on a SQLite file of its own (`#[on_both_backends]`'s SQLite fixture).
    pub async fn sqlite() -> Self {
        Self::spawn(Backend::Sqlite).await
    }

    /// A server on a PostgreSQL database of its own (`#[on_both_backends]`'s PostgreSQL
    /// fixture).
    pub async fn postgres() -> Self {
        Self::spawn(Backend::Postgres).await
    }

    pub async fn spawn(backend: Backend) -> Self {
        Self::spawn_with(backend, Options::default()).await
    }

    pub async fn spawn_with(backend: Backend, options: Options) -> Self {
        let (database, url) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let url = gatehouse_testkit::sqlite_url(&dir);
                (Database::Sqlite(dir), url)
            }
            Backend::Postgres => {
                let db = TestDatabase::create().await;
                let url = db.url().to_owned();
                (Database::Postgres(db), url)
            }
        };
        let mut env = HashMap::new();
        env.insert("GATEHOUSE_BIND", "127.0.0.1:0".to_owned());
        env.insert("GATEHOUSE_DATABASE_URL", url);
        env.insert(
            "GATEHOUSE_SECRET_KEY",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=".to_owned(),
        );
        env.insert("GATEHOUSE_DB_POOL_SIZE", "4".to_owned());
        // Generous by default, on every plan, so that only the rate-limit tests meet the limit
        // (a sixth of a budget may come at once: 166 requests on business's 1,000 a minute).
        env.insert(
            "GATEHOUSE_RATE_LIMITS",
            options
                .rate_limits
                .unwrap_or(
                    "free=100000,starter=100000,pro=100000,business=100000,enterprise=100000",
                )
                .to_owned(),
        );
        if let Some(redis) = options.redis_url {
            env.insert("GATEHOUSE_REDIS_URL", redis);
        }
        if options.localhost {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            env.insert("GATEHOUSE_BIND", format!("127.0.0.1:{port}"));
            env.insert("GATEHOUSE_PUBLIC_URL", format!("http://localhost:{port}"));
        }
        if !options.control_plane_off {
            env.insert("GATEHOUSE_CONTROL_TOKEN", CONTROL_TOKEN.to_owned());
        }
        if options.metrics_bind {
            env.insert("GATEHOUSE_METRICS_BIND", "127.0.0.1:0".to_owned());
        }
        env.insert(
            "GATEHOUSE_DNS_RESOLVER",
            options
                .dns_resolver
                .unwrap_or_else(|| dns().address())
                .to_string(),
        );
        if let Some(proxies) = options.trusted_proxies {
            env.insert("GATEHOUSE_TRUSTED_PROXIES", proxies.to_owned());
        }
        if let Some(schedule) = options.retry_schedule {
            env.insert("GATEHOUSE_WEBHOOK_RETRY_SCHEDULE", schedule.to_owned());
        }
        if let Some(ca) = options.webhook_ca_file {
            env.insert("GATEHOUSE_WEBHOOK_CA_FILE", ca.to_str().unwrap().to_owned());
            env.insert("GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS", "true".to_owned());
            env.insert("GATEHOUSE_WEBHOOK_TIMEOUT_SECS", "2".to_owned());
        }
        env.extend(options.env);
        Self::start(env, std::sync::Arc::new(database)).await
    }

    async fn start(
        mut env: HashMap<&'static str, String>,
        database: std::sync::Arc<Database>,
    ) -> Self {
        let mail_dir = tempfile::tempdir().unwrap();
        env.insert(
            "GATEHOUSE_MAIL_DIR",
            mail_dir.path().to_str().unwrap().to_owned(),
        );
        let config = Config::load_from(None, |name| env.get(name).cloned()).unwrap();
        let app = Application::build(config).await.unwrap();
        let base = format!("http://{}", app.address());
        let public_url = app.public_url().to_owned();
        let metrics_url = app
            .metrics_address()
            .map(|address| format!("http://{address}/metrics"));
        tokio::spawn(app.run_until_stopped());
        Self {
            base,
            public_url,
            metrics_url,
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            mail_dir,
            env,
            _database: database,
        }
    }

    /// The server's configuration, as it was started with.
    pub fn config(&self) -> Config {
        Config::load_from(None, |name| self.env.get(name).cloned()).unwrap()
    }

    /// Where the `GATEHOUSE_METRICS_BIND` listener serves the metrics, when it was started.
    pub fn metrics_url(&self) -> Option<String> {
        self.metrics_url.clone()
    }

    /// A second server on the same database: another replica.
    pub async fn replica(&self) -> Self {
        let mut env = self.env.clone();
        // Replicas serve one public URL: tokens issued by one are valid at the other.
        env.insert("GATEHOUSE_PUBLIC_URL", self.base.clone());
        Self::start(env, self._database.clone()).await
    }

    /// Moves an organization to another plan, as the operator's `gatehouse orgs set-plan` does.
    pub async fn set_plan(&self, organization_id: &str, plan: &str) {
        let config = Config::load_from(None, |name| self.env.get(name).cloned()).unwrap();
        gatehouse_server::app::set_plan(
            &config,
            gatehouse_domain::model::OrganizationId::from_uuid(organization_id.parse().unwrap()),
            plan.parse().unwrap(),
        )
        .await
        .unwrap();
    }

    /// Time passes for one timestamp column: every row's `column` of `table` moves `by` into
    /// the past, as if it had been written that long ago. The server's clock is the real one,
    /// so this is how a test waits out an idle timeout or a password's maximum age.
    pub async fn rewind(&self, table: &str, column: &str, by: time::Duration) {
        let url = &self.env["GATEHOUSE_DATABASE_URL"];
        if url.starts_with("postgres") {
            let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            let seconds = by.whole_seconds();
            client
                .execute(
                    &format!(
                        "UPDATE {table} SET {column} = {column} - make_interval(secs => {seconds})"
                    ),
                    &[],
                )
                .await
                .unwrap();
        } else {
            use diesel::{sql_types, Connection, RunQueryDsl};
            #[derive(diesel::QueryableByName)]
            struct Row {
                #[diesel(sql_type = sql_types::BigInt)]
                rowid: i64,
                #[diesel(sql_type = sql_types::TimestamptzSqlite)]
                at: time::OffsetDateTime,
            }
            let path = url.trim_start_matches("sqlite://").to_owned();
            let (table, column) = (table.to_owned(), column.to_owned());
            tokio::task::spawn_blocking(move || {
                let mut conn = diesel::SqliteConnection::establish(&path).unwrap();
                // The running server writes too: wait for its transactions instead of failing.
                diesel::sql_query("PRAGMA busy_timeout = 10000")
                    .execute(&mut conn)
                    .unwrap();
                let rows: Vec<Row> =
                    diesel::sql_query(format!("SELECT rowid, {column} AS at FROM {table}"))
                        .load(&mut conn)
                        .unwrap();
                for row in rows {
                    diesel::sql_query(format!("UPDATE {table} SET {column} = ? WHERE rowid = ?"))
                        .bind::<sql_types::TimestamptzSqlite, _>(row.at - by)
                        .bind::<sql_types::BigInt, _>(row.rowid)
                        .execute(&mut conn)
                        .unwrap();
                }
            })
            .await
            .unwrap();
        }
    }

    /// The sealed bytes of every mail in the outbox, as the database holds them.
    pub async fn outbox_rows(&self) -> Vec<Vec<u8>> {
        let url = self.env["GATEHOUSE_DATABASE_URL"].clone();
        if url.starts_with("postgres") {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            tokio::spawn(connection);
            let rows = client
                .query("SELECT sealed FROM mail_outbox", &[])
                .await
                .unwrap();
            rows.iter().map(|row| row.get(0)).collect()
        } else {
            use diesel::{sql_types, Connection, RunQueryDsl};
            #[derive(diesel::QueryableByName)]
            struct Row {
                #[diesel(sql_type = sql_types::Binary)]
                sealed: Vec<u8>,
            }
            let path = url.trim_start_matches("sqlite://").to_owned();
            tokio::task::spawn_blocking(move || {
                let mut conn = diesel::SqliteConnection::establish(&path).unwrap();
                diesel::sql_query("PRAGMA busy_timeout = 10000")
                    .execute(&mut conn)
                    .unwrap();
                let rows: Vec<Row> = diesel::sql_query("SELECT sealed FROM mail_outbox")
                    .load(&mut conn)
                    .unwrap();
                rows.into_iter().map(|row| row.sealed).collect()
            })
            .await
            .unwrap()
        }
    }

    /// Takes the PostgreSQL database away under the running server (the store goes down).
    pub async fn lose_the_database(&self) {
        let Database::Postgres(db) = self._database.as_ref() else {
            panic!("only a PostgreSQL test app can lose its database");
        };
        let (client, connection) = tokio_postgres::connect(db.admin_url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("DROP DATABASE \"{}\" WITH (FORCE)", db.name()))
            .await
            .unwrap();
    }

    /// Waits until the mail outbox is empty: every mail queued so far has been sent (the worker
    /// sends them as soon as their change commits).
    pub async fn mail_drained(&self) {
        self.gauge_drained("gatehouse_mail_queued").await;
    }

    /// Waits until no delivery has an attempt to come: every delivery made so far has been
    /// sent and recorded for good. How a test shows that something is not sent (again),
    /// instead of sleeping.
    pub async fn deliveries_drained(&self) {
        self.gauge_drained("gatehouse_webhook_deliveries_pending")
            .await;
    }

    /// Waits until the operator's gauge `family` (read from `/control/metrics`, so the control
    /// plane must be on) is 0.
    async fn gauge_drained(&self, family: &str) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
        let drained = format!("{family} 0");
        loop {
            let metrics = self
                .as_operator(reqwest::Method::GET, "/control/metrics", None)
                .await
                .text()
                .await
                .unwrap();
            let gauge = metrics
                .lines()
                .find(|line| line.starts_with(&format!("{family} ")))
                .unwrap_or_else(|| panic!("no {family} in {metrics}"));
            if gauge == drained {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{family} did not drain: {gauge}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The mails sent so far, oldest first, as raw text, once the outbox has drained.
    pub async fn mails(&self) -> Vec<String> {
        self.mail_drained().await;
        let mut paths: Vec<_> = std::fs::read_dir(self.mail_dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "eml"))
            .collect();
        paths.sort();
        paths
            .into_iter()
            .map(|path| std::fs::read_to_string(path).unwrap())
            .collect()
    }

    /// The invitation token in the newest mail to `email`.
    pub async fn invitation_token_for(&self, email: &str) -> String {
        self.mailed_token(email, "/invitations/").await
    }

    /// The token of the link to `{public_url}{page}{token}` in the newest mail to `email`
    /// that has one.
    pub async fn mailed_token(&self, email: &str, page: &str) -> String {
        let mail = self
            .mails()
            .await
            .into_iter()
            .rev()
            .map(|mail| mail.replace("=\r\n", "").replace("=\n", ""))
            .find(|mail| mail.contains(email) && mail.contains(page))
            .unwrap_or_else(|| panic!("no mail to {email} with a link to {page}"));
        let start = mail.find(page).unwrap_or_default() + page.len();
        mail[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect()
    }

    pub async fn get_as(&self, token: &str, path: &str) -> Response {
        self.client
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
    }

    /// A request as `token` inside the organization (`X-Organization-ID`).
    pub async fn in_org(
        &self,
        method: reqwest::Method,
        token: &str,
        organization_id: &str,
        path: &str,
        body: Option<Value>,
    ) -> Response {
        let mut request = self
            .client
            .request(method, self.url(path))
            .bearer_auth(token)
            .header("X-Organization-ID", organization_id);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap()
    }

    pub async fn send_as(
        &self,
        method: reqwest::Method,
        token: &str,
        path: &str,
        body: Option<Value>,
    ) -> Response {
        let mut request = self
            .client
            .request(method, self.url(path))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        request.send().await.unwrap()
    }

    /// A request to the control plane with the operator's token.
    pub async fn as_operator(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Response {
        self.send_as(method, CONTROL_TOKEN, path, body).await
    }

    /// The operator's view of the audit log, `/control/audit` with `query` (`?action=...`): the
    /// page's records, newest first.
    pub async fn audit_records(&self, query: &str) -> Vec<Value> {
        let page = json_of(
            self.as_operator(
                reqwest::Method::GET,
                &format!("/control/audit{query}"),
                None,
            )
            .await,
            200,
        )
        .await;
        page["items"].as_array().cloned().unwrap_or_default()
    }

    /// Claims `domain` for the organization, publishes its TXT record on the tests' DNS server
    /// and verifies it; returns the verified domain's JSON.
    pub async fn verified_domain(&self, token: &str, organization_id: &str, domain: &str) -> Value {
        let path = format!("/api/v1/organizations/{organization_id}/domains");
        let added = json_of(
            self.send_as(
                reqwest::Method::POST,
                token,
                &path,
                Some(serde_json::json!({ "domain": domain })),
            )
            .await,
            201,
        )
        .await;
        dns().add_txt(
            added["verification"]["name"].as_str().unwrap(),
            added["verification"]["value"].as_str().unwrap(),
        );
        let verified = json_of(
            self.send_as(
                reqwest::Method::POST,
                token,
                &format!("{path}/{}/verify", added["id"].as_str().unwrap()),
                None,
            )
            .await,
            200,
        )
        .await;
        assert_eq!(verified["status"], "verified");
        verified
    }

    /// Creates a team organization as the caller; returns its JSON.
    pub async fn create_team(&self, token: &str, name: &str) -> Value {
        json_of(
            self.send_as(
                reqwest::Method::POST,
                token,
                "/api/v1/organizations",
                Some(json!({ "name": name })),
            )
            .await,
            201,
        )
        .await
    }

    /// Invites `email` into the organization as `role`, as the caller.
    pub async fn invite(
        &self,
        token: &str,
        organization_id: &str,
        email: &str,
        role: &str,
    ) -> Response {
        self.send_as(
            reqwest::Method::POST,
            token,
            &format!("/api/v1/organizations/{organization_id}/members"),
            Some(json!({ "email": email, "role": role })),
        )
        .await
    }

    /// Registers and logs in `email`, then makes them a member of the organization with `role`
    /// through a real invitation sent by `inviter_token`.
    pub async fn member_of(
        &self,
        inviter_token: &str,
        organization_id: &str,
        email: &str,
        role: &str,
    ) -> LoggedIn {
        let user = self.logged_in(email).await;
        json_of(
            self.invite(inviter_token, organization_id, email, role)
                .await,
            201,
        )
        .await;
        let token = self.invitation_token_for(email).await;
        json_of(
            self.send_as(
                reqwest::Method::POST,
                &user.access_token,
                "/api/v1/invitations/accept",
                Some(json!({ "token": token })),
            )
            .await,
            200,
        )
        .await;
        user
    }

    /// The OpenAPI document the server serves, `GET /api/v1/openapi.json`.
    pub async fn openapi_document(&self) -> Value {
        json_of(
            self.client
                .get(self.url("/api/v1/openapi.json"))
                .send()
                .await
                .unwrap(),
            200,
        )
        .await
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> Response {
        self.client
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// A body sent as written, labelled JSON.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> Response {
        self.client
            .post(self.url(path))
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn register(&self, email: &str, password: &str, full_name: &str) -> Response {
        self.post_json(
            "/api/v1/auth/register",
            &json!({ "email": email, "password": password, "full_name": full_name }),
        )
        .await
    }

    pub async fn login(&self, email: &str, password: &str) -> Response {
        self.post_json(
            "/api/v1/auth/login",
            &json!({ "email": email, "password": password }),
        )
        .await
    }

    pub async fn refresh(&self, refresh_token: &str) -> Response {
        self.post_json(
            "/api/v1/auth/refresh",
            &json!({ "refresh_token": refresh_token }),
        )
        .await
    }

    pub async fn logout(&self, access_token: &str) -> Response {
        self.client
            .post(self.url("/api/v1/auth/logout"))
            .bearer_auth(access_token)
            .send()
            .await
            .unwrap()
    }

    pub async fn me(&self, access_token: &str) -> Response {
        self.client
            .get(self.url("/api/v1/users/me"))
            .bearer_auth(access_token)
            .send()
            .await
            .unwrap()
    }

    pub async fn change_password(&self, access_token: &str, current: &str, new: &str) -> Response {
        self.client
            .post(self.url("/api/v1/auth/password"))
            .bearer_auth(access_token)
            .json(&json!({ "current_password": current, "new_password": new }))
            .send()
            .await
            .unwrap()
    }

    pub async fn create_api_key(
        &self,
        access_token: &str,
        name: &str,
        organization_id: &str,
    ) -> Response {
        self.client
            .post(self.url("/api/v1/api-keys"))
            .bearer_auth(access_token)
            .json(&json!({ "name": name, "organization_id": organization_id }))
            .send()
            .await
            .unwrap()
    }

    pub async fn health_with_key(&self, key: &str, organization_id: &str) -> Response {
        self.client
            .get(self.url("/api/v1/health"))
            .header("X-API-Key", key)
            .header("X-Organization-ID", organization_id)
            .send()
            .await
            .unwrap()
    }

    /// Registers `email` and logs in.
    pub async fn logged_in(&self, email: &str) -> LoggedIn {
        let registered = json_of(self.register(email, PASSWORD, "Test User").await, 201).await;
        let tokens = json_of(self.login(email, PASSWORD).await, 200).await;
        LoggedIn {
            user_id: registered["user_id"].as_str().unwrap().to_owned(),
            organization_id: registered["organization_id"].as_str().unwrap().to_owned(),
            email: email.to_owned(),
            access_token: tokens["access_token"].as_str().unwrap().to_owned(),
            refresh_token: tokens["refresh_token"].as_str().unwrap().to_owned(),
        }
    }
}

/// Asserts the status and returns the JSON body.
pub async fn json_of(response: Response, status: u16) -> Value {
    let actual = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(
        actual,
        StatusCode::from_u16(status).unwrap(),
        "unexpected status; body: {text}"
    );
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("body is not JSON ({e}): {text}"))
}

/// Asserts an error response: the status, and a `detail` string.
pub async fn detail_of(response: Response, status: u16) -> String {
    let body = json_of(response, status).await;
    body["detail"]
        .as_str()
        .unwrap_or_else(|| panic!("detail is not a string: {body}"))
        .to_owned()
}

/// Asserts a list-shaped 422 and returns the `loc`s it names.
pub async fn locs_of(response: Response) -> Vec<Vec<String>> {
    let body = json_of(response, 422).await;
    let detail = body["detail"]
        .as_array()
        .unwrap_or_else(|| panic!("detail is not a list: {body}"));
    detail
        .iter()
        .map(|error| {
            assert!(error["msg"].is_string(), "{error}");
            assert!(error["type"].is_string(), "{error}");
            error["loc"]
                .as_array()
                .unwrap()
                .iter()
                .map(|part| match part {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect()
}

pub fn loc(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// A browser: follows no redirect by itself, keeps its cookies by hand.
pub struct Browser {
    http: reqwest::Client,
    cookies: Vec<(String, String)>,
    /// The client address a trusted proxy reports for every request, when set.
    forwarded_for: Option<String>,
}

impl Browser {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .unwrap();
        Self {
            http,
            cookies: Vec::new(),
            forwarded_for: None,
        }
    }

    /// A browser whose requests a trusted proxy reports as coming from `address`.
    pub fn behind_proxy_as(address: &str) -> Self {
        Self {
            forwarded_for: Some(address.to_owned()),
            ..Self::new()
        }
    }

    fn request(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        let request = request.header(header::COOKIE, self.cookie_header());
        match &self.forwarded_for {
            Some(address) => request.header("X-Forwarded-For", address),
            None => request,
        }
    }

    /// The value of one of the browser's cookies, as the server set it.
    pub fn cookie(&self, name: &str) -> Option<String> {
        self.cookies
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep_cookies(&mut self, response: &Response) {
        for set in response.headers().get_all(header::SET_COOKIE) {
            let set = set.to_str().unwrap();
            let (pair, _) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            self.cookies.retain(|(n, _)| n != name);
            if !value.is_empty() {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    pub async fn get(&mut self, url: &str) -> Response {
        let response = self.request(self.http.get(url)).send().await.unwrap();
        self.keep_cookies(&response);
        response
    }

    pub async fn post_form(&mut self, url: &str, form: &[(&str, &str)]) -> Response {
        let response = self
            .request(self.http.post(url))
            .form(form)
            .send()
            .await
            .unwrap();
        self.keep_cookies(&response);
        response
    }
}

/// The value of a hidden field of the page.
pub fn hidden(page: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = page.find(&marker).unwrap() + marker.len();
    let end = start + page[start..].find('"').unwrap();
    page[start..end].replace("&amp;", "&")
}

/// Where test artifacts (screenshots) go: `<target>/test-artifacts`.
pub fn artifacts() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        std::path::PathBuf::from,
    );
    let dir = target.join("test-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The path of a headless-Chromium script in `tests/browser`, once Chromium and
/// playwright-core are known to be there (else a message that says what to install).
pub fn browser_script(name: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser");
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists()
            || std::env::var_os("CHROMIUM").is_some(),
        "Chromium is needed for this test: apt-get install chromium (or set CHROMIUM to its path)"
    );
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "playwright-core is needed for this test: npm ci --prefix crates/server/tests/browser"
    );
    dir.join(name)
}

/// Runs a script of `tests/browser` in Node.js (headless Chromium) with these arguments, the
/// screenshot's path last, and returns the one JSON object it prints; the test fails with the
/// script's error output when the run fails, or when no screenshot came of it.
pub async fn in_browser<S: AsRef<std::ffi::OsStr>>(
    script: &str,
    args: impl IntoIterator<Item = S>,
    screenshot: &std::path::Path,
) -> Value {
    let output = tokio::process::Command::new("node")
        .arg(browser_script(script))
        .args(args)
        .arg(screenshot)
        .output()
        .await
        .unwrap_or_else(|e| {
            panic!("Node.js is needed for this test (apt-get install nodejs): {e}")
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the browser run failed:\n{stderr}");
    let size = std::fs::metadata(screenshot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 1_000, "a screenshot at {}", screenshot.display());
    serde_json::from_slice(&output.stdout).unwrap()
}
