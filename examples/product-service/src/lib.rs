//! An example product service behind Gatehouse: its routes trust only what `gatehouse-verify`
//! verified. `GET /projects` needs `organization.members.read` in the token's organization,
//! `POST /projects` needs `api_keys.create` (a member's, not a viewer's), and
//! `POST /webhooks/gatehouse` takes Gatehouse's signed deliveries.
#![warn(missing_docs)]

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_domain::model::Permission;
use gatehouse_verify::{BuildError, Claims, VerifiedClaims, Verifier, WebhookVerifier};
use serde_json::json;

/// What the service needs to know of Gatehouse.
#[derive(Clone, Debug)]
pub struct Config {
    /// Gatehouse's public URL: the tokens' issuer (`GATEHOUSE_URL`).
    pub gatehouse_url: String,
    /// Where Gatehouse's keys are, when not at `{gatehouse_url}/.well-known/jwks.json`.
    pub jwks_url: Option<String>,
    /// The signing secret of the webhook endpoint that posts here (`WEBHOOK_SECRET`).
    pub webhook_secret: String,
}

/// The service's shared state: the token verifier and the webhook verifier.
#[derive(Clone, Debug)]
pub struct State {
    verifier: Verifier,
    webhooks: WebhookVerifier,
}

impl State {
    /// The state for this configuration.
    pub fn new(config: &Config) -> Result<Self, BuildError> {
        let mut verifier = Verifier::builder(&config.gatehouse_url);
        if let Some(url) = &config.jwks_url {
            verifier = verifier.jwks_url(url);
        }
        Ok(Self::with(
            verifier.build()?,
            WebhookVerifier::new(config.webhook_secret.as_bytes()),
        ))
    }

    /// The state with these verifiers (a test's own settings, say).
    pub fn with(verifier: Verifier, webhooks: WebhookVerifier) -> Self {
        Self { verifier, webhooks }
    }
}

/// The service's routes: `App::new().configure(|app| configure(app, state))`.
pub fn configure(app: &mut web::ServiceConfig, state: State) {
    app.app_data(web::Data::new(state.verifier))
        .app_data(web::Data::new(state.webhooks))
        .route("/projects", web::get().to(list_projects))
        .route("/projects", web::post().to(create_project))
        .route("/webhooks/gatehouse", web::post().to(webhook));
}

/// The organization the token acts in, when it grants `permission` there; else why not (a
/// `403`'s detail).
fn permitted(claims: &Claims, permission: Permission) -> Result<String, String> {
    match claims.organization() {
        Some(organization) if claims.can(permission) => Ok(organization.id.to_string()),
        Some(_) => Err(format!("this needs the permission {permission}")),
        None => Err("this needs a token scoped to an organization".to_owned()),
    }
}

async fn list_projects(claims: VerifiedClaims) -> HttpResponse {
    match permitted(&claims, Permission::MembersRead) {
        Ok(organization) => HttpResponse::Ok().json(json!({
            "organization_id": organization,
            "role": claims.organization().and_then(|o| o.role).map(|role| role.as_str()),
            "projects": [],
        })),
        Err(refused) => detail(StatusCode::FORBIDDEN, &refused),
    }
}

async fn create_project(claims: VerifiedClaims) -> HttpResponse {
    match permitted(&claims, Permission::ApiKeysCreate) {
        Ok(organization) => HttpResponse::Created().json(json!({
            "organization_id": organization,
            "created_by": claims.user_id().map(|user| user.to_string()),
        })),
        Err(refused) => detail(StatusCode::FORBIDDEN, &refused),
    }
}

async fn webhook(
    request: HttpRequest,
    webhooks: web::Data<WebhookVerifier>,
    body: web::Bytes,
) -> HttpResponse {
    match webhooks.verify_request(&request, &body) {
        // Deliveries are at least once: a real service deduplicates on X-Service-Delivery-ID.
        Ok(()) => HttpResponse::NoContent().finish(),
        Err(refused) => detail(StatusCode::UNAUTHORIZED, &refused.to_string()),
    }
}

fn detail(status: StatusCode, detail: &str) -> HttpResponse {
    HttpResponse::build(status).json(json!({ "detail": detail }))
}
