//! The one place where domain errors become HTTP statuses and `{detail}` bodies.
//!
//! Every error body is JSON with `detail`: a string, or for field validation a list of
//! `{loc, msg, type}` whose `loc` starts with `body`, `query`, `path` or `header`.
//! A 5xx body is generic; its cause goes to the log, once, here.

use actix_web::{
    http::{header, StatusCode},
    HttpResponse, ResponseError,
};
use gatehouse_domain::{
    ports::StoreError,
    service::{
        ApplicationError, AuditLogError, AuthenticateError, Busy, ChangePasswordError,
        CreateApiKeyError, DeleteApiKeyError, DirectoryError, DomainError, Forbidden, IamError,
        IssuedToApplication, LockedOut, LoginError, MemberError, MfaError, OnlyInsideOrganization,
        OrgAccessError, OrganizationError, OrganizationRefused, RefreshError, RegisterError,
        ReplayError, RevokeConsentError, SettingsError, TransferError, UpdateProfileError,
        VerifyError, WebhookError, SSO_REQUIRED,
    },
};
use serde::Serialize;
use utoipa::ToSchema;

/// One part of a field error's `loc`: a field's name, or a list index. The document
/// declares it as FastAPI does, a string or an integer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(untagged)]
pub enum LocPart {
    /// A location (`body`, `query`, `path`, `header`) or a field's name, written as a string.
    Name(String),
    /// The position of an item in a list field, counted from 0, written as a number.
    Index(u64),
}

impl From<&str> for LocPart {
    fn from(name: &str) -> Self {
        Self::Name(name.to_owned())
    }
}

impl From<usize> for LocPart {
    fn from(index: usize) -> Self {
        Self::Index(u64::try_from(index).unwrap_or(u64::MAX))
    }
}

/// One field-level validation error.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct FieldError {
    /// Where: `["body", "email"]`, `["query", "page"]`, `["header", "X-Organization-ID"]`,
    /// `["body", "events", 0]`.
    pub loc: Vec<LocPart>,
    /// What is wrong with the value, in words for a person.
    pub msg: String,
    /// The error's kind, written as `type`: `missing` for an absent required field,
    /// `value_error` for a value that breaks a rule, `type_error` for a body field of the wrong
    /// JSON type.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl FieldError {
    /// `loc` from its parts; a dotted field name (`settings.default_role`) becomes one part per
    /// segment.
    pub fn new(loc: &[&str], msg: impl Into<String>, kind: &'static str) -> Self {
        Self {
            loc: loc
                .iter()
                .flat_map(|part| part.split('.'))
                .map(|segment| match segment.parse::<u64>() {
                    // A list index stays a number: ["body", "allowed_ips", 2].
                    Ok(index) => LocPart::Index(index),
                    Err(_) => LocPart::from(segment),
                })
                .collect(),
            msg: msg.into(),
            kind,
        }
    }

    /// A required `field` absent from `location` (`body`, `query`, `path`, `header`):
    /// `field required`, of kind `missing`.
    pub fn missing(location: &str, field: &str) -> Self {
        Self::new(&[location, field], "field required", "missing")
    }

    /// A `field` of `location` whose value breaks a rule that `msg` names, of kind
    /// `value_error`.
    pub fn invalid(location: &str, field: &str, msg: impl Into<String>) -> Self {
        Self::new(&[location, field], msg, "value_error")
    }

    /// A list field of the body holding more than `max` items.
    pub fn too_many_items(field: &str, max: usize) -> Self {
        Self::invalid(
            "body",
            field,
            format!("{field} must hold at most {max} items"),
        )
    }
}

/// `{"detail": "..."}`, the body of every error but field validation.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// Why the request failed, in words for a person (generic for a `5xx`).
    pub detail: String,
}

/// `{"detail": [{loc, msg, type}, ...]}`.
#[derive(Serialize, ToSchema)]
pub struct ValidationErrorBody {
    /// One entry per field that failed validation.
    pub detail: Vec<FieldError>,
}

/// A failed request as the client will see it: each variant fixes the status, and the
/// [`ResponseError`] impl writes the body (`{detail}`, or the field list of a validation
/// error) and any header the status carries. Handlers return it, mostly through `?` on a
/// domain error.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// `400`: a request the server cannot take as sent (a body that is not a JSON object, a
    /// webhook URL that is not https); the string is the detail.
    #[error("{0}")]
    BadRequest(String),
    /// `401` with `WWW-Authenticate: Bearer`: missing, invalid or expired credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// `403`: a known caller who may not do this: a permission, role or plan it lacks, or a
    /// policy that refuses it.
    #[error("{0}")]
    Forbidden(String),
    /// `404`: the resource the request names was not found.
    #[error("{0}")]
    NotFound(String),
    /// `409`: the request clashes with the resource's current state, such as a taken slug.
    #[error("{0}")]
    Conflict(String),
    /// `422` with a string detail: a well-formed request that the resource's rules refuse,
    /// such as a webhook endpoint past the plan's limit.
    #[error("{0}")]
    Unprocessable(String),
    /// `422` with `detail` a list of [`FieldError`]s.
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    /// `413`: a body over the limit, in bytes.
    #[error("request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// `408`: the request body did not arrive within `GATEHOUSE_BODY_TIMEOUT_SECS` (the
    /// connection closes after the answer).
    #[error("the request body did not arrive within {0} s")]
    BodyTimeout(u64),
    /// `415`: a body whose `Content-Type` the operation does not take.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// `429` with `Retry-After`: an account locked out after failed sign-ins.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// `429` with `Retry-After: 1`: the organization's heavy requests (searches, SCIM lists,
    /// filtered audit logs) are all under way, and none ended within the wait.
    #[error(transparent)]
    Busy(#[from] Busy),
    /// `403` with `sso_url`: the address signs in with its organization's single sign-on.
    #[error("{}", SSO_REQUIRED)]
    SsoRequired(String),
    /// `403` with `sso_url`: the organization a token was to speak for signs this address in
    /// with its single sign-on only.
    #[error("organization requires single sign-on")]
    OrganizationSso(String),
    /// `503` with `Retry-After: 1`: the store did not answer. The body is generic; the cause
    /// goes to the log.
    #[error("the service is temporarily unavailable")]
    StoreUnavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// `503` whose detail says why: a feature this server's configuration leaves out (which
    /// setting), or an outside service it asks (the DNS) not answering.
    #[error("{0}")]
    Unavailable(String),
    /// `500`: a failure the client cannot fix. The body says only `internal error`; the
    /// cause goes to the log.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The `403` of a password, a sign-in link or a password reset for an address that signs in
/// with its organization's single sign-on: where to go instead.
#[derive(Serialize, ToSchema)]
pub struct SsoRequiredBody {
    /// Why the sign-in was refused.
    #[schema(example = "this account signs in with single sign-on")]
    pub detail: String,
    /// The organization's single sign-on: `{public_url}/sso/saml/{organization_id}/login`.
    pub sso_url: String,
}

impl ApiError {
    /// A `422` validation error about one field.
    pub fn field(error: FieldError) -> Self {
        Self::Validation(vec![error])
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden(_) | Self::SsoRequired(_) | Self::OrganizationSso(_) => {
                StatusCode::FORBIDDEN
            }
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Conflict(_) => StatusCode::CONFLICT,
            Self::Unprocessable(_) | Self::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::LockedOut(_) | Self::Busy(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::StoreUnavailable(_) | Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        match self {
            Self::Validation(errors) => response.json(ValidationErrorBody {
                detail: errors.clone(),
            }),
            Self::Unauthorized(detail) => response
                .insert_header((header::WWW_AUTHENTICATE, "Bearer"))
                .json(ErrorBody {
                    detail: detail.clone(),
                }),
            Self::LockedOut(locked) => response
                .insert_header((header::RETRY_AFTER, locked.seconds().to_string()))
                .json(ErrorBody {
                    detail: locked.to_string(),
                }),
            Self::Busy(busy) => {
                response
                    .insert_header((header::RETRY_AFTER, "1"))
                    .json(ErrorBody {
                        detail: busy.to_string(),
                    })
            }
            Self::SsoRequired(sso_url) | Self::OrganizationSso(sso_url) => {
                response.json(SsoRequiredBody {
                    detail: self.to_string(),
                    sso_url: sso_url.clone(),
                })
            }
            Self::StoreUnavailable(cause) => {
                tracing::warn!(error = %cause, cause = ?cause.source(), "store unavailable");
                response
                    .insert_header((header::RETRY_AFTER, "1"))
                    .json(ErrorBody {
                        detail: self.to_string(),
                    })
            }
            Self::Internal(cause) => {
                tracing::error!(error = %cause, cause = ?cause.source(), "request failed");
                response.json(ErrorBody {
                    detail: self.to_string(),
                })
            }
            other => response.json(ErrorBody {
                detail: other.to_string(),
            }),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) => Self::StoreUnavailable(Box::new(error)),
            StoreError::Conflict => Self::Conflict("the resource already exists".into()),
            StoreError::Gone => Self::NotFound("not found: it was removed meanwhile".into()),
            StoreError::Failed(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<RegisterError> for ApiError {
    fn from(error: RegisterError) -> Self {
        match error {
            RegisterError::EmailTaken => Self::Conflict(error.to_string()),
            RegisterError::SsoRequired(sso_url) => Self::SsoRequired(sso_url),
            RegisterError::WeakPassword(reason) => Self::field(FieldError::invalid(
                "body",
                "password",
                format!("password {reason}"),
            )),
            RegisterError::Store(e) => e.into(),
            RegisterError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

/// An organization named at a sign-in or a refresh that does not admit the user: `403`
/// naming why (with `sso_url` where its single sign-on is the way in).
impl From<OrganizationRefused> for ApiError {
    fn from(refused: OrganizationRefused) -> Self {
        match refused {
            OrganizationRefused::SsoRequired(sso_url) => Self::OrganizationSso(sso_url),
            OrganizationRefused::NotMember
            | OrganizationRefused::AddressNotAllowed(_)
            | OrganizationRefused::MfaRequired => Self::Forbidden(refused.to_string()),
        }
    }
}

impl From<LoginError> for ApiError {
    fn from(error: LoginError) -> Self {
        match error {
            LoginError::InvalidCredentials => Self::Unauthorized(error.to_string()),
            LoginError::PasswordExpired => Self::Forbidden(error.to_string()),
            LoginError::LockedOut(locked) => Self::LockedOut(locked),
            LoginError::SsoRequired(sso_url) => Self::SsoRequired(sso_url),
            LoginError::NotAdmitted(refused) => refused.into(),
            LoginError::Store(e) => e.into(),
            LoginError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<RefreshError> for ApiError {
    fn from(error: RefreshError) -> Self {
        match error {
            RefreshError::InvalidToken | RefreshError::Idle(_) | RefreshError::TooOld(_) => {
                Self::Unauthorized(error.to_string())
            }
            RefreshError::PasswordExpired => Self::Forbidden(error.to_string()),
            RefreshError::NotAdmitted(refused) => refused.into(),
            RefreshError::Store(e) => e.into(),
            RefreshError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<ChangePasswordError> for ApiError {
    fn from(error: ChangePasswordError) -> Self {
        match error {
            ChangePasswordError::WrongPassword => Self::field(FieldError::invalid(
                "body",
                "current_password",
                error.to_string(),
            )),
            ChangePasswordError::WeakPassword(_)
            | ChangePasswordError::Unchanged
            | ChangePasswordError::Reused(_) => Self::field(FieldError::invalid(
                "body",
                "new_password",
                error.to_string(),
            )),
            ChangePasswordError::InvalidCredentials => Self::Unauthorized(error.to_string()),
            ChangePasswordError::LockedOut(locked) => Self::LockedOut(locked),
            ChangePasswordError::UserGone => Self::Unauthorized(error.to_string()),
            ChangePasswordError::Store(e) => e.into(),
            ChangePasswordError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<MfaError> for ApiError {
    fn from(error: MfaError) -> Self {
        match error {
            MfaError::NotFound => Self::NotFound(error.to_string()),
            MfaError::WrongCode => {
                Self::field(FieldError::invalid("body", "code", error.to_string()))
            }
            MfaError::WrongPassword => {
                Self::field(FieldError::invalid("body", "password", error.to_string()))
            }
            MfaError::WebauthnRefused(_) => {
                Self::field(FieldError::invalid("body", "credential", error.to_string()))
            }
            MfaError::AlreadyConfirmed
            | MfaError::RequiredByOrganization
            | MfaError::NotEnabled
            | MfaError::TooMany
            | MfaError::KeyTaken => Self::Conflict(error.to_string()),
            MfaError::LockedOut(locked) => Self::LockedOut(locked),
            MfaError::WebauthnUnavailable(detail) => Self::Unavailable(detail),
            MfaError::UserGone => Self::Unauthorized(error.to_string()),
            MfaError::Store(e) => e.into(),
            MfaError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<VerifyError> for ApiError {
    fn from(error: VerifyError) -> Self {
        match error {
            VerifyError::InvalidToken | VerifyError::WrongFactor => {
                Self::Unauthorized(error.to_string())
            }
            VerifyError::LockedOut(locked) => Self::LockedOut(locked),
            VerifyError::NotAdmitted(refused) => refused.into(),
            VerifyError::Store(e) => e.into(),
            VerifyError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<UpdateProfileError> for ApiError {
    fn from(error: UpdateProfileError) -> Self {
        match error {
            UpdateProfileError::UserGone => Self::Unauthorized(error.to_string()),
            UpdateProfileError::Store(e) => e.into(),
        }
    }
}

impl From<AuthenticateError> for ApiError {
    fn from(error: AuthenticateError) -> Self {
        match error {
            AuthenticateError::Invalid(detail) => Self::Unauthorized(detail.to_owned()),
            AuthenticateError::Store(e) => e.into(),
            AuthenticateError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<OrgAccessError> for ApiError {
    fn from(error: OrgAccessError) -> Self {
        match error {
            OrgAccessError::NotFound => Self::NotFound(error.to_string()),
            OrgAccessError::SsoRequired(sso_url) => Self::OrganizationSso(sso_url),
            OrgAccessError::AddressNotAllowed(_)
            | OrgAccessError::MfaRequired
            | OrgAccessError::NoApiScope => Self::Forbidden(error.to_string()),
            OrgAccessError::Store(e) => e.into(),
        }
    }
}

impl From<RevokeConsentError> for ApiError {
    fn from(error: RevokeConsentError) -> Self {
        match error {
            RevokeConsentError::NotFound => Self::NotFound(error.to_string()),
            RevokeConsentError::Store(e) => e.into(),
        }
    }
}

impl From<IssuedToApplication> for ApiError {
    fn from(error: IssuedToApplication) -> Self {
        Self::Forbidden(error.to_string())
    }
}

impl From<OnlyInsideOrganization> for ApiError {
    fn from(error: OnlyInsideOrganization) -> Self {
        Self::Forbidden(error.to_string())
    }
}

impl From<CreateApiKeyError> for ApiError {
    fn from(error: CreateApiKeyError) -> Self {
        match error {
            CreateApiKeyError::NotAUser => Self::Forbidden(error.to_string()),
            CreateApiKeyError::Organization(e) => e.into(),
            CreateApiKeyError::Forbidden(e) => e.into(),
            CreateApiKeyError::TooMany => Self::Unprocessable(error.to_string()),
            CreateApiKeyError::Store(e) => e.into(),
        }
    }
}

impl From<DeleteApiKeyError> for ApiError {
    fn from(error: DeleteApiKeyError) -> Self {
        match error {
            DeleteApiKeyError::NotFound => Self::NotFound(error.to_string()),
            DeleteApiKeyError::NotAUser => Self::Forbidden(error.to_string()),
            DeleteApiKeyError::Store(e) => e.into(),
        }
    }
}

impl From<Forbidden> for ApiError {
    fn from(error: Forbidden) -> Self {
        Self::Forbidden(error.to_string())
    }
}

impl From<OrganizationError> for ApiError {
    fn from(error: OrganizationError) -> Self {
        match error {
            OrganizationError::Forbidden(e) => e.into(),
            OrganizationError::NotFound => Self::NotFound(error.to_string()),
            OrganizationError::SlugTaken => Self::Conflict(error.to_string()),
            OrganizationError::PersonalWorkspace => Self::Unprocessable(error.to_string()),
            OrganizationError::Store(e) => e.into(),
        }
    }
}

impl From<IamError> for ApiError {
    fn from(error: IamError) -> Self {
        match error {
            IamError::Forbidden(e) => e.into(),
            IamError::RoleAboveYours(_) | IamError::PersonNeeded => {
                Self::Forbidden(error.to_string())
            }
            IamError::OwnerRole => {
                Self::field(FieldError::invalid("body", "role", error.to_string()))
            }
            IamError::UnknownRole(_) => {
                Self::field(FieldError::invalid("body", "role", error.to_string()))
            }
            IamError::PlanRequired => Self::Forbidden(error.to_string()),
            IamError::RoleTaken(_) | IamError::RoleHeld(_) => Self::Conflict(error.to_string()),
            IamError::NotFound(_) => Self::NotFound(error.to_string()),
            IamError::TooManyAccounts | IamError::TooManyKeys => {
                Self::Unprocessable(error.to_string())
            }
            IamError::Store(e) => e.into(),
        }
    }
}

impl From<DirectoryError> for ApiError {
    fn from(error: DirectoryError) -> Self {
        match error {
            DirectoryError::Forbidden(e) => e.into(),
            DirectoryError::Busy(e) => e.into(),
            DirectoryError::PlanRequired
            | DirectoryError::PersonNeeded
            | DirectoryError::RoleAboveYours(_) => Self::Forbidden(error.to_string()),
            DirectoryError::NotFound(_) | DirectoryError::UnknownMember(_) => {
                Self::NotFound(error.to_string())
            }
            DirectoryError::UserNameTaken(_)
            | DirectoryError::OwnerProtected
            | DirectoryError::Conflict => Self::Conflict(error.to_string()),
            DirectoryError::TooManyTokens => Self::Unprocessable(error.to_string()),
            DirectoryError::UnknownRole(_) | DirectoryError::GroupRoles(_) => {
                Self::Unprocessable(error.to_string())
            }
            DirectoryError::Store(e) => e.into(),
            DirectoryError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

/// An answer of the SCIM endpoints: SCIM's error schema (`application/scim+json`), never
/// `{detail}`.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ScimFailure(pub gatehouse_scim::ScimError);

impl ResponseError for ScimFailure {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        let mut response = HttpResponse::build(self.status_code());
        match self.0.status {
            401 => {
                response.insert_header((header::WWW_AUTHENTICATE, "Bearer"));
            }
            // The organization's heavy requests all under way; the store not answering.
            429 | 503 => {
                response.insert_header((header::RETRY_AFTER, "1"));
            }
            _ => {}
        }
        response
            .content_type(gatehouse_scim::SCIM_CONTENT_TYPE)
            .json(self.0.to_json())
    }
}

impl From<gatehouse_scim::ScimError> for ScimFailure {
    fn from(error: gatehouse_scim::ScimError) -> Self {
        Self(error)
    }
}

impl From<ApiError> for ScimFailure {
    fn from(error: ApiError) -> Self {
        use gatehouse_scim::{ScimError, ScimType};
        let status = error.status_code().as_u16();
        let detail = match &error {
            ApiError::Validation(errors) => errors
                .iter()
                .map(|e| e.msg.clone())
                .collect::<Vec<_>>()
                .join("; "),
            ApiError::StoreUnavailable(_) | ApiError::Internal(_) => {
                if let ApiError::Internal(source) = &error {
                    tracing::error!(error = %source, "SCIM request failed");
                }
                error.to_string()
            }
            _ => error.to_string(),
        };
        let scim_type = match error {
            ApiError::BadRequest(_) | ApiError::Validation(_) | ApiError::Unprocessable(_) => {
                Some(ScimType::InvalidSyntax)
            }
            _ => None,
        };
        // A 422 of the JSON layer is SCIM's 400.
        let status = if status == 422 { 400 } else { status };
        Self(ScimError::new(status, scim_type, detail))
    }
}

impl From<DirectoryError> for ScimFailure {
    fn from(error: DirectoryError) -> Self {
        use gatehouse_scim::{ScimError, ScimType};
        let detail = error.to_string();
        Self(match error {
            DirectoryError::Forbidden(_)
            | DirectoryError::PlanRequired
            | DirectoryError::PersonNeeded
            | DirectoryError::RoleAboveYours(_) => ScimError::new(403, None, detail),
            DirectoryError::NotFound(_) => ScimError::not_found(detail),
            DirectoryError::UserNameTaken(_) => ScimError::uniqueness(detail),
            DirectoryError::UnknownMember(_)
            | DirectoryError::UnknownRole(_)
            | DirectoryError::GroupRoles(_)
            | DirectoryError::TooManyTokens => ScimError::invalid_value(detail),
            DirectoryError::OwnerProtected => {
                ScimError::new(400, Some(ScimType::Mutability), detail)
            }
            DirectoryError::Conflict => ScimError::new(409, None, detail),
            DirectoryError::Busy(e) => return ApiError::from(e).into(),
            DirectoryError::Store(e) => return ApiError::from(e).into(),
            DirectoryError::Internal(_) => return ApiError::Internal(Box::new(error)).into(),
        })
    }
}

impl From<TransferError> for ApiError {
    fn from(error: TransferError) -> Self {
        match error {
            TransferError::Forbidden(e) => e.into(),
            TransferError::PersonNeeded => Self::Forbidden(error.to_string()),
            TransferError::WrongPassword => {
                Self::field(FieldError::invalid("body", "password", error.to_string()))
            }
            TransferError::LockedOut(locked) => Self::LockedOut(locked),
            TransferError::NotFound => Self::NotFound(error.to_string()),
            TransferError::PersonalWorkspace | TransferError::ToSelf => {
                Self::Unprocessable(error.to_string())
            }
            TransferError::Changed => Self::Conflict(error.to_string()),
            TransferError::Store(e) => e.into(),
            TransferError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<MemberError> for ApiError {
    fn from(error: MemberError) -> Self {
        match error {
            MemberError::Forbidden(e) => e.into(),
            MemberError::Busy(e) => e.into(),
            MemberError::UnknownRole(_) => {
                Self::field(FieldError::invalid("body", "role", error.to_string()))
            }
            MemberError::MemberInviteRole
            | MemberError::RoleAboveYours(_)
            | MemberError::NotTheInvitee
            | MemberError::NotAUser
            | MemberError::PersonNeeded => Self::Forbidden(error.to_string()),
            MemberError::OrganizationNotFound
            | MemberError::NotFound
            | MemberError::InvitationNotFound => Self::NotFound(error.to_string()),
            MemberError::Refused(_) | MemberError::Expired => {
                Self::Unprocessable(error.to_string())
            }
            MemberError::AlreadyMember(_)
            | MemberError::AlreadyInvited(_)
            | MemberError::OwnsTeams => Self::Conflict(error.to_string()),
            MemberError::Store(e) => e.into(),
            MemberError::Internal(_) => Self::Internal(Box::new(error)),
        }
    }
}

impl From<AuditLogError> for ApiError {
    fn from(error: AuditLogError) -> Self {
        match error {
            AuditLogError::Forbidden(e) => e.into(),
            AuditLogError::Busy(e) => e.into(),
            AuditLogError::Store(e) => e.into(),
        }
    }
}

impl From<ReplayError> for ApiError {
    fn from(error: ReplayError) -> Self {
        match error {
            ReplayError::TooMany | ReplayError::NothingSelected => Self::field(
                FieldError::invalid("body", "delivery_ids", error.to_string()),
            ),
            ReplayError::Store(e) => e.into(),
        }
    }
}

impl From<WebhookError> for ApiError {
    fn from(error: WebhookError) -> Self {
        match error {
            WebhookError::Forbidden(e) => e.into(),
            WebhookError::EndpointNotFound | WebhookError::DeliveryNotFound => {
                Self::NotFound(error.to_string())
            }
            WebhookError::AlreadyPending
            | WebhookError::AlreadySucceeded
            | WebhookError::NotRetryable => Self::Conflict(error.to_string()),
            WebhookError::NoEvents => {
                Self::field(FieldError::invalid("body", "events", error.to_string()))
            }
            WebhookError::PrivateTarget => {
                Self::field(FieldError::invalid("body", "url", error.to_string()))
            }
            WebhookError::TooManyEndpoints(_) => Self::Unprocessable(error.to_string()),
            WebhookError::Cipher(_) => Self::Internal(Box::new(error)),
            WebhookError::Store(e) => e.into(),
        }
    }
}

impl From<ApplicationError> for ApiError {
    fn from(error: ApplicationError) -> Self {
        match error {
            ApplicationError::Forbidden(e) => e.into(),
            ApplicationError::NotFound => Self::NotFound(error.to_string()),
            ApplicationError::Store(e) => e.into(),
        }
    }
}

impl From<DomainError> for ApiError {
    fn from(error: DomainError) -> Self {
        match error {
            DomainError::Forbidden(e) => e.into(),
            DomainError::NotFound => Self::NotFound(error.to_string()),
            DomainError::AlreadyClaimed(_)
            | DomainError::VerifiedElsewhere(_)
            | DomainError::NotProven { .. } => Self::Conflict(error.to_string()),
            DomainError::TooMany => {
                Self::field(FieldError::invalid("body", "domain", error.to_string()))
            }
            DomainError::Dns(_) => Self::Unavailable(error.to_string()),
            DomainError::Store(e) => e.into(),
        }
    }
}

impl From<SettingsError> for ApiError {
    fn from(error: SettingsError) -> Self {
        match error {
            SettingsError::Forbidden(e) => e.into(),
            SettingsError::PlanRequired { .. } => Self::Forbidden(error.to_string()),
            SettingsError::NotFound | SettingsError::NotConfigured => {
                Self::NotFound(error.to_string())
            }
            SettingsError::LockOut(_) => Self::field(FieldError::invalid(
                "body",
                "ip_allowlist.allowed_ips",
                error.to_string(),
            )),
            SettingsError::AlreadyConfigured => Self::Conflict(error.to_string()),
            SettingsError::Store(e) => e.into(),
        }
    }
}

/// Every kind of answer, in process: the status, the body and the headers a client sees for
/// each [`ApiError`], and for the domain errors whose mapping is more than a name (a field, a
/// header, a cause kept out of the body).
#[cfg(test)]
mod tests {
    use actix_web::{body::to_bytes, http::header::HeaderMap};
    use gatehouse_domain::ports::BoxError;
    use serde_json::{json, Value};
    use time::Duration;

    use super::*;
    use gatehouse_domain::service::MemberRule;

    /// What a client receives for `error`: status, headers, JSON body.
    async fn answer(error: impl ResponseError) -> (u16, HeaderMap, Value) {
        let response = error.error_response();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = to_bytes(response.into_body())
            .await
            .unwrap_or_else(|_| panic!("the body of a {status} is readable"));
        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
        (status, headers, body)
    }

    fn header(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
        headers.get(name).and_then(|value| value.to_str().ok())
    }

    fn cause(words: &str) -> BoxError {
        words.to_owned().into()
    }

    #[tokio::test]
    async fn each_error_has_its_status_and_a_detail_in_words() {
        let cases: Vec<(ApiError, u16, &str)> = vec![
            (
                ApiError::BadRequest("body must be a JSON object".into()),
                400,
                "body must be a JSON object",
            ),
            (
                ApiError::Forbidden("missing permission".into()),
                403,
                "missing permission",
            ),
            (
                ApiError::NotFound("organization not found".into()),
                404,
                "organization not found",
            ),
            (
                ApiError::Conflict("slug is taken".into()),
                409,
                "slug is taken",
            ),
            (
                ApiError::Unprocessable("at most 10 endpoints".into()),
                422,
                "at most 10 endpoints",
            ),
            (
                ApiError::PayloadTooLarge(1024),
                413,
                "request body is larger than 1024 bytes",
            ),
            (
                ApiError::BodyTimeout(30),
                408,
                "the request body did not arrive within 30 s",
            ),
            (
                ApiError::UnsupportedMediaType("send application/json".into()),
                415,
                "send application/json",
            ),
            (
                ApiError::Unavailable("set GATEHOUSE_SMTP_URL".into()),
                503,
                "set GATEHOUSE_SMTP_URL",
            ),
        ];
        for (error, status, detail) in cases {
            let (got, headers, body) = answer(error).await;
            assert_eq!((got, body), (status, json!({ "detail": detail })));
            assert_eq!(header(&headers, header::RETRY_AFTER), None, "{status}");
            assert_eq!(header(&headers, header::WWW_AUTHENTICATE), None, "{status}");
        }
    }

    #[tokio::test]
    async fn a_refused_credential_asks_for_a_bearer_token() {
        let (status, headers, body) = answer(ApiError::Unauthorized("token expired".into())).await;
        assert_eq!((status, body), (401, json!({ "detail": "token expired" })));
        assert_eq!(header(&headers, header::WWW_AUTHENTICATE), Some("Bearer"));
    }

    #[tokio::test]
    async fn a_validation_error_lists_each_field_with_where_what_and_which_kind() {
        let error = ApiError::Validation(vec![
            FieldError::missing("body", "email"),
            FieldError::invalid("body", "ip_allowlist.allowed_ips.2", "not an address"),
        ]);
        let (status, _, body) = answer(error).await;
        assert_eq!(status, 422);
        assert_eq!(
            body,
            json!({ "detail": [
                { "loc": ["body", "email"], "msg": "field required", "type": "missing" },
                { "loc": ["body", "ip_allowlist", "allowed_ips", 2], "msg": "not an address", "type": "value_error" },
            ] })
        );
    }

    #[tokio::test]
    async fn waits_say_how_long_in_retry_after() {
        let locked = LockedOut {
            retry_after: Duration::milliseconds(1_500),
        };
        let (status, headers, body) = answer(ApiError::LockedOut(locked)).await;
        assert_eq!(status, 429);
        assert_eq!(header(&headers, header::RETRY_AFTER), Some("2"));
        assert!(body["detail"].is_string());

        let (status, headers, body) = answer(ApiError::Busy(Busy)).await;
        assert_eq!((status, body), (429, json!({ "detail": Busy.to_string() })));
        assert_eq!(header(&headers, header::RETRY_AFTER), Some("1"));
    }

    #[tokio::test]
    async fn single_sign_on_refusals_say_where_to_sign_in() {
        let url = "https://id.example.com/sso/saml/0190b3a4-0000-7000-8000-000000000001/login";
        let (status, _, body) = answer(ApiError::SsoRequired(url.into())).await;
        assert_eq!(
            (status, body),
            (403, json!({ "detail": SSO_REQUIRED, "sso_url": url }))
        );
        let refused = LoginError::NotAdmitted(OrganizationRefused::SsoRequired(url.into()));
        let (status, _, body) = answer(ApiError::from(refused)).await;
        assert_eq!(
            (status, body),
            (
                403,
                json!({ "detail": "organization requires single sign-on", "sso_url": url })
            )
        );
    }

    #[tokio::test]
    async fn a_server_side_failure_keeps_its_cause_out_of_the_body() {
        let secret = "password authentication failed for user gatehouse at 10.0.0.7";
        let (status, headers, body) =
            answer(ApiError::from(StoreError::Unavailable(cause(secret)))).await;
        assert_eq!(
            (status, body),
            (
                503,
                json!({ "detail": "the service is temporarily unavailable" })
            )
        );
        assert_eq!(header(&headers, header::RETRY_AFTER), Some("1"));

        for internal in [
            ApiError::from(StoreError::Failed(cause(secret))),
            ApiError::from(LoginError::Internal(cause(secret))),
        ] {
            let (status, _, body) = answer(internal).await;
            assert_eq!((status, body), (500, json!({ "detail": "internal error" })));
        }
    }

    #[tokio::test]
    async fn the_stores_refusals_become_conflict_and_not_found() {
        let (status, _, body) = answer(ApiError::from(StoreError::Conflict)).await;
        assert_eq!(
            (status, body),
            (409, json!({ "detail": "the resource already exists" }))
        );
        let (status, _, body) = answer(ApiError::from(StoreError::Gone)).await;
        assert_eq!(
            (status, body),
            (
                404,
                json!({ "detail": "not found: it was removed meanwhile" })
            )
        );
    }

    #[tokio::test]
    async fn a_rule_about_one_field_names_that_field() {
        let cases: Vec<(ApiError, Value)> = vec![
            (
                ChangePasswordError::WrongPassword.into(),
                json!(["body", "current_password"]),
            ),
            (IamError::OwnerRole.into(), json!(["body", "role"])),
            (MfaError::WrongCode.into(), json!(["body", "code"])),
            (ReplayError::TooMany.into(), json!(["body", "delivery_ids"])),
            (WebhookError::PrivateTarget.into(), json!(["body", "url"])),
        ];
        for (error, loc) in cases {
            let (status, _, body) = answer(error).await;
            assert_eq!(status, 422, "{loc}");
            assert_eq!(body["detail"][0]["loc"], loc);
            assert_eq!(body["detail"][0]["type"], "value_error", "{loc}");
        }
    }

    #[tokio::test]
    async fn the_sign_in_refusals_each_have_their_status() {
        let cases: Vec<(ApiError, u16)> = vec![
            (LoginError::InvalidCredentials.into(), 401),
            (LoginError::PasswordExpired.into(), 403),
            (
                LoginError::NotAdmitted(OrganizationRefused::NotMember).into(),
                403,
            ),
            (
                LoginError::NotAdmitted(OrganizationRefused::MfaRequired).into(),
                403,
            ),
            (RefreshError::InvalidToken.into(), 401),
            (MemberError::Busy(Busy).into(), 429),
            (MemberError::OwnsTeams.into(), 409),
            (MemberError::Refused(MemberRule::OwnerStays).into(), 422),
            (TransferError::ToSelf.into(), 422),
            (OrganizationError::PersonalWorkspace.into(), 422),
            (WebhookError::AlreadySucceeded.into(), 409),
        ];
        for (error, status) in cases {
            let detail = error.to_string();
            let (got, _, body) = answer(error).await;
            assert_eq!((got, body), (status, json!({ "detail": detail })));
        }
    }

    #[tokio::test]
    async fn scim_answers_in_its_own_error_schema() {
        let (status, headers, body) = answer(ScimFailure::from(ApiError::field(
            FieldError::missing("body", "userName"),
        )))
        .await;
        assert_eq!(status, 400);
        assert_eq!(
            header(&headers, header::CONTENT_TYPE),
            Some(gatehouse_scim::SCIM_CONTENT_TYPE)
        );
        assert_eq!(body["scimType"], "invalidSyntax");
        assert_eq!(body["status"], "400");
        assert_eq!(body["detail"], "field required");

        let (status, headers, body) = answer(ScimFailure::from(ApiError::from(
            StoreError::Unavailable(cause("down")),
        )))
        .await;
        assert_eq!((status, body["status"].clone()), (503, json!("503")));
        assert_eq!(header(&headers, header::RETRY_AFTER), Some("1"));
    }
}
