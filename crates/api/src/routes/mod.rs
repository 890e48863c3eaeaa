//! The JSON API's handlers, one module per resource: each handler parses the request into
//! domain types, calls one use case, and shapes its answer. [`crate::configure`] mounts them
//! at their paths, and each `#[utoipa::path]` annotation describes one operation in the
//! OpenAPI document ([`crate::openapi`]). Two speak other protocols' formats: [`scim`]
//! answers and fails as SCIM 2.0 does, and [`oauth`]'s errors are RFC 6749 bodies.

pub mod api_keys;
pub mod applications;
pub mod audit;
pub mod auth;
pub mod control;
pub mod directory;
pub mod domains;
pub mod health;
pub mod iam;
pub mod links;
pub mod members;
pub mod mfa;
pub mod oauth;
pub mod organizations;
pub mod policies;
pub mod scim;
pub mod sso;
pub mod users;
pub mod webhooks;

use actix_web::HttpResponseBuilder;

/// `response` with `Cache-Control: no-store`, for an answer that no cache may keep: one that
/// shows a secret or a token once, or a state that is only true now.
fn not_stored(mut response: HttpResponseBuilder) -> HttpResponseBuilder {
    response.insert_header(("Cache-Control", "no-store"));
    response
}
