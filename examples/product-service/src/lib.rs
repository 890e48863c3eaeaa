//! An example product service behind Gatehouse: its routes trust only what `gatehouse-verify`
//! verified. An organization's projects are served only to a token scoped to that organization:
//! `GET /organizations/{id}/projects` needs `organization.members.read` there, `POST` needs
//! `api_keys.create` (a member's, not a viewer's); `POST /webhooks/gatehouse` takes Gatehouse's
//! signed deliveries.
#![warn(missing_docs)]

use actix_web::{http::StatusCode, web, HttpRequest, HttpResponse};
use gatehouse_verify::types::Permission;
use gatehouse_verify::{BuildError, Claims, VerifiedClaims, Verifier, WebhookVerifier};
use serde_json::json;
use uuid::Uuid;

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
        .route("/organizations/{id}/projects", web::get().to(list_projects))
        .route(
            "/organizations/{id}/projects",
            web::post().to(create_project),
        )
        .route("/webhooks/gatehouse", web::post().to(webhook));
}

/// The answer when the token may not act with `permission` in the organization of the path:
/// `403` without an organization or the permission, `404` for another organization (whether it
/// exists is none of the caller's business); `None` when it may.
fn refusal(claims: &Claims, path: &str, permission: Permission) -> Option<HttpResponse> {
    let refused = |status, detail: &str| Some(detail_response(status, detail));
    match claims.organization() {
        None => refused(
            StatusCode::FORBIDDEN,
            "this needs a token scoped to an organization",
        ),
        Some(organization) if Uuid::parse_str(path).ok() != Some(organization.id.as_uuid()) => {
            refused(StatusCode::NOT_FOUND, "organization not found")
        }
        Some(_) if !claims.can(permission) => refused(
            StatusCode::FORBIDDEN,
            &format!("this needs the permission {permission}"),
        ),
        Some(_) => None,
    }
}

async fn list_projects(claims: VerifiedClaims, path: web::Path<String>) -> HttpResponse {
    if let Some(refused) = refusal(&claims, &path, Permission::MembersRead) {
        return refused;
    }
    HttpResponse::Ok().json(json!({
        "organization_id": path.as_str(),
        "role": claims.organization().and_then(|o| o.role).map(|role| role.as_str()),
        "projects": [],
    }))
}

async fn create_project(claims: VerifiedClaims, path: web::Path<String>) -> HttpResponse {
    if let Some(refused) = refusal(&claims, &path, Permission::ApiKeysCreate) {
        return refused;
    }
    HttpResponse::Created().json(json!({
        "organization_id": path.as_str(),
        "created_by": claims.user_id().map(|user| user.to_string()),
    }))
}

async fn webhook(
    request: HttpRequest,
    webhooks: web::Data<WebhookVerifier>,
    body: web::Bytes,
) -> HttpResponse {
    match webhooks.verify_request(&request, &body) {
        // Deliveries are at least once: a real service deduplicates on X-Service-Delivery-ID.
        Ok(()) => HttpResponse::NoContent().finish(),
        Err(refused) => detail_response(StatusCode::UNAUTHORIZED, &refused.to_string()),
    }
}

fn detail_response(status: StatusCode, detail: &str) -> HttpResponse {
    HttpResponse::build(status).json(json!({ "detail": detail }))
}
