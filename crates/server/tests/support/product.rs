//! The real `gatehouse` binary as a product sees it, for tests/product*.rs: an operator's
//! server on a fixed port (so that a restart after `gatehouse keys rotate` keeps its key set's
//! URL), people who register, sign in and join organizations through mailed invitations, and
//! the example product service's verifier pointed at it.
// Each test binary that includes this uses part of it.
#![allow(dead_code)]

use std::{process::Command, time::Duration};

use gatehouse_example_product::State;
use gatehouse_verify::{Verifier, WebhookVerifier};
use serde_json::{json, Value};

use crate::served::{gatehouse, Database, Served};

/// The tokens' issuer: `GATEHOUSE_PUBLIC_URL` of every served binary.
pub const ISSUER: &str = "http://gatehouse.test";
pub const PASSWORD: &str = "correct horse battery";
const SECRET_KEY: &str = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

pub struct Gatehouse {
    served: Option<Served>,
    settings: Vec<(String, String)>,
    pub base: String,
    address: String,
    database: Database,
    dir: tempfile::TempDir,
    client: reqwest::Client,
}

impl Gatehouse {
    /// Serves the binary on `backend` ("sqlite" or "postgres").
    pub async fn start(backend: &str) -> Self {
        Self::start_with(backend, &[]).await
    }

    /// Serves the binary on `backend` with these settings besides the usual ones.
    pub async fn start_with(backend: &str, settings: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("mail")).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut gatehouse = Self {
            served: None,
            settings: settings
                .iter()
                .map(|(name, value)| (name.to_string(), value.to_string()))
                .collect(),
            base: format!("http://127.0.0.1:{port}"),
            address: format!("127.0.0.1:{port}"),
            database: Database::of(backend).await,
            dir,
            client: reqwest::Client::new(),
        };
        gatehouse.serve();
        gatehouse
    }

    /// The binary with this server's settings, to serve or run a command.
    pub fn command(&self) -> Command {
        let mut command = gatehouse(&self.dir);
        command
            .env("GATEHOUSE_DATABASE_URL", self.database.url(&self.dir))
            .env("GATEHOUSE_SECRET_KEY", SECRET_KEY)
            .env("GATEHOUSE_BIND", &self.address)
            .env("GATEHOUSE_MAIL_DIR", self.dir.path().join("mail"))
            .env("GATEHOUSE_RATE_LIMITS", "free=100000")
            .env("GATEHOUSE_LOG", "info")
            .envs(self.settings.iter().map(|(name, value)| (name, value)));
        command
    }

    fn serve(&mut self) {
        self.served = Some(Served::start_with(self.command()));
    }

    /// Stops the server, rotates its signing key with `gatehouse keys rotate`, and serves
    /// again on the same address; the new key's id.
    pub fn rotate_key(&mut self) -> String {
        if let Some(served) = self.served.take() {
            served.stop();
        }
        let output = self.command().args(["keys", "rotate"]).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let kid = String::from_utf8(output.stdout)
            .unwrap()
            .trim()
            .strip_prefix("new signing key: ")
            .unwrap()
            .to_owned();
        self.serve();
        kid
    }

    pub fn jwks_url(&self) -> String {
        format!("{}/.well-known/jwks.json", self.base)
    }

    /// The example product service's state, trusting this server (and the webhook endpoint
    /// with this secret), with its keys refetched at most once a second (a minute in
    /// production) so that a rotation shows at once.
    pub fn example(&self, webhook_secret: &str) -> State {
        let verifier = Verifier::builder(ISSUER)
            .jwks_url(self.jwks_url())
            .refetch_interval(Duration::from_secs(1))
            .build()
            .unwrap();
        State::with(verifier, WebhookVerifier::new(webhook_secret))
    }

    /// Posts `body` (as `token`, when given); the status and the JSON answer.
    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (u16, Value) {
        self.post_in(path, token, None, body).await
    }

    /// Posts `body` as `token` in `organization` (`X-Organization-ID`), when given.
    pub async fn post_in(
        &self,
        path: &str,
        token: Option<&str>,
        organization: Option<&str>,
        body: Value,
    ) -> (u16, Value) {
        let mut request = self.client.post(format!("{}{path}", self.base)).json(&body);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(organization) = organization {
            request = request.header("X-Organization-ID", organization);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Registers `email`; its user id and personal organization id.
    pub async fn register(&self, email: &str) -> (String, String) {
        let (status, registered) = self
            .post(
                "/api/v1/auth/register",
                None,
                json!({ "email": email, "password": PASSWORD, "full_name": "Product Tester" }),
            )
            .await;
        assert_eq!(status, 201, "{registered}");
        (
            registered["user_id"].as_str().unwrap().to_owned(),
            registered["organization_id"].as_str().unwrap().to_owned(),
        )
    }

    /// Signs `email` in, scoped to `organization` when given; the answer's status and body.
    pub async fn login(&self, email: &str, organization: Option<&str>) -> (u16, Value) {
        let mut body = json!({ "email": email, "password": PASSWORD });
        if let Some(organization) = organization {
            body["organization_id"] = json!(organization);
        }
        self.post("/api/v1/auth/login", None, body).await
    }

    /// An access token of `email`, scoped to `organization` when given.
    pub async fn access_token(&self, email: &str, organization: Option<&str>) -> String {
        let (status, tokens) = self.login(email, organization).await;
        assert_eq!(status, 200, "{tokens}");
        tokens["access_token"].as_str().unwrap().to_owned()
    }

    /// Creates a team organization as `token`; its id.
    pub async fn create_team(&self, token: &str, name: &str) -> String {
        let (status, team) = self
            .post(
                "/api/v1/organizations",
                Some(token),
                json!({ "name": name }),
            )
            .await;
        assert_eq!(status, 201, "{team}");
        team["id"].as_str().unwrap().to_owned()
    }

    /// Registers `email` and makes them `role` of the organization, through an invitation
    /// sent by `inviter` and accepted from the mailed link; their personal organization's id.
    pub async fn join(&self, inviter: &str, organization: &str, email: &str, role: &str) -> String {
        let (_, personal) = self.register(email).await;
        let (status, invited) = self
            .post(
                &format!("/api/v1/organizations/{organization}/members"),
                Some(inviter),
                json!({ "email": email, "role": role }),
            )
            .await;
        assert_eq!(status, 201, "{invited}");
        let token = self.access_token(email, None).await;
        let (status, accepted) = self
            .post(
                "/api/v1/invitations/accept",
                Some(&token),
                json!({ "token": self.invitation_for(email).await }),
            )
            .await;
        assert_eq!(status, 200, "{accepted}");
        personal
    }

    /// The invitation token of the newest mail to `email`, waiting for the worker to send
    /// it (it is queued with the invitation, and sent once that commits).
    async fn invitation_for(&self, email: &str) -> String {
        let page = "/invitations/";
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        let mail = loop {
            let mut mails: Vec<_> = std::fs::read_dir(self.dir.path().join("mail"))
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .collect();
            mails.sort();
            let found = mails
                .iter()
                .rev()
                .map(|path| std::fs::read_to_string(path).unwrap())
                .map(|mail| mail.replace("=\r\n", "").replace("=\n", ""))
                .find(|mail| mail.contains(email) && mail.contains(page));
            if let Some(mail) = found {
                break mail;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no invitation to {email}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let start = mail.find(page).unwrap() + page.len();
        mail[start..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
            .collect()
    }
}

/// The claims of a JWT, read without verifying it (to forge a copy, or to read its `kid`).
pub fn unverified(token: &str, part: usize) -> Value {
    use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
    let encoded = token.split('.').nth(part).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(encoded).unwrap()).unwrap()
}

/// Calls the example service `app` with `request`; the status and the JSON answer.
macro_rules! call {
    ($app:expr, $request:expr) => {{
        let response = actix_web::test::call_service($app, $request.to_request()).await;
        let status = response.status().as_u16();
        let body = actix_web::test::read_body(response).await;
        let body: serde_json::Value =
            serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        (status, body)
    }};
}

/// `GET` or `POST` of `uri` with `token` as the bearer.
pub fn bearer(post: bool, uri: &str, token: &str) -> actix_web::test::TestRequest {
    let request = if post {
        actix_web::test::TestRequest::post()
    } else {
        actix_web::test::TestRequest::get()
    };
    request
        .uri(uri)
        .insert_header(("Authorization", format!("Bearer {token}")))
}

/// A test of the function `$name(backend)` on SQLite and on PostgreSQL.
macro_rules! on_both_databases {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[actix_web::test]
                async fn sqlite() {
                    super::$name("sqlite").await;
                }

                #[actix_web::test]
                async fn postgres() {
                    super::$name("postgres").await;
                }
            }
        )*
    };
}
