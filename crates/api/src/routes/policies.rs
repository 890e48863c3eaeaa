//! `/api/v1/organizations/{id}/policies` and `/branding` (Business and Enterprise plans).

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{
        AssetUrl, BrandingChange, ConcurrentSessions, CustomLoginChange, Email,
        EmailBrandingChange, FooterText, GraceHours, HexColor, IdleMinutes, IpAllowlist, IpRange,
        LoginSubtitle, LoginTitle, MaxAgeDays, MfaMethod, MfaPolicy, MinLength,
        OrganizationPolicies, PasswordPolicy, ReuseCount, SenderName, SessionHours, SessionPolicy,
    },
    service::{BrandingService, BrandingView, PolicyService, PolicyView},
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::extract::{nullable, origin_of, RequestOrigin};
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{as_is, client_address, Fields, InOrganization, ValidJson},
    state::AppState,
};

// ---------------------------------------------------------------------------------------------
// policies
// ---------------------------------------------------------------------------------------------

/// The `password_policy` section: what a member's new password must hold, how long it lasts,
/// and how many earlier ones it may not repeat. Every field is required in a `PUT` and present
/// in a response.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct PasswordPolicyBody {
    /// 8 to 128.
    #[schema(example = 12)]
    min_length: Option<i64>,
    require_uppercase: Option<bool>,
    require_lowercase: Option<bool>,
    require_numbers: Option<bool>,
    require_special_chars: Option<bool>,
    /// Days until a password must be changed; 0 disables.
    #[schema(example = 90)]
    max_age_days: Option<i64>,
    /// 0 to 24 previous passwords that may not be chosen again.
    #[schema(example = 5)]
    prevent_reuse_count: Option<i64>,
}

/// The `mfa_policy` section: whether members must have a second factor, which kinds count,
/// and the grace period in hours after a policy change. Every field is required in a `PUT` and
/// present in a response.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct MfaPolicyBody {
    required: Option<bool>,
    /// A subset of `totp`, `webauthn`.
    #[schema(example = json!(["totp", "webauthn"]))]
    allowed_methods: Option<Vec<String>>,
    #[schema(example = 72)]
    grace_period_hours: Option<i64>,
}

/// The `session_policy` section: a session's absolute lifetime in hours, its idle timeout in
/// minutes, and how many sessions a user may hold at once. Every field is required in a `PUT`
/// and present in a response.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct SessionPolicyBody {
    /// 1 to 720.
    #[schema(example = 12)]
    max_session_duration_hours: Option<i64>,
    /// 5 to 1440.
    #[schema(example = 30)]
    idle_timeout_minutes: Option<i64>,
    /// 1 to 100.
    #[schema(example = 5)]
    max_concurrent_sessions: Option<i64>,
}

/// The `ip_allowlist` section: when `enabled`, requests that act in the organization must
/// come from an address in `allowed_ips`. Both fields are required in a `PUT` and present in a
/// response.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct IpAllowlistBody {
    enabled: Option<bool>,
    /// IPv4 or IPv6 addresses or CIDR ranges.
    #[schema(example = json!(["203.0.113.0/24", "2001:db8::/32"]))]
    allowed_ips: Option<Vec<String>>,
}

/// The whole policy configuration: every section, every field.
#[derive(Deserialize, ToSchema)]
pub struct PoliciesRequest {
    password_policy: Option<PasswordPolicyBody>,
    mfa_policy: Option<MfaPolicyBody>,
    session_policy: Option<SessionPolicyBody>,
    ip_allowlist: Option<IpAllowlistBody>,
}

/// The organization's policies, every section and field, as `GET` and `PUT
/// /api/v1/organizations/{id}/policies` answer.
#[derive(Serialize, ToSchema)]
pub struct PoliciesResponse {
    organization_id: Uuid,
    password_policy: PasswordPolicyBody,
    mfa_policy: MfaPolicyBody,
    session_policy: SessionPolicyBody,
    ip_allowlist: IpAllowlistBody,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

impl From<PolicyView> for PoliciesResponse {
    fn from(view: PolicyView) -> Self {
        let OrganizationPolicies {
            password_policy: password,
            mfa_policy: mfa,
            session_policy: session,
            ip_allowlist,
        } = view.policies;
        Self {
            organization_id: view.organization_id.as_uuid(),
            password_policy: PasswordPolicyBody {
                min_length: Some(password.min_length.get().into()),
                require_uppercase: Some(password.require_uppercase),
                require_lowercase: Some(password.require_lowercase),
                require_numbers: Some(password.require_numbers),
                require_special_chars: Some(password.require_special_chars),
                max_age_days: Some(password.max_age_days.get().into()),
                prevent_reuse_count: Some(password.prevent_reuse_count.get().into()),
            },
            mfa_policy: MfaPolicyBody {
                required: Some(mfa.required()),
                allowed_methods: Some(
                    mfa.allowed_methods()
                        .iter()
                        .map(|m| m.as_str().to_owned())
                        .collect(),
                ),
                grace_period_hours: Some(mfa.grace_period_hours().get().into()),
            },
            session_policy: SessionPolicyBody {
                max_session_duration_hours: Some(session.max_session_duration_hours.get().into()),
                idle_timeout_minutes: Some(session.idle_timeout_minutes.get().into()),
                max_concurrent_sessions: Some(session.max_concurrent_sessions.get().into()),
            },
            ip_allowlist: IpAllowlistBody {
                enabled: Some(ip_allowlist.enabled()),
                allowed_ips: Some(
                    ip_allowlist
                        .allowed_ips()
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                ),
            },
            updated_at: view.updated_at,
        }
    }
}

/// Parses the whole request, reporting every bad field at its full path.
fn parse_policies(body: PoliciesRequest) -> Result<OrganizationPolicies, ApiError> {
    let mut f = Fields::new();
    let password = f.required("password_policy", body.password_policy, as_is);
    let mfa = f.required("mfa_policy", body.mfa_policy, as_is);
    let session = f.required("session_policy", body.session_policy, as_is);
    let allowlist = f.required("ip_allowlist", body.ip_allowlist, as_is);

    let password = password.and_then(|p| {
        let n = "password_policy";
        let min_length = f.required(&format!("{n}.min_length"), p.min_length, MinLength::parse);
        let upper = f.required(
            &format!("{n}.require_uppercase"),
            p.require_uppercase,
            as_is,
        );
        let lower = f.required(
            &format!("{n}.require_lowercase"),
            p.require_lowercase,
            as_is,
        );
        let numbers = f.required(&format!("{n}.require_numbers"), p.require_numbers, as_is);
        let special = f.required(
            &format!("{n}.require_special_chars"),
            p.require_special_chars,
            as_is,
        );
        let max_age = f.required(
            &format!("{n}.max_age_days"),
            p.max_age_days,
            MaxAgeDays::parse,
        );
        let reuse = f.required(
            &format!("{n}.prevent_reuse_count"),
            p.prevent_reuse_count,
            ReuseCount::parse,
        );
        Some(PasswordPolicy {
            min_length: min_length?,
            require_uppercase: upper?,
            require_lowercase: lower?,
            require_numbers: numbers?,
            require_special_chars: special?,
            max_age_days: max_age?,
            prevent_reuse_count: reuse?,
        })
    });

    let mfa = mfa.and_then(|m| {
        let required = f.required("mfa_policy.required", m.required, as_is);
        let methods = f.each(
            "mfa_policy.allowed_methods",
            m.allowed_methods,
            MfaPolicy::MAX_METHODS,
            |raw| MfaMethod::parse(&raw),
        );
        let grace = f.required(
            "mfa_policy.grace_period_hours",
            m.grace_period_hours,
            GraceHours::parse,
        );
        let (required, methods, grace) = (required?, methods?, grace?);
        match MfaPolicy::new(required, methods, grace) {
            Ok(policy) => Some(policy),
            Err(e) => {
                f.invalid(
                    "mfa_policy.allowed_methods",
                    format!("mfa_policy.allowed_methods {e}"),
                );
                None
            }
        }
    });

    let session = session.and_then(|s| {
        let hours = f.required(
            "session_policy.max_session_duration_hours",
            s.max_session_duration_hours,
            SessionHours::parse,
        );
        let idle = f.required(
            "session_policy.idle_timeout_minutes",
            s.idle_timeout_minutes,
            IdleMinutes::parse,
        );
        let concurrent = f.required(
            "session_policy.max_concurrent_sessions",
            s.max_concurrent_sessions,
            ConcurrentSessions::parse,
        );
        Some(SessionPolicy {
            max_session_duration_hours: hours?,
            idle_timeout_minutes: idle?,
            max_concurrent_sessions: concurrent?,
        })
    });

    let allowlist = allowlist.and_then(|a| {
        let enabled = f.required("ip_allowlist.enabled", a.enabled, as_is);
        let ranges = f.each(
            "ip_allowlist.allowed_ips",
            a.allowed_ips,
            IpAllowlist::MAX_ENTRIES,
            |raw| IpRange::parse(&raw),
        );
        match IpAllowlist::new(enabled?, ranges?) {
            Ok(list) => Some(list),
            Err(e) => {
                f.invalid(
                    "ip_allowlist.allowed_ips",
                    format!("ip_allowlist.allowed_ips {e}"),
                );
                None
            }
        }
    });

    f.finish(|| {
        Some(OrganizationPolicies {
            password_policy: password?,
            mfa_policy: mfa?,
            session_policy: session?,
            ip_allowlist: allowlist?,
        })
    })
}

/// The organization's policies; the defaults when it never saved any.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/policies", tag = "policies",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, body = PoliciesResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Not owner or admin, plan below business, or address outside the IP allowlist"),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get_policies(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let view = state.policies.policies(&actor).await?;
    Ok(HttpResponse::Ok().json(PoliciesResponse::from(view)))
}

/// Replaces the whole policy configuration. An enabled IP allowlist must include the caller's
/// own address.
#[utoipa::path(
    put, path = "/api/v1/organizations/{id}/policies", tag = "policies",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = PoliciesRequest,
    responses(
        (status = 200, body = PoliciesResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody, description = "A field out of bounds, at its full path; or an allowlist that would lock the caller out"),
    )
)]
pub async fn put_policies(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<PoliciesRequest>,
) -> Result<HttpResponse, ApiError> {
    PolicyService::authorize(&actor)?;
    let policies = parse_policies(body)?;
    let view = state
        .policies
        .replace(&actor, policies, client_address(&req), &origin_of(&req))
        .await?;
    Ok(HttpResponse::Ok().json(PoliciesResponse::from(view)))
}

// ---------------------------------------------------------------------------------------------
// branding
// ---------------------------------------------------------------------------------------------

/// The `custom_login` section of a branding change: the sign-in page's heading, subheading
/// and background image. Absent fields keep their value.
#[derive(Deserialize, ToSchema)]
pub struct CustomLoginRequest {
    title: Option<String>,
    subtitle: Option<String>,
    /// An https URL of a PNG, JPEG, WebP or SVG image; `null` removes it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    background_url: Option<Option<String>>,
}

/// The `email_branding` section of a branding change: the sender's display name, the
/// reply-to address and the footer of the organization's transactional emails. Absent fields
/// keep their value.
#[derive(Deserialize, ToSchema)]
pub struct EmailBrandingRequest {
    from_name: Option<String>,
    /// `null` removes it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    reply_to: Option<Option<String>>,
    footer_text: Option<String>,
}

/// The fields to change; absent fields keep their value, `null` removes an optional one.
#[derive(Deserialize, ToSchema)]
pub struct BrandingRequest {
    /// An https URL ending in `.png` or `.svg`; `null` removes it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    logo_url: Option<Option<String>>,
    /// An https URL ending in `.ico` or `.png`; `null` removes it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    favicon_url: Option<Option<String>>,
    #[schema(example = "#4F46E5")]
    primary_color: Option<String>,
    #[schema(example = "#0EA5E9")]
    accent_color: Option<String>,
    custom_login: Option<CustomLoginRequest>,
    email_branding: Option<EmailBrandingRequest>,
}

/// The `custom_login` section of the branding: the sign-in page's heading, subheading and
/// background image (null when none).
#[derive(Serialize, ToSchema)]
pub struct CustomLoginResponse {
    title: String,
    subtitle: String,
    background_url: Option<String>,
}

/// The `email_branding` section of the branding: the sender's display name, the reply-to
/// address (null when none) and the footer of the organization's transactional emails.
#[derive(Serialize, ToSchema)]
pub struct EmailBrandingResponse {
    from_name: String,
    reply_to: Option<String>,
    footer_text: String,
}

/// The organization's branding, every field, as `GET` and `PUT
/// /api/v1/organizations/{id}/branding` answer.
#[derive(Serialize, ToSchema)]
pub struct BrandingResponse {
    organization_id: Uuid,
    logo_url: Option<String>,
    favicon_url: Option<String>,
    primary_color: String,
    accent_color: String,
    custom_login: CustomLoginResponse,
    email_branding: EmailBrandingResponse,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

impl From<BrandingView> for BrandingResponse {
    fn from(view: BrandingView) -> Self {
        let b = view.branding;
        let url = |u: Option<AssetUrl>| u.map(|u| u.as_str().to_owned());
        Self {
            organization_id: view.organization_id.as_uuid(),
            logo_url: url(b.logo_url),
            favicon_url: url(b.favicon_url),
            primary_color: b.primary_color.as_str().to_owned(),
            accent_color: b.accent_color.as_str().to_owned(),
            custom_login: CustomLoginResponse {
                title: b.custom_login.title.as_str().to_owned(),
                subtitle: b.custom_login.subtitle.as_str().to_owned(),
                background_url: url(b.custom_login.background_url),
            },
            email_branding: EmailBrandingResponse {
                from_name: b.email_branding.from_name.as_str().to_owned(),
                reply_to: b.email_branding.reply_to.map(|e| e.as_ref().to_owned()),
                footer_text: b.email_branding.footer_text.as_str().to_owned(),
            },
            updated_at: view.updated_at,
        }
    }
}

/// A nullable field: absent keeps, `null` removes, a value is parsed.
fn parse_nullable<T, E: std::fmt::Display>(
    f: &mut Fields,
    name: &str,
    raw: Option<Option<String>>,
    parse: impl FnOnce(&str) -> Result<T, E>,
) -> Option<Option<Option<T>>> {
    match raw {
        None => Some(None),
        Some(None) => Some(Some(None)),
        Some(Some(raw)) => f
            .optional(name, Some(raw), |raw| parse(&raw))
            .map(|parsed| parsed.map(Some)),
    }
}

fn parse_branding(body: BrandingRequest) -> Result<BrandingChange, ApiError> {
    let mut f = Fields::new();
    let logo_url = parse_nullable(&mut f, "logo_url", body.logo_url, AssetUrl::logo);
    let favicon_url = parse_nullable(&mut f, "favicon_url", body.favicon_url, AssetUrl::favicon);
    let primary = f.optional("primary_color", body.primary_color, |s| HexColor::parse(&s));
    let accent = f.optional("accent_color", body.accent_color, |s| HexColor::parse(&s));
    let login = body.custom_login.map(|l| {
        let title = f.optional("custom_login.title", l.title, |s| LoginTitle::parse(&s));
        let subtitle = f.optional("custom_login.subtitle", l.subtitle, |s| {
            LoginSubtitle::parse(&s)
        });
        let background = parse_nullable(
            &mut f,
            "custom_login.background_url",
            l.background_url,
            AssetUrl::background,
        );
        Some(CustomLoginChange {
            title: title?,
            subtitle: subtitle?,
            background_url: background?,
        })
    });
    let email = body.email_branding.map(|e| {
        let from_name = f.optional("email_branding.from_name", e.from_name, |s| {
            SenderName::parse(&s)
        });
        let reply_to = parse_nullable(&mut f, "email_branding.reply_to", e.reply_to, Email::parse);
        let footer = f.optional("email_branding.footer_text", e.footer_text, |s| {
            FooterText::parse(&s)
        });
        Some(EmailBrandingChange {
            from_name: from_name?,
            reply_to: reply_to?,
            footer_text: footer?,
        })
    });
    f.finish(|| {
        Some(BrandingChange {
            logo_url: logo_url?,
            favicon_url: favicon_url?,
            primary_color: primary?,
            accent_color: accent?,
            custom_login: login.unwrap_or(Some(CustomLoginChange::default()))?,
            email_branding: email.unwrap_or(Some(EmailBrandingChange::default()))?,
        })
    })
}

/// The organization's branding; the default look when it never saved any.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/branding", tag = "policies",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    responses(
        (status = 200, body = BrandingResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody, description = "Not owner or admin, or plan below business"),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn get_branding(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let view = state.branding.branding(&actor).await?;
    Ok(HttpResponse::Ok().json(BrandingResponse::from(view)))
}

/// Changes the branding fields the request names.
#[utoipa::path(
    put, path = "/api/v1/organizations/{id}/branding", tag = "policies",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = BrandingRequest,
    responses(
        (status = 200, body = BrandingResponse),
        (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn put_branding(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<BrandingRequest>,
) -> Result<HttpResponse, ApiError> {
    BrandingService::authorize(&actor)?;
    let change = parse_branding(body)?;
    let view = state.branding.update(&actor, change, &origin).await?;
    Ok(HttpResponse::Ok().json(BrandingResponse::from(view)))
}
