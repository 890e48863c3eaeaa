//! Gatehouse's HTTP surface on actix-web.
//!
//! Handlers parse requests into domain types, call one use case, and shape the response. They
//! never see the store: data flows api -> domain -> ports <- adapters. Errors become HTTP in one
//! place, [`error`].

#![warn(missing_docs)]

mod access;
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

use crate::{
    access::{unrouted, Access, Endpoint, Named},
    error::ApiError,
    extract::MAX_BODY_BYTES,
    routes::*,
};

/// Registers every route with the access it needs ([`access`]), the body limit and the JSON
/// fallbacks for unknown paths.
pub fn configure(cfg: &mut web::ServiceConfig) {
    use Access::{Agent, Member, Open, Person, Probe, Public};
    // `/api/v1` in scopes by its first segment, and an organization's routes in a scope of their
    // own: a path meets the patterns of its own scope only, and an organization's id is matched
    // once (`docs/benchmarks.md`, "The ninth pass"). Each helper says what its routes need.
    let public_auth = api_scope("/auth", Public);
    let open_auth = api_scope("/auth", Open);
    let in_auth = api_scope("/auth", Person);
    let in_users = api_scope("/users", Person);
    let in_organizations = api_scope("/organizations", Person);
    let in_organization = api_scope("/organizations/{id}", Member(Named::Path));
    let open_sso = api_scope("/sso", Open);
    let agent_sso = api_scope("/sso", Agent);
    let in_sso = api_scope("/sso", Member(Named::Path));
    let in_invitations = api_scope("/invitations", Person);
    let agent_iam = api_scope("/iam", Agent);
    let in_iam = api_scope("/iam", Member(Named::Header));
    let agent_webhooks = api_scope("/webhooks", Agent);
    let in_webhooks = api_scope("/webhooks", Member(Named::Header));
    let in_api_keys = api_scope("/api-keys", Person);
    let saml = |path: &str, access| Endpoint::new("/sso/saml", path, access, unsupported());
    let mailed_link = |scope: &str| Endpoint::new(scope, "/{token}", Public, unsupported());
    cfg.app_data(web::PayloadConfig::new(MAX_BODY_BYTES))
        .app_data(
            web::PathConfig::default()
                .error_handler(|err, _| ApiError::NotFound(format!("not found: {err}")).into()),
        )
        .service(resource("/livez", Probe).route(web::get().to(health::livez)))
        .service(resource("/readyz", Probe).route(web::get().to(health::readyz)))
        .service(resource("/.well-known/jwks.json", Open).route(web::get().to(auth::jwks)))
        // Every pattern with a parameter sits in a scope with a fixed prefix: a path meets only
        // the patterns of the scope its prefix names, and a fixed prefix is a plain comparison
        // (`docs/benchmarks.md`, "The ninth pass").
        .service(
            web::scope("/sso/saml")
                .service(saml("/{id}/metadata", Open).route(web::get().to(sso::metadata)))
                .service(saml("/{id}/login", Open).route(web::get().to(pages::saml::login)))
                .service(
                    saml("/{id}/acs", Public)
                        .app_data(web::PayloadConfig::new(pages::saml::ACS_MAX_BODY_BYTES))
                        .route(web::post().to(pages::saml::acs)),
                ),
        )
        .service(
            resource("/.well-known/openid-configuration", Open)
                .route(web::get().to(oauth::discovery)),
        )
        .service(resource("/oauth/token", Public).route(web::post().to(oauth::token)))
        .service(resource("/oauth/revoke", Open).route(web::post().to(oauth::revoke)))
        .service(resource("/oauth/introspect", Open).route(web::post().to(oauth::introspect)))
        .service(
            resource("/oauth/userinfo", Open)
                .route(web::get().to(oauth::userinfo))
                .route(web::post().to(oauth::userinfo_post)),
        )
        .service(
            resource("/oauth/authorize", Public).route(web::get().to(pages::consent::authorize)),
        )
        .service(resource("/oauth/consent", Public).route(web::post().to(pages::consent::consent)))
        .service(
            resource("/login", Public)
                .route(web::get().to(pages::login::page))
                .route(web::post().to(pages::login::sign_in)),
        )
        .service(
            resource("/login/sso", Public).route(web::post().to(pages::login::sign_in_with_sso)),
        )
        .service(resource("/login/mfa", Public).route(web::post().to(pages::second_step::verify)))
        .service(resource("/login/done", Public).route(web::get().to(pages::login::done)))
        .service(resource("/logout", Open).route(web::post().to(pages::login::sign_out)))
        .service(
            resource("/assets/webauthn.js", Open)
                .route(web::get().to(pages::assets::webauthn_script)),
        )
        .service(
            web::scope("/magic-link").service(
                mailed_link("/magic-link")
                    .route(web::get().to(pages::mailed_link::magic_link_page))
                    .route(web::post().to(pages::mailed_link::sign_in)),
            ),
        )
        .service(
            web::scope("/reset-password").service(
                mailed_link("/reset-password")
                    .route(web::get().to(pages::mailed_link::reset_password_page))
                    .route(web::post().to(pages::mailed_link::reset_password)),
            ),
        )
        .service(
            web::scope("/invitations").service(
                mailed_link("/invitations")
                    .route(web::get().to(pages::invitation::page))
                    .route(web::post().to(pages::invitation::accept)),
            ),
        )
        .service(
            web::scope("/verify-email").service(
                mailed_link("/verify-email")
                    .route(web::get().to(pages::mailed_link::verify_email_page))
                    .route(web::post().to(pages::mailed_link::verify_email)),
            ),
        )
        .configure(scim::configure)
        .service(
            web::scope("/api/v1")
                .service(
                    web::scope("/auth")
                        .service(public_auth("/register").route(web::post().to(auth::register)))
                        .service(public_auth("/login").route(web::post().to(auth::login)))
                        .service(open_auth("/refresh").route(web::post().to(auth::refresh)))
                        .service(in_auth("/mfa").route(web::get().to(mfa::overview)))
                        .service(
                            public_auth("/magic-link")
                                .route(web::post().to(links::request_magic_link)),
                        )
                        .service(
                            public_auth("/magic-link/verify")
                                .route(web::post().to(links::verify_magic_link)),
                        )
                        .service(
                            public_auth("/password/forgot")
                                .route(web::post().to(links::forgot_password)),
                        )
                        .service(
                            public_auth("/password/reset")
                                .route(web::post().to(links::reset_password)),
                        )
                        .service(
                            in_auth("/email/verify-request")
                                .route(web::post().to(links::request_verification)),
                        )
                        .service(
                            public_auth("/email/verify").route(web::post().to(links::verify_email)),
                        )
                        .service(public_auth("/mfa/verify").route(web::post().to(mfa::verify)))
                        .service(in_auth("/mfa/totp").route(web::post().to(mfa::enroll_totp)))
                        .service(
                            in_auth("/mfa/totp/{id}/confirm")
                                .route(web::post().to(mfa::confirm_totp)),
                        )
                        .service(
                            in_auth("/mfa/webauthn/register")
                                .route(web::post().to(mfa::start_webauthn)),
                        )
                        .service(
                            in_auth("/mfa/webauthn/register/{challenge_id}")
                                .route(web::post().to(mfa::finish_webauthn)),
                        )
                        .service(
                            in_auth("/mfa/recovery-codes")
                                .route(web::post().to(mfa::recovery_codes)),
                        )
                        .service(in_auth("/mfa/{id}").route(web::delete().to(mfa::remove)))
                        .service(in_auth("/logout").route(web::post().to(auth::logout)))
                        .service(in_auth("/password").route(web::post().to(auth::change_password)))
                        .service(
                            public_auth("/password/renew")
                                .route(web::post().to(auth::renew_password)),
                        ),
                )
                .service(
                    web::scope("/users")
                        .service(
                            in_users("/me")
                                .route(web::get().to(users::me))
                                .route(web::patch().to(users::update_me))
                                .route(web::delete().to(users::delete_me)),
                        )
                        .service(in_users("/me/consents").route(web::get().to(users::consents)))
                        .service(
                            in_users("/me/consents/{client_id}")
                                .route(web::delete().to(users::revoke_consent)),
                        ),
                )
                .service(
                    web::scope("/organizations")
                        .service(
                            in_organizations("")
                                .route(web::get().to(organizations::list))
                                .route(web::post().to(organizations::create)),
                        )
                        .service(
                            web::scope("/{id}")
                                .service(
                                    in_organization("")
                                        .route(web::get().to(organizations::get))
                                        .route(web::patch().to(organizations::update))
                                        .route(web::delete().to(organizations::delete)),
                                )
                                .service(
                                    in_organization("/applications")
                                        .route(web::get().to(applications::list))
                                        .route(web::post().to(applications::create)),
                                )
                                .service(
                                    in_organization("/applications/{app_id}")
                                        .route(web::get().to(applications::get))
                                        .route(web::patch().to(applications::update))
                                        .route(web::delete().to(applications::delete)),
                                )
                                .service(
                                    in_organization("/applications/{app_id}/secret")
                                        .route(web::post().to(applications::rotate_secret)),
                                )
                                .service(
                                    in_organization("/policies")
                                        .route(web::get().to(policies::get_policies))
                                        .route(web::put().to(policies::put_policies)),
                                )
                                .service(
                                    in_organization("/branding")
                                        .route(web::get().to(policies::get_branding))
                                        .route(web::put().to(policies::put_branding)),
                                )
                                .service(
                                    in_organization("/domains")
                                        .route(web::get().to(domains::list))
                                        .route(web::post().to(domains::add)),
                                )
                                .service(
                                    in_organization("/domains/{domain_id}")
                                        .route(web::delete().to(domains::remove)),
                                )
                                .service(
                                    in_organization("/domains/{domain_id}/verify")
                                        .route(web::post().to(domains::verify)),
                                )
                                .service(
                                    in_organization("/audit-log")
                                        .route(web::get().to(audit::organization_log)),
                                )
                                .service(
                                    in_organization("/members")
                                        .route(web::get().to(members::list))
                                        .route(web::post().to(members::invite)),
                                )
                                .service(
                                    in_organization("/members/{user_id}")
                                        .route(web::patch().to(members::change_role))
                                        .route(web::delete().to(members::remove)),
                                )
                                .service(
                                    in_organization("/scim-tokens")
                                        .route(web::get().to(directory::list_tokens))
                                        .route(web::post().to(directory::create_token)),
                                )
                                .service(
                                    in_organization("/scim-tokens/{token_id}")
                                        .route(web::delete().to(directory::revoke_token)),
                                )
                                .service(
                                    in_organization("/scim/group-roles")
                                        .route(web::get().to(directory::group_roles))
                                        .route(web::put().to(directory::save_group_roles)),
                                )
                                .service(
                                    in_organization("/service-accounts")
                                        .route(web::get().to(iam::list_service_accounts))
                                        .route(web::post().to(iam::create_service_account)),
                                )
                                .service(
                                    in_organization("/service-accounts/{sa_id}")
                                        .route(web::get().to(iam::get_service_account))
                                        .route(web::patch().to(iam::update_service_account))
                                        .route(web::delete().to(iam::delete_service_account)),
                                )
                                .service(
                                    in_organization("/service-accounts/{sa_id}/keys")
                                        .route(web::post().to(iam::create_service_account_key)),
                                )
                                .service(
                                    in_organization("/api-keys")
                                        .route(web::get().to(iam::organization_keys)),
                                )
                                .service(
                                    in_organization("/api-keys/{key_id}")
                                        .route(web::delete().to(iam::revoke_organization_key)),
                                )
                                .service(
                                    in_organization("/roles")
                                        .route(web::get().to(iam::list_roles))
                                        .route(web::post().to(iam::create_role)),
                                )
                                .service(
                                    in_organization("/roles/{key}")
                                        .route(web::get().to(iam::get_role))
                                        .route(web::patch().to(iam::update_role))
                                        .route(web::delete().to(iam::delete_role)),
                                )
                                .service(
                                    in_organization("/transfer-ownership")
                                        .route(web::post().to(members::transfer_ownership)),
                                )
                                .service(
                                    in_organization("/invitations/{invitation_id}")
                                        .route(web::delete().to(members::revoke_invitation)),
                                ),
                        ),
                )
                .service(
                    web::scope("/sso")
                        .service(agent_sso("/configurations").route(web::post().to(sso::create)))
                        .service(open_sso("/lookup").route(web::post().to(sso::lookup)))
                        .service(
                            in_sso("/configurations/{id}")
                                .route(web::get().to(sso::get))
                                .route(web::put().to(sso::update)),
                        ),
                )
                .service(
                    web::scope("/invitations")
                        .service(in_invitations("").route(web::get().to(members::my_invitations)))
                        .service(
                            in_invitations("/accept")
                                .route(web::post().to(members::accept_by_token)),
                        )
                        .service(
                            in_invitations("/{invitation_id}/accept")
                                .route(web::post().to(members::accept_by_id)),
                        ),
                )
                .service(
                    web::scope("/iam")
                        .service(in_iam("/users").route(web::get().to(members::iam_users)))
                        .service(agent_iam("/permissions").route(web::get().to(iam::permissions))),
                )
                .service(
                    web::scope("/webhooks")
                        .service(
                            in_webhooks("/endpoints")
                                .route(web::get().to(webhooks::list))
                                .route(web::post().to(webhooks::create)),
                        )
                        .service(
                            in_webhooks("/endpoints/{id}")
                                .route(web::get().to(webhooks::get))
                                .route(web::patch().to(webhooks::update))
                                .route(web::delete().to(webhooks::delete)),
                        )
                        .service(
                            in_webhooks("/endpoints/{id}/deliveries")
                                .route(web::get().to(webhooks::deliveries)),
                        )
                        .service(
                            in_webhooks("/endpoints/{id}/test")
                                .route(web::post().to(webhooks::test)),
                        )
                        .service(agent_webhooks("/events").route(web::get().to(webhooks::events)))
                        .service(
                            in_webhooks("/deliveries/{id}/retry")
                                .route(web::post().to(webhooks::retry)),
                        ),
                )
                .service(
                    web::scope("/api-keys")
                        .service(
                            in_api_keys("")
                                .route(web::get().to(api_keys::list))
                                .route(web::post().to(api_keys::create)),
                        )
                        .service(in_api_keys("/{id}").route(web::delete().to(api_keys::delete))),
                )
                .service(
                    api_resource("/health", Member(Named::Header))
                        .route(web::get().to(health::health)),
                )
                .service(api_resource("/openapi.json", Open).route(web::get().to(openapi_json))),
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
        .default_service(unrouted(Public, web::to(not_found)));
}

/// The routes of the `GATEHOUSE_METRICS_BIND` listener: `GET /metrics`, and nothing else.
pub fn configure_metrics_listener(cfg: &mut web::ServiceConfig) {
    cfg.service(
        resource("/metrics", Access::Probe).route(web::get().to(control::metrics_listener)),
    )
    .default_service(unrouted(Access::Probe, web::to(not_found)));
}

pub use middleware::{
    bounded_body, bounded_head, catch_panics, json_errors, panic_message, request_id, PanicCount,
    RequestId, DEFAULT_BODY_TIMEOUT, MAX_HEADER_BYTES, MAX_URI_BYTES,
};

/// How a resource answers a method it does not serve: the JSON `405`, counted against the
/// client's address.
fn unsupported() -> (Access, actix_web::Route) {
    (Access::Public, web::to(method_not_allowed))
}

/// A resource at the root.
fn resource(path: &str, access: Access) -> Endpoint {
    Endpoint::new("", path, access, unsupported())
}

/// A resource under `/api/v1`.
fn api_resource(path: &str, access: Access) -> Endpoint {
    Endpoint::new("/api/v1", path, access, unsupported())
}

/// The resources of the scope `/api/v1{scope}`, each needing `access`.
fn api_scope(scope: &str, access: Access) -> impl Fn(&str) -> Endpoint {
    let scope = format!("/api/v1{scope}");
    move |path| Endpoint::new(&scope, path, access, unsupported())
}

/// A control-plane resource, for the operator: an unsupported method is `404` while the control
/// plane is off (nothing under `/control` exists then) and `405` once it is on.
fn control_resource(path: &str) -> Endpoint {
    Endpoint::new(
        "/control",
        path,
        Access::Operator,
        (Access::Public, web::to(control_method_not_allowed)),
    )
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
