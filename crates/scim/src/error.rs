//! SCIM's error response (RFC 7644 §3.12).

use serde_json::{json, Value};

use crate::ERROR_SCHEMA;

/// The `scimType` of a `400` (or `409`) error, the detail RFC 7644 §3.12 (table 9) defines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScimType {
    /// The filter syntax is invalid, or an attribute or operator is not supported.
    InvalidFilter,
    /// The filter yields more results than the server is willing to process.
    TooMany,
    /// A value is not unique (`userName`, a group's `displayName`): status `409`.
    Uniqueness,
    /// The attempted change is incompatible with the attribute's mutability.
    Mutability,
    /// The request body is not a valid SCIM message (not an object, no `Operations`, an
    /// unknown `op`, ...).
    InvalidSyntax,
    /// A `PATCH` path is invalid or malformed.
    InvalidPath,
    /// A `PATCH` path's filter matched nothing to operate on.
    NoTarget,
    /// A required value is missing, or a value is not compatible with the attribute.
    InvalidValue,
    /// The requested protocol version is not supported.
    InvalidVers,
    /// The request holds personal information that may not be in a URL.
    Sensitive,
}

impl ScimType {
    /// The value as SCIM writes it (`invalidFilter`, `noTarget`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidFilter => "invalidFilter",
            Self::TooMany => "tooMany",
            Self::Uniqueness => "uniqueness",
            Self::Mutability => "mutability",
            Self::InvalidSyntax => "invalidSyntax",
            Self::InvalidPath => "invalidPath",
            Self::NoTarget => "noTarget",
            Self::InvalidValue => "invalidValue",
            Self::InvalidVers => "invalidVers",
            Self::Sensitive => "sensitive",
        }
    }
}

/// An error in SCIM's error schema: the HTTP status to answer with, the `scimType` where one
/// applies, and a human-readable detail.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{status} {detail}")]
pub struct ScimError {
    /// The HTTP status (`400`, `404`, `409`, ...).
    pub status: u16,
    /// The detail of a `400` or `409`.
    pub scim_type: Option<ScimType>,
    /// What went wrong, for a person.
    pub detail: String,
}

impl ScimError {
    /// An error with this status, `scimType` and detail.
    pub fn new(status: u16, scim_type: Option<ScimType>, detail: impl Into<String>) -> Self {
        Self {
            status,
            scim_type,
            detail: detail.into(),
        }
    }

    fn bad_request(scim_type: ScimType, detail: impl Into<String>) -> Self {
        Self::new(400, Some(scim_type), detail)
    }

    /// `400 invalidValue`: a missing required value, or a value of the wrong type or refused
    /// by the directory's rules.
    pub fn invalid_value(detail: impl Into<String>) -> Self {
        Self::bad_request(ScimType::InvalidValue, detail)
    }

    /// `400 invalidSyntax`: the body is not a valid SCIM message.
    pub fn invalid_syntax(detail: impl Into<String>) -> Self {
        Self::bad_request(ScimType::InvalidSyntax, detail)
    }

    /// `400 invalidFilter`: a filter that does not parse.
    pub fn invalid_filter(detail: impl Into<String>) -> Self {
        Self::bad_request(ScimType::InvalidFilter, detail)
    }

    /// `400 invalidPath`: a malformed `PATCH` path.
    pub fn invalid_path(detail: impl Into<String>) -> Self {
        Self::bad_request(ScimType::InvalidPath, detail)
    }

    /// `400 noTarget`: a `PATCH` path that selects nothing to operate on.
    pub fn no_target(detail: impl Into<String>) -> Self {
        Self::bad_request(ScimType::NoTarget, detail)
    }

    /// `400 mutability`: a change to an attribute that cannot change.
    pub fn mutability(detail: impl Into<String>) -> Self {
        Self::bad_request(ScimType::Mutability, detail)
    }

    /// `400 tooMany`: more results than the server processes.
    pub fn too_many(detail: impl Into<String>) -> Self {
        Self::bad_request(ScimType::TooMany, detail)
    }

    /// `409 uniqueness`: the value is already taken (a `userName`, a group's `displayName`).
    pub fn uniqueness(detail: impl Into<String>) -> Self {
        Self::new(409, Some(ScimType::Uniqueness), detail)
    }

    /// `404`: no such resource (no `scimType`).
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(404, None, detail)
    }

    /// `501`: an operation Gatehouse does not implement (`/Bulk`, `/Me`), no `scimType`.
    pub fn not_implemented(detail: impl Into<String>) -> Self {
        Self::new(501, None, detail)
    }

    /// The error response body: `{"schemas": [ERROR_SCHEMA], "status": "400", "scimType":
    /// "invalidValue", "detail": "..."}`. `status` is a string, as RFC 7644 §3.12 writes it;
    /// `scimType` is left out where there is none.
    pub fn to_json(&self) -> Value {
        let mut body = json!({
            "schemas": [ERROR_SCHEMA],
            "status": self.status.to_string(),
            "detail": self.detail,
        });
        if let (Some(scim_type), Some(object)) = (self.scim_type, body.as_object_mut()) {
            object.insert("scimType".into(), scim_type.as_str().into());
        }
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_body_has_the_status_as_a_string() {
        let error = ScimError::invalid_value("userName is required");
        assert_eq!(error.status, 400);
        assert_eq!(
            error.to_json(),
            json!({
                "schemas": ["urn:ietf:params:scim:api:messages:2.0:Error"],
                "status": "400",
                "scimType": "invalidValue",
                "detail": "userName is required",
            })
        );
    }

    #[test]
    fn a_not_found_has_no_scim_type_and_a_conflict_is_409() {
        assert_eq!(
            ScimError::not_found("no such user").to_json(),
            json!({
                "schemas": [ERROR_SCHEMA],
                "status": "404",
                "detail": "no such user",
            })
        );
        let taken = ScimError::uniqueness("userName is taken");
        assert_eq!(taken.status, 409);
        assert_eq!(taken.to_json()["scimType"], "uniqueness");
    }

    #[test]
    fn each_scim_type_is_written_in_camel_case() {
        let all = [
            (ScimType::InvalidFilter, "invalidFilter"),
            (ScimType::TooMany, "tooMany"),
            (ScimType::Uniqueness, "uniqueness"),
            (ScimType::Mutability, "mutability"),
            (ScimType::InvalidSyntax, "invalidSyntax"),
            (ScimType::InvalidPath, "invalidPath"),
            (ScimType::NoTarget, "noTarget"),
            (ScimType::InvalidValue, "invalidValue"),
            (ScimType::InvalidVers, "invalidVers"),
            (ScimType::Sensitive, "sensitive"),
        ];
        for (scim_type, text) in all {
            assert_eq!(scim_type.as_str(), text);
        }
        assert_eq!(
            ScimError::no_target("x").scim_type,
            Some(ScimType::NoTarget)
        );
        assert_eq!(
            ScimError::invalid_path("x").scim_type,
            Some(ScimType::InvalidPath)
        );
        assert_eq!(ScimError::too_many("x").status, 400);
        assert_eq!(ScimError::not_implemented("x").status, 501);
    }
}
