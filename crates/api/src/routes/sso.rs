//! `/api/v1/sso/configurations`: SAML single sign-on configuration (Business and Enterprise).

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{
        DomainWhitelist, IdpCertificate, IdpEntityId, IdpSsoUrl, OrganizationId, ProvisionRole,
        SsoChange, SsoProvider,
    },
    service::{NewSsoConfiguration, SsoService, SsoView},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, FieldError, ValidationErrorBody},
    extract::{actor_in, as_is, AuthenticatedAgent, Fields, InOrganization, ValidJson},
    state::AppState,
};

/// The body of `POST /api/v1/sso/configurations` and `PUT /api/v1/sso/configurations/{org_id}`.
/// A create needs `organization_id`, `provider`, `idp_entity_id`, `idp_sso_url` and
/// `idp_certificate`; an update changes only the fields it sends.
#[derive(Deserialize, ToSchema)]
pub struct SsoRequest {
    /// Required on create: the organization to configure.
    organization_id: Option<Uuid>,
    #[schema(example = "saml")]
    provider: Option<String>,
    #[schema(example = "https://idp.example.com/metadata")]
    idp_entity_id: Option<String>,
    #[schema(example = "https://idp.example.com/sso/saml")]
    idp_sso_url: Option<String>,
    /// The identity provider's signing certificate, X.509 PEM. Never returned.
    idp_certificate: Option<String>,
    /// Email domains whose users must sign in through SSO.
    #[schema(example = json!(["example.com"]))]
    domain_whitelist: Option<Vec<String>>,
    auto_provision: Option<bool>,
    /// `admin`, `member` or `viewer`.
    #[schema(example = "member")]
    default_role: Option<String>,
    is_active: Option<bool>,
}

/// An organization's SAML configuration, as create, read and update return it: the identity
/// provider's settings (never its certificate, only the certificate's fingerprint and expiry)
/// and the service-provider addresses the service generated.
#[derive(Serialize, ToSchema)]
pub struct SsoResponse {
    organization_id: Uuid,
    #[schema(example = "saml")]
    provider: &'static str,
    idp_entity_id: String,
    idp_sso_url: String,
    /// Configure the identity provider with this entity id...
    sp_entity_id: String,
    /// ... and this assertion consumer URL.
    sp_acs_url: String,
    /// Email domains whose users sign in through SSO: only those also verified by the
    /// organization (`verified_domains`) do; the others are kept and do nothing.
    domain_whitelist: Vec<String>,
    /// The whitelisted domains the organization verified (`/organizations/{id}/domains`).
    verified_domains: Vec<String>,
    auto_provision: bool,
    default_role: &'static str,
    is_active: bool,
    /// SHA-256 of the stored certificate (DER), to tell which one is in place.
    idp_certificate_fingerprint: String,
    /// When the stored certificate expires.
    #[serde(with = "gatehouse_domain::model::timestamp")]
    idp_certificate_expires_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    created_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

impl From<SsoView> for SsoResponse {
    fn from(view: SsoView) -> Self {
        let c = view.configuration;
        Self {
            organization_id: c.organization_id.as_uuid(),
            provider: c.provider.as_str(),
            idp_entity_id: c.idp_entity_id.as_str().to_owned(),
            idp_sso_url: c.idp_sso_url.as_str().to_owned(),
            sp_entity_id: view.sp_entity_id,
            sp_acs_url: view.sp_acs_url,
            domain_whitelist: c
                .domain_whitelist
                .as_slice()
                .iter()
                .map(|d| d.as_str().to_owned())
                .collect(),
            verified_domains: view
                .verified_domains
                .iter()
                .map(|d| d.as_str().to_owned())
                .collect(),
            auto_provision: c.auto_provision,
            default_role: c.default_role.as_str(),
            is_active: c.is_active,
            idp_certificate_fingerprint: c.idp_certificate.fingerprint_sha256().to_owned(),
            idp_certificate_expires_at: c.idp_certificate.not_after(),
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// Every field of the request, parsed when present.
struct Parsed {
    provider: Option<SsoProvider>,
    idp_entity_id: Option<IdpEntityId>,
    idp_sso_url: Option<IdpSsoUrl>,
    idp_certificate: Option<IdpCertificate>,
    domain_whitelist: Option<DomainWhitelist>,
    auto_provision: Option<bool>,
    default_role: Option<ProvisionRole>,
    is_active: Option<bool>,
}

/// Parses the fields; `required` names those that must be present.
fn parse(body: SsoRequest, required: &[&str], now: OffsetDateTime) -> Result<Parsed, ApiError> {
    let mut f = Fields::new();
    let provider = pick(&mut f, required, "provider", body.provider, |s| {
        SsoProvider::parse(&s)
    });
    let entity = pick(&mut f, required, "idp_entity_id", body.idp_entity_id, |s| {
        IdpEntityId::parse(&s)
    });
    let url = pick(&mut f, required, "idp_sso_url", body.idp_sso_url, |s| {
        IdpSsoUrl::parse(&s)
    });
    let certificate = pick(
        &mut f,
        required,
        "idp_certificate",
        body.idp_certificate,
        |s| IdpCertificate::parse(&s, now),
    );
    let whitelist = match body.domain_whitelist {
        None => Some(None),
        Some(raw) => match DomainWhitelist::parse(raw) {
            Ok(list) => Some(Some(list)),
            Err((index, e)) => {
                f.invalid(
                    &format!("domain_whitelist.{index}"),
                    format!("domain_whitelist[{index}] {e}"),
                );
                None
            }
        },
    };
    let role = f.optional("default_role", body.default_role, |s| {
        ProvisionRole::parse(&s)
    });
    f.finish(|| {
        Some(Parsed {
            provider: provider?,
            idp_entity_id: entity?,
            idp_sso_url: url?,
            idp_certificate: certificate?,
            domain_whitelist: whitelist?,
            auto_provision: body.auto_provision,
            default_role: role?,
            is_active: body.is_active,
        })
    })
}

/// A field parsed when present, and reported missing when `required` names it.
fn pick<T, E: std::fmt::Display>(
    f: &mut Fields,
    required: &[&str],
    name: &str,
    raw: Option<String>,
    parse: impl FnOnce(String) -> Result<T, E>,
) -> Option<Option<T>> {
    if required.contains(&name) {
        f.required(name, raw, parse).map(Some)
    } else {
        f.optional(name, raw, parse)
    }
}

const CREATE_REQUIRED: [&str; 4] = [
    "provider",
    "idp_entity_id",
    "idp_sso_url",
    "idp_certificate",
];

/// Configures SAML SSO for an organization. Returns the service-provider addresses to give the
/// identity provider.
#[utoipa::path(
    post, path = "/api/v1/sso/configurations", tag = "sso",
    security(("bearer" = []), ("api_key" = [])),
    request_body = SsoRequest,
    responses(
        (status = 201, body = SsoResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Not owner or admin, or plan below business"),
        (status = 404, body = ErrorBody, description = "No such organization of the caller's"),
        (status = 409, body = ErrorBody, description = "The organization already has a configuration"),
        (status = 422, body = ValidationErrorBody, description = "A bad field, an expired certificate"),
    )
)]
pub async fn create(
    req: HttpRequest,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    AuthenticatedAgent(agent): AuthenticatedAgent,
    ValidJson(body): ValidJson<SsoRequest>,
) -> Result<HttpResponse, ApiError> {
    let organization = body
        .organization_id
        .map(OrganizationId::from_uuid)
        .ok_or_else(|| ApiError::field(FieldError::missing("body", "organization_id")))?;
    let actor = actor_in(&req, agent, organization).await?;
    SsoService::authorize(&actor)?;
    let now = state.clock.now();
    let parsed = parse(body, &CREATE_REQUIRED, now)?;
    let (Some(provider), Some(idp_entity_id), Some(idp_sso_url), Some(idp_certificate)) = (
        parsed.provider,
        parsed.idp_entity_id,
        parsed.idp_sso_url,
        parsed.idp_certificate,
    ) else {
        return Err(ApiError::Validation(Vec::new()));
    };
    let new = NewSsoConfiguration {
        provider,
        idp_entity_id,
        idp_sso_url,
        idp_certificate,
        domain_whitelist: parsed.domain_whitelist.unwrap_or_default(),
        auto_provision: parsed.auto_provision.unwrap_or(false),
        default_role: parsed.default_role.unwrap_or_default(),
    };
    let view = state.sso.create(&actor, new, &origin).await?;
    Ok(HttpResponse::Created().json(SsoResponse::from(view)))
}

/// The organization's SSO configuration (without the certificate).
#[utoipa::path(
    get, path = "/api/v1/sso/configurations/{org_id}", tag = "sso",
    security(("bearer" = []), ("api_key" = [])),
    params(("org_id" = Uuid, Path)),
    responses(
        (status = 200, body = SsoResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "No such organization, or no configuration"),
    )
)]
pub async fn get(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let view = state.sso.configuration(&actor).await?;
    Ok(HttpResponse::Ok().json(SsoResponse::from(view)))
}

/// Changes the fields the request names.
#[utoipa::path(
    put, path = "/api/v1/sso/configurations/{org_id}", tag = "sso",
    security(("bearer" = []), ("api_key" = [])),
    params(("org_id" = Uuid, Path)),
    request_body = SsoRequest,
    responses(
        (status = 200, body = SsoResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn update(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<SsoRequest>,
) -> Result<HttpResponse, ApiError> {
    SsoService::authorize(&actor)?;
    if body
        .organization_id
        .is_some_and(|id| id != actor.organization_id().as_uuid())
    {
        return Err(ApiError::field(FieldError::invalid(
            "body",
            "organization_id",
            "organization_id must be the organization of the path, or left out",
        )));
    }
    let parsed = parse(body, &[], state.clock.now())?;
    let change = SsoChange {
        provider: parsed.provider,
        idp_entity_id: parsed.idp_entity_id,
        idp_sso_url: parsed.idp_sso_url,
        idp_certificate: parsed.idp_certificate,
        domain_whitelist: parsed.domain_whitelist,
        auto_provision: parsed.auto_provision,
        default_role: parsed.default_role,
        is_active: parsed.is_active,
    };
    let view = state.sso.update(&actor, change, &origin).await?;
    Ok(HttpResponse::Ok().json(SsoResponse::from(view)))
}

/// Escapes text for an XML attribute value.
/// Text for a double-quoted XML attribute (the `html-escape` crate's references are XML's too).
fn xml_attribute(text: &str) -> String {
    html_escape::encode_quoted_attribute(text).into_owned()
}

/// The service provider's SAML metadata for an organization's active SSO configuration: what
/// an identity provider imports from `sp_entity_id`. Public, as SAML metadata is; `404` when
/// the organization has no active configuration or its plan no longer includes SSO.
#[utoipa::path(
    get, path = "/sso/saml/{org_id}/metadata", tag = "sso",
    params(("org_id" = Uuid, Path)),
    responses(
        (status = 200, content_type = "application/samlmetadata+xml", body = String),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn metadata(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let not_found = || ApiError::NotFound("no SSO configuration here".into());
    let organization = Uuid::parse_str(&path.into_inner()).map_err(|_| not_found())?;
    let view = state
        .sso
        .published(OrganizationId::from_uuid(organization))
        .await
        .map_err(|e| match e {
            gatehouse_domain::service::SettingsError::Store(e) => ApiError::from(e),
            _ => not_found(),
        })?;
    let xml = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" entityID="{entity}">
  <md:SPSSODescriptor AuthnRequestsSigned="false" WantAssertionsSigned="true" protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">
    <md:NameIDFormat>urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress</md:NameIDFormat>
    <md:AssertionConsumerService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST" Location="{acs}" index="0" isDefault="true"/>
  </md:SPSSODescriptor>
</md:EntityDescriptor>
"#,
        entity = xml_attribute(&view.sp_entity_id),
        acs = xml_attribute(&view.sp_acs_url),
    );
    Ok(HttpResponse::Ok()
        .content_type("application/samlmetadata+xml")
        .insert_header(("Cache-Control", "public, max-age=300"))
        .body(xml))
}

/// The body of `POST /api/v1/sso/lookup`: the `email` (required) whose single sign-on to find.
#[derive(Deserialize, ToSchema)]
pub struct LookupRequest {
    #[schema(example = "grace@example.com")]
    email: Option<String>,
}

/// The `200` of `POST /api/v1/sso/lookup`: the organization whose single sign-on the email
/// uses, and where that sign-in starts.
#[derive(Serialize, ToSchema)]
pub struct LookupResponse {
    /// The organization whose identity provider the email's domain belongs to.
    organization_id: Uuid,
    /// Where its sign-in starts; add `?return_to=/path` to come back to a page of this service.
    #[schema(example = "https://id.example.com/sso/saml/0192.../login")]
    login_url: String,
}

/// Home realm discovery: which organization's single sign-on an email uses.
#[utoipa::path(
    post, path = "/api/v1/sso/lookup", tag = "sso", operation_id = "sso_lookup",
    request_body = LookupRequest,
    responses(
        (status = 200, body = LookupResponse, description = "An active configuration on a plan with SSO whitelists the email's domain"),
        (status = 404, body = ErrorBody, description = "No single sign-on for this email"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn lookup(
    state: web::Data<AppState>,
    ValidJson(body): ValidJson<LookupRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, as_is);
    let email = fields.finish(|| email)?;
    let found = state
        .saml
        .lookup(&email)
        .await?
        .ok_or_else(|| ApiError::NotFound("no single sign-on for this email".into()))?;
    Ok(HttpResponse::Ok().json(LookupResponse {
        organization_id: found.organization_id.as_uuid(),
        login_url: found.login_url,
    }))
}
