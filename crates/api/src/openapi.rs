//! The OpenAPI 3 document, generated from the route annotations.

use utoipa::{
    openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme},
    Modify, OpenApi,
};

use crate::{
    error::{ErrorBody, FieldError, LocPart, ValidationErrorBody},
    routes::{
        api_keys, applications, auth, health, members, oauth, organizations, policies, sso, users,
        webhooks,
    },
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Gatehouse",
        description = "Identity, organization and webhook service. Every error body is JSON with `detail`.",
    ),
    paths(
        auth::register,
        auth::login,
        auth::refresh,
        auth::logout,
        auth::change_password,
        auth::renew_password,
        auth::jwks,
        users::me,
        users::update_me,
        users::delete_me,
        organizations::list,
        organizations::create,
        organizations::get,
        organizations::update,
        organizations::delete,
        applications::create,
        applications::list,
        applications::get,
        applications::update,
        applications::rotate_secret,
        applications::delete,
        policies::get_policies,
        policies::put_policies,
        policies::get_branding,
        policies::put_branding,
        sso::create,
        sso::get,
        sso::update,
        sso::metadata,
        oauth::authorize,
        oauth::token,
        members::list,
        members::invite,
        members::change_role,
        members::remove,
        members::revoke_invitation,
        members::my_invitations,
        members::accept_by_id,
        members::accept_by_token,
        members::iam_users,
        webhooks::create,
        webhooks::list,
        webhooks::get,
        webhooks::update,
        webhooks::delete,
        webhooks::events,
        webhooks::deliveries,
        webhooks::retry,
        api_keys::create,
        api_keys::list,
        api_keys::delete,
        health::livez,
        health::readyz,
        health::health,
    ),
    components(schemas(ErrorBody, ValidationErrorBody, FieldError, LocPart)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "auth", description = "Registration, login, tokens"),
        (name = "users", description = "The caller's profile"),
        (name = "organizations", description = "Organizations the caller belongs to"),
        (name = "members", description = "Members, invitations, roles"),
        (name = "oauth", description = "OAuth 2.0 authorization code with PKCE (enterprise plan); errors are RFC 6749 bodies"),
        (name = "applications", description = "OAuth clients of an organization"),
        (name = "policies", description = "Policies and branding (business and enterprise plans)"),
        (name = "sso", description = "SAML single sign-on configuration (business and enterprise plans)"),
        (name = "invitations", description = "Invitations addressed to the caller"),
        (name = "webhooks", description = "Endpoints, signed deliveries, the delivery log"),
        (name = "api-keys", description = "Keys for server-to-server calls"),
        (name = "health", description = "Liveness, readiness, credential checks"),
    )
)]
pub struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-API-Key"))),
        );
        components.add_security_scheme(
            "organization",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::new("X-Organization-ID"))),
        );
    }
}

/// The document as pretty JSON.
pub fn document() -> Result<String, serde_json::Error> {
    ApiDoc::openapi().to_pretty_json()
}
