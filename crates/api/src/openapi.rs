//! The OpenAPI 3 document, generated from the route annotations.

use utoipa::{
    openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme},
    Modify, OpenApi,
};

use crate::{
    error::{ErrorBody, FieldError, LocPart, SsoRequiredBody, ValidationErrorBody},
    routes::{
        api_keys, applications, audit, auth, control, directory, domains, health, iam, links,
        members, mfa, oauth, organizations, policies, sso, users, webhooks,
    },
};

/// The OpenAPI document of the JSON API: the operations of [`crate::routes`] and the schemas
/// they use, with the security schemes and the answers every operation shares added.
/// [`document`] renders it; `ApiDoc::openapi()` builds it.
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
        links::request_magic_link,
        links::verify_magic_link,
        links::forgot_password,
        links::reset_password,
        links::request_verification,
        links::verify_email,
        mfa::overview,
        mfa::enroll_totp,
        mfa::confirm_totp,
        mfa::start_webauthn,
        mfa::finish_webauthn,
        mfa::remove,
        mfa::recovery_codes,
        mfa::verify,
        users::me,
        users::update_me,
        users::delete_me,
        users::consents,
        users::revoke_consent,
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
        domains::add,
        domains::list,
        domains::verify,
        domains::remove,
        crate::pages::saml::login,
        crate::pages::saml::acs,
        sso::lookup,
        crate::pages::consent::authorize,
        oauth::token,
        oauth::revoke,
        oauth::introspect,
        oauth::userinfo,
        oauth::userinfo_post,
        oauth::discovery,
        members::list,
        members::invite,
        members::change_role,
        members::remove,
        members::transfer_ownership,
        directory::create_token,
        directory::list_tokens,
        directory::revoke_token,
        directory::group_roles,
        directory::save_group_roles,
        iam::create_service_account,
        iam::list_service_accounts,
        iam::get_service_account,
        iam::update_service_account,
        iam::delete_service_account,
        iam::create_service_account_key,
        iam::organization_keys,
        iam::revoke_organization_key,
        iam::permissions,
        iam::list_roles,
        iam::create_role,
        iam::get_role,
        iam::update_role,
        iam::delete_role,
        members::revoke_invitation,
        members::my_invitations,
        members::accept_by_id,
        members::accept_by_token,
        crate::pages::invitation::page,
        crate::pages::invitation::accept,
        members::iam_users,
        webhooks::create,
        webhooks::list,
        webhooks::get,
        webhooks::update,
        webhooks::delete,
        webhooks::events,
        webhooks::deliveries,
        webhooks::retry,
        webhooks::test,
        api_keys::create,
        api_keys::list,
        api_keys::delete,
        control::events,
        control::post_event,
        control::dead_letters,
        control::replay,
        control::metrics,
        control::control_log,
        audit::organization_log,
        health::livez,
        health::readyz,
        health::health,
    ),
    components(schemas(ErrorBody, ValidationErrorBody, FieldError, LocPart, SsoRequiredBody)),
    modifiers(&SecuritySchemes, &UniqueOperationIds, &CommonResponses, &RateLimitHeaders),
    tags(
        (name = "auth", description = "Registration, login, tokens"),
        (name = "mfa", description = "Second factors (authenticator apps, security keys), recovery codes, the second step of a sign-in"),
        (name = "users", description = "The caller's profile"),
        (name = "organizations", description = "Organizations the caller belongs to"),
        (name = "members", description = "Members, invitations, roles, ownership transfer"),
        (name = "iam", description = "Service accounts and their keys; every key that acts in the organization"),
        (name = "directory", description = "Directory sync: SCIM tokens and the map from directory groups to roles (the SCIM 2.0 protocol itself, at /scim/v2/{organization_id}, describes itself at its discovery endpoints)"),
        (name = "oauth", description = "OAuth 2.0 authorization code with PKCE, OpenID Connect (ID tokens, userinfo, discovery), revocation, introspection and client credentials (enterprise plan); errors are RFC 6749 bodies"),
        (name = "applications", description = "OAuth clients of an organization"),
        (name = "policies", description = "Policies and branding (business and enterprise plans)"),
        (name = "sso", description = "SAML single sign-on (business and enterprise plans): configuration, discovery, the service provider's endpoints"),
        (name = "domains", description = "Email domains an organization proves it holds with a DNS TXT record: what single sign-on may speak for"),
        (name = "invitations", description = "Invitations addressed to the caller, and the HTML page of the mailed link (/invitations/{token})"),
        (name = "webhooks", description = "Endpoints, signed deliveries, the delivery log"),
        (name = "api-keys", description = "Keys for server-to-server calls"),
        (name = "health", description = "Liveness, readiness, credential checks"),
        (name = "control", description = "The control plane, for operators (Authorization: Bearer GATEHOUSE_CONTROL_TOKEN; 404 everywhere when it is unset)"),
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
            "control",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
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

/// Gives every operation an `operationId` of its own, as OpenAPI requires: a handler's name
/// that more than one module uses (`list`, `create`, ...) gets its tag in front
/// (`webhooks_list`, `api_keys_create`).
struct UniqueOperationIds;

impl Modify for UniqueOperationIds {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let mut uses = std::collections::HashMap::<String, usize>::new();
        for item in openapi.paths.paths.values_mut() {
            for id in operations_of_mut(item).filter_map(|op| op.operation_id.clone()) {
                *uses.entry(id).or_default() += 1;
            }
        }
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_of_mut(item) {
                let (Some(id), Some(tag)) = (
                    &operation.operation_id,
                    operation.tags.as_ref().and_then(|t| t.first()),
                ) else {
                    continue;
                };
                if uses.get(id).copied().unwrap_or(0) > 1 {
                    operation.operation_id = Some(format!("{}_{id}", tag.replace('-', "_")));
                }
            }
        }
    }
}

/// Answers that whole kinds of operations give, documented here, where the rule that gives them
/// is named, rather than on every route:
///
/// - a JSON body that is not a JSON object is `400`, one over the size limit `413`, one whose
///   `Content-Type` is not JSON `415`, and one whose fields do not parse `422` (the body
///   extractor);
/// - an operation of the control plane answers `401` without the control token, and `404` when
///   the control plane is off (the operator's gate);
/// - an operation that takes credentials answers `401` without valid ones, and `403` to an
///   OAuth token whose API scopes do not cover it or a machine token outside its organization
///   (the routes' gates, `access.rs`);
/// - one that needs `X-Organization-ID` answers `422` when it is missing or not a UUID, and
///   `404` to a caller who is not a member (the member's gate);
/// - every operation but the probes answers `429` with `Retry-After` past the caller's rate
///   limit (the routes' gates), and a store that cannot be reached makes any operation that
///   needs it `503` with `Retry-After`;
/// - every operation answers `414` to a path and query over 8 KiB and `431` to headers over
///   16 KiB (the request-head bounds).
struct CommonResponses;

/// Probes: never rate limited.
const PROBES: [&str; 2] = ["/livez", "/readyz"];

impl Modify for CommonResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        for (path, item) in &mut openapi.paths.paths {
            let probe = PROBES.contains(&path.as_str());
            let live = path == "/livez";
            for operation in operations_of_mut(item) {
                let requirements: Vec<Vec<String>> = operation
                    .security
                    .iter()
                    .flatten()
                    .filter_map(|requirement| serde_json::to_value(requirement).ok())
                    .filter_map(|value| value.as_object().map(|o| o.keys().cloned().collect()))
                    .collect();
                let credentials =
                    !requirements.is_empty() && requirements.iter().all(|r| !r.is_empty());
                let organization = credentials
                    && requirements
                        .iter()
                        .all(|r| r.iter().any(|scheme| scheme == "organization"));
                let control = requirements
                    .iter()
                    .any(|r| r.iter().any(|scheme| scheme == "control"));
                let json_body = operation
                    .request_body
                    .as_ref()
                    .is_some_and(|body| body.content.keys().any(|kind| kind == "application/json"));
                let responses = &mut operation.responses.responses;
                let mut add = |status: &str, response: utoipa::openapi::Response| {
                    responses
                        .entry(status.to_owned())
                        .or_insert_with(|| response.into());
                };
                if json_body {
                    add("400", error("The body is not a JSON object", "ErrorBody"));
                    add(
                        "413",
                        error("The body is larger than the limit", "ErrorBody"),
                    );
                    add(
                        "415",
                        error(
                            "The body's Content-Type is not JSON (application/json)",
                            "ErrorBody",
                        ),
                    );
                    add(
                        "422",
                        error(
                            "Fields that do not parse, each at its location",
                            "ValidationErrorBody",
                        ),
                    );
                }
                if control {
                    add("401", error("Not the control token", "ErrorBody"));
                    add(
                        "404",
                        error(
                            "The control plane is off (no GATEHOUSE_CONTROL_TOKEN)",
                            "ErrorBody",
                        ),
                    );
                }
                if credentials {
                    add(
                        "401",
                        error("Missing, invalid or expired credentials", "ErrorBody"),
                    );
                    add(
                        "403",
                        error(
                            "The credentials may not do this: an OAuth token whose API scopes do not grant it, or a machine token outside its organization",
                            "ErrorBody",
                        ),
                    );
                }
                if organization {
                    add(
                        "422",
                        error(
                            "X-Organization-ID is missing or not a UUID",
                            "ValidationErrorBody",
                        ),
                    );
                    add(
                        "404",
                        error("Not a member of the organization", "ErrorBody"),
                    );
                }
                if !probe {
                    add(
                        "429",
                        with_retry_after(error("Rate limit exceeded", "ErrorBody")),
                    );
                }
                add(
                    "414",
                    error("The path and query are longer than 8 KiB", "ErrorBody"),
                );
                add(
                    "431",
                    error("The headers hold more than 16 KiB", "ErrorBody"),
                );
                if !live {
                    add(
                        "503",
                        with_retry_after(error("The store cannot be reached", "ErrorBody")),
                    );
                }
            }
        }
    }
}

/// Declares the `X-RateLimit-*` headers on every response of every operation (after
/// [`CommonResponses`], so on the ones it added too): the routes' gates put them on
/// every response they counted. They are declared optional, since a few responses are never
/// counted: the probes (`/livez`, `/readyz`), answers refused before routing (`400`, `414`,
/// `431`), and any answer while the limiter itself cannot count (it fails open). Every `429`
/// has `Retry-After`, the rate limit's ([`CommonResponses`]) and an operation's own (a locked
/// account, a throttled address) alike.
struct RateLimitHeaders;

/// The three headers of the caller's budget, with what each holds.
const RATE_LIMIT_HEADERS: [(&str, &str); 3] = [
    (
        "X-RateLimit-Limit",
        "Requests per minute the caller's budget allows (the plan's rate)",
    ),
    ("X-RateLimit-Remaining", "Requests left in the budget now"),
    (
        "X-RateLimit-Reset",
        "When the budget is whole again, in Unix seconds",
    ),
];

impl Modify for RateLimitHeaders {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{header::HeaderBuilder, schema::Type, ObjectBuilder, RefOr};
        for item in openapi.paths.paths.values_mut() {
            for operation in operations_of_mut(item) {
                for (status, response) in &mut operation.responses.responses {
                    let RefOr::T(response) = response else {
                        continue;
                    };
                    if status == "429" && !response.headers.contains_key("Retry-After") {
                        *response = with_retry_after(response.clone());
                    }
                    for (name, description) in RATE_LIMIT_HEADERS {
                        response.headers.entry(name.to_owned()).or_insert_with(|| {
                            HeaderBuilder::new()
                                .schema(ObjectBuilder::new().schema_type(Type::Integer))
                                .description(Some(description))
                                .build()
                        });
                    }
                }
            }
        }
    }
}

/// A JSON error response of the named schema.
fn error(description: &str, schema: &str) -> utoipa::openapi::Response {
    use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name(schema)))
                .build(),
        )
        .build()
}

/// The response with a `Retry-After` header of whole seconds.
fn with_retry_after(mut response: utoipa::openapi::Response) -> utoipa::openapi::Response {
    use utoipa::openapi::{header::HeaderBuilder, schema::Type, ObjectBuilder};
    response.headers.insert(
        "Retry-After".to_owned(),
        HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(Type::Integer))
            .description(Some("Seconds to wait before trying again"))
            .build(),
    );
    response
}

fn operations_of_mut(
    item: &mut utoipa::openapi::PathItem,
) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ]
    .into_iter()
    .flatten()
}

/// The document as pretty JSON.
pub fn document() -> Result<String, serde_json::Error> {
    ApiDoc::openapi().to_pretty_json()
}
