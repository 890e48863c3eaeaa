//! Gatehouse's HTTP surface on actix-web.
//!
//! Handlers parse requests into domain types, call one use case, and shape the response. They
//! never see the store: data flows api -> domain -> ports <- adapters. Errors become HTTP in one
//! place, [`error`].

#![warn(missing_docs)]

pub mod error;
pub mod extract;
mod middleware;
mod observe;
pub mod openapi;
pub(crate) mod pages;
mod query;
pub mod routes;
mod state;

use actix_web::{http::StatusCode, web, HttpResponse};

pub use state::AppState;

use crate::{error::ApiError, extract::MAX_BODY_BYTES, routes::*};

/// Registers every route, the body limit and the JSON fallbacks for unknown paths.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
        .app_data(
            web::PathConfig::default()
                .error_handler(|err, _| ApiError::NotFound(format!("not found: {err}")).into()),
        )
        .service(resource("/livez").route(web::get().to(health::livez)))
        .service(resource("/readyz").route(web::get().to(health::readyz)))
        .service(resource("/.well-known/jwks.json").route(web::get().to(auth::jwks)))
        .service(resource("/sso/saml/{id}/metadata").route(web::get().to(sso::metadata)))
        .service(resource("/sso/saml/{id}/login").route(web::get().to(pages::saml::login)))
        .service(
            resource("/sso/saml/{id}/acs")
                .app_data(web::PayloadConfig::new(pages::saml::ACS_MAX_BODY_BYTES))
                .route(web::post().to(pages::saml::acs)),
        )
        .service(
            resource("/.well-known/openid-configuration").route(web::get().to(oauth::discovery)),
        )
        .service(resource("/oauth/token").route(web::post().to(oauth::token)))
        .service(resource("/oauth/revoke").route(web::post().to(oauth::revoke)))
        .service(resource("/oauth/introspect").route(web::post().to(oauth::introspect)))
        .service(
            resource("/oauth/userinfo")
                .route(web::get().to(oauth::userinfo))
                .route(web::post().to(oauth::userinfo_post)),
        )
        .service(resource("/oauth/authorize").route(web::get().to(pages::consent::authorize)))
        .service(resource("/oauth/consent").route(web::post().to(pages::consent::consent)))
        .service(
            resource("/login")
                .route(web::get().to(pages::login::page))
                .route(web::post().to(pages::login::sign_in)),
        )
        .service(resource("/login/sso").route(web::post().to(pages::login::sign_in_with_sso)))
        .service(resource("/login/mfa").route(web::post().to(pages::second_step::verify)))
        .service(resource("/login/done").route(web::get().to(pages::login::done)))
        .service(resource("/logout").route(web::post().to(pages::login::sign_out)))
        .service(
            resource("/assets/webauthn.js").route(web::get().to(pages::assets::webauthn_script)),
        )
        .service(
            resource("/magic-link/{token}")
                .route(web::get().to(pages::mailed_link::magic_link_page))
                .route(web::post().to(pages::mailed_link::sign_in)),
        )
        .service(
            resource("/reset-password/{token}")
                .route(web::get().to(pages::mailed_link::reset_password_page))
                .route(web::post().to(pages::mailed_link::reset_password)),
        )
        .service(
            resource("/invitations/{token}")
                .route(web::get().to(pages::invitation::page))
                .route(web::post().to(pages::invitation::accept)),
        )
        .service(
            resource("/verify-email/{token}")
                .route(web::get().to(pages::mailed_link::verify_email_page))
                .route(web::post().to(pages::mailed_link::verify_email)),
        )
        .configure(scim::configure)
        .service(
            web::scope("/api/v1")
                .service(api_resource("/auth/register").route(web::post().to(auth::register)))
                .service(api_resource("/auth/login").route(web::post().to(auth::login)))
                .service(api_resource("/auth/refresh").route(web::post().to(auth::refresh)))
                .service(api_resource("/auth/mfa").route(web::get().to(mfa::overview)))
                .service(
                    api_resource("/auth/magic-link")
                        .route(web::post().to(links::request_magic_link)),
                )
                .service(
                    api_resource("/auth/magic-link/verify")
                        .route(web::post().to(links::verify_magic_link)),
                )
                .service(
                    api_resource("/auth/password/forgot")
                        .route(web::post().to(links::forgot_password)),
                )
                .service(
                    api_resource("/auth/password/reset")
                        .route(web::post().to(links::reset_password)),
                )
                .service(
                    api_resource("/auth/email/verify-request")
                        .route(web::post().to(links::request_verification)),
                )
                .service(
                    api_resource("/auth/email/verify").route(web::post().to(links::verify_email)),
                )
                .service(api_resource("/auth/mfa/verify").route(web::post().to(mfa::verify)))
                .service(api_resource("/auth/mfa/totp").route(web::post().to(mfa::enroll_totp)))
                .service(
                    api_resource("/auth/mfa/totp/{id}/confirm")
                        .route(web::post().to(mfa::confirm_totp)),
                )
                .service(
                    api_resource("/auth/mfa/webauthn/register")
                        .route(web::post().to(mfa::start_webauthn)),
                )
                .service(
                    api_resource("/auth/mfa/webauthn/register/{challenge_id}")
                        .route(web::post().to(mfa::finish_webauthn)),
                )
                .service(
                    api_resource("/auth/mfa/recovery-codes")
                        .route(web::post().to(mfa::recovery_codes)),
                )
                .service(api_resource("/auth/mfa/{id}").route(web::delete().to(mfa::remove)))
                .service(api_resource("/auth/logout").route(web::post().to(auth::logout)))
                .service(
                    api_resource("/auth/password").route(web::post().to(auth::change_password)),
                )
                .service(
                    api_resource("/auth/password/renew")
                        .route(web::post().to(auth::renew_password)),
                )
                .service(
                    api_resource("/users/me")
                        .route(web::get().to(users::me))
                        .route(web::patch().to(users::update_me))
                        .route(web::delete().to(users::delete_me)),
                )
                .service(api_resource("/users/me/consents").route(web::get().to(users::consents)))
                .service(
                    api_resource("/users/me/consents/{client_id}")
                        .route(web::delete().to(users::revoke_consent)),
                )
                .service(
                    api_resource("/organizations")
                        .route(web::get().to(organizations::list))
                        .route(web::post().to(organizations::create)),
                )
                .service(
                    api_resource("/organizations/{id}")
                        .route(web::get().to(organizations::get))
                        .route(web::patch().to(organizations::update))
                        .route(web::delete().to(organizations::delete)),
                )
                .service(
                    api_resource("/organizations/{id}/applications")
                        .route(web::get().to(applications::list))
                        .route(web::post().to(applications::create)),
                )
                .service(
                    api_resource("/organizations/{id}/applications/{app_id}")
                        .route(web::get().to(applications::get))
                        .route(web::patch().to(applications::update))
                        .route(web::delete().to(applications::delete)),
                )
                .service(
                    api_resource("/organizations/{id}/applications/{app_id}/secret")
                        .route(web::post().to(applications::rotate_secret)),
                )
                .service(
                    api_resource("/organizations/{id}/policies")
                        .route(web::get().to(policies::get_policies))
                        .route(web::put().to(policies::put_policies)),
                )
                .service(
                    api_resource("/organizations/{id}/branding")
                        .route(web::get().to(policies::get_branding))
                        .route(web::put().to(policies::put_branding)),
                )
                .service(
                    api_resource("/organizations/{id}/domains")
                        .route(web::get().to(domains::list))
                        .route(web::post().to(domains::add)),
                )
                .service(
                    api_resource("/organizations/{id}/domains/{domain_id}")
                        .route(web::delete().to(domains::remove)),
                )
                .service(
                    api_resource("/organizations/{id}/domains/{domain_id}/verify")
                        .route(web::post().to(domains::verify)),
                )
                .service(api_resource("/sso/configurations").route(web::post().to(sso::create)))
                .service(api_resource("/sso/lookup").route(web::post().to(sso::lookup)))
                .service(
                    api_resource("/sso/configurations/{id}")
                        .route(web::get().to(sso::get))
                        .route(web::put().to(sso::update)),
                )
                .service(
                    api_resource("/organizations/{id}/audit-log")
                        .route(web::get().to(audit::organization_log)),
                )
                .service(
                    api_resource("/organizations/{id}/members")
                        .route(web::get().to(members::list))
                        .route(web::post().to(members::invite)),
                )
                .service(
                    api_resource("/organizations/{id}/members/{user_id}")
                        .route(web::patch().to(members::change_role))
                        .route(web::delete().to(members::remove)),
                )
                .service(
                    api_resource("/organizations/{id}/scim-tokens")
                        .route(web::get().to(directory::list_tokens))
                        .route(web::post().to(directory::create_token)),
                )
                .service(
                    api_resource("/organizations/{id}/scim-tokens/{token_id}")
                        .route(web::delete().to(directory::revoke_token)),
                )
                .service(
                    api_resource("/organizations/{id}/scim/group-roles")
                        .route(web::get().to(directory::group_roles))
                        .route(web::put().to(directory::save_group_roles)),
                )
                .service(
                    api_resource("/organizations/{id}/service-accounts")
                        .route(web::get().to(iam::list_service_accounts))
                        .route(web::post().to(iam::create_service_account)),
                )
                .service(
                    api_resource("/organizations/{id}/service-accounts/{sa_id}")
                        .route(web::get().to(iam::get_service_account))
                        .route(web::patch().to(iam::update_service_account))
                        .route(web::delete().to(iam::delete_service_account)),
                )
                .service(
                    api_resource("/organizations/{id}/service-accounts/{sa_id}/keys")
                        .route(web::post().to(iam::create_service_account_key)),
                )
                .service(
                    api_resource("/organizations/{id}/api-keys")
                        .route(web::get().to(iam::organization_keys)),
                )
                .service(
                    api_resource("/organizations/{id}/api-keys/{key_id}")
                        .route(web::delete().to(iam::revoke_organization_key)),
                )
                .service(
                    api_resource("/organizations/{id}/roles")
                        .route(web::get().to(iam::list_roles))
                        .route(web::post().to(iam::create_role)),
                )
                .service(
                    api_resource("/organizations/{id}/roles/{key}")
                        .route(web::get().to(iam::get_role))
                        .route(web::patch().to(iam::update_role))
                        .route(web::delete().to(iam::delete_role)),
                )
                .service(
                    api_resource("/organizations/{id}/transfer-ownership")
                        .route(web::post().to(members::transfer_ownership)),
                )
                .service(
                    api_resource("/organizations/{id}/invitations/{invitation_id}")
                        .route(web::delete().to(members::revoke_invitation)),
                )
                .service(api_resource("/invitations").route(web::get().to(members::my_invitations)))
                .service(
                    api_resource("/invitations/accept")
                        .route(web::post().to(members::accept_by_token)),
                )
                .service(
                    api_resource("/invitations/{invitation_id}/accept")
                        .route(web::post().to(members::accept_by_id)),
                )
                .service(api_resource("/iam/users").route(web::get().to(members::iam_users)))
                .service(api_resource("/iam/permissions").route(web::get().to(iam::permissions)))
                .service(
                    api_resource("/webhooks/endpoints")
                        .route(web::get().to(webhooks::list))
                        .route(web::post().to(webhooks::create)),
                )
                .service(
                    api_resource("/webhooks/endpoints/{id}")
                        .route(web::get().to(webhooks::get))
                        .route(web::patch().to(webhooks::update))
                        .route(web::delete().to(webhooks::delete)),
                )
                .service(
                    api_resource("/webhooks/endpoints/{id}/deliveries")
                        .route(web::get().to(webhooks::deliveries)),
                )
                .service(
                    api_resource("/webhooks/endpoints/{id}/test")
                        .route(web::post().to(webhooks::test)),
                )
                .service(api_resource("/webhooks/events").route(web::get().to(webhooks::events)))
                .service(
                    api_resource("/webhooks/deliveries/{id}/retry")
                        .route(web::post().to(webhooks::retry)),
                )
                .service(
                    api_resource("/api-keys")
                        .route(web::get().to(api_keys::list))
                        .route(web::post().to(api_keys::create)),
                )
                .service(api_resource("/api-keys/{id}").route(web::delete().to(api_keys::delete)))
                .service(api_resource("/health").route(web::get().to(health::health)))
                .service(api_resource("/openapi.json").route(web::get().to(openapi_json))),
        )
        .service(
            web::scope("/control")
                .service(
                    control_resource("/events")
                        .route(web::get().to(control::events))
                        .route(web::post().to(control::post_event)),
                )
                .service(
                    control_resource("/dead-letters").route(web::get().to(control::dead_letters)),
                )
                .service(
                    control_resource("/dead-letters/replay").route(web::post().to(control::replay)),
                )
                .service(control_resource("/metrics").route(web::get().to(control::metrics)))
                .service(control_resource("/audit").route(web::get().to(control::control_log))),
        )
        .default_service(web::to(not_found));
}

/// The routes of the `GATEHOUSE_METRICS_BIND` listener: `GET /metrics`, and nothing else.
pub fn configure_metrics_listener(cfg: &mut web::ServiceConfig) {
    cfg.service(resource("/metrics").route(web::get().to(control::metrics_listener)))
        .default_service(web::to(not_found));
}

pub use middleware::{
    bounded_body, bounded_head, catch_panics, json_errors, panic_message, rate_limit, request_id,
    PanicCount, RequestId, DEFAULT_BODY_TIMEOUT, MAX_HEADER_BYTES, MAX_URI_BYTES,
};

/// The template of the route a request reached (`/api/v1/organizations/{id}`), kept in its
/// resource's data: the metrics label a request is counted under, read without matching the path
/// against the routes a second time (`HttpRequest::match_pattern` does that, and on a read it cost
/// as much as the routing itself; `docs/benchmarks.md`).
#[derive(Debug)]
pub(crate) struct RouteTemplate(String);

impl RouteTemplate {
    /// The template of the resource that answered `req`, or, for an answer given before any
    /// resource was reached (a `429`, say), the template its path matches; `None` for a path no
    /// route matches.
    pub(crate) fn of(req: &actix_web::HttpRequest) -> Option<std::borrow::Cow<'_, str>> {
        match req.app_data::<RouteTemplate>() {
            Some(template) => Some(std::borrow::Cow::Borrowed(template.0.as_str())),
            None => req.match_pattern().map(std::borrow::Cow::Owned),
        }
    }
}

/// A resource at `scope` + `path` that knows its template and answers an unsupported method with
/// `unsupported`.
fn templated<F, Args>(scope: &str, path: &str, unsupported: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path)
        .app_data(RouteTemplate(format!("{scope}{path}")))
        .default_service(web::to(unsupported))
}

/// A resource at the root that answers an unsupported method with a JSON `405`.
fn resource(path: &str) -> actix_web::Resource {
    templated("", path, method_not_allowed)
}

/// A resource under `/api/v1`, as [`resource`].
fn api_resource(path: &str) -> actix_web::Resource {
    templated("/api/v1", path, method_not_allowed)
}

/// A control-plane resource: an unsupported method is `404` while the control plane is off
/// (nothing under `/control` exists then) and `405` once it is on.
fn control_resource(path: &str) -> actix_web::Resource {
    templated("/control", path, control_method_not_allowed)
}

async fn control_method_not_allowed(state: web::Data<AppState>) -> HttpResponse {
    if state.control_token.is_some() {
        method_not_allowed().await
    } else {
        actix_web::ResponseError::error_response(&ApiError::NotFound("no such route".into()))
    }
}

async fn not_found() -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound("no such route".into()))
}

async fn method_not_allowed() -> HttpResponse {
    HttpResponse::build(StatusCode::METHOD_NOT_ALLOWED).json(error::ErrorBody {
        detail: "method not allowed".into(),
    })
}

async fn openapi_json() -> Result<HttpResponse, ApiError> {
    let document = openapi::document().map_err(|e| ApiError::Internal(Box::new(e)))?;
    Ok(HttpResponse::Ok()
        .content_type("application/json")
        .body(document))
}
