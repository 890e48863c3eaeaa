use serde::Serialize;
use time::OffsetDateTime;

use super::{ApiKeyId, OrganizationId, TokenHash, UserId};

/// A label for an API key: 1 to 100 characters once trimmed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ApiKeyName(String);

impl ApiKeyName {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let trimmed = raw.trim();
        if trimmed.is_empty() {
            return Err("must not be empty");
        }
        if trimmed.chars().count() > 100 {
            return Err("must be at most 100 characters");
        }
        if trimmed.chars().any(char::is_control) {
            return Err("must not contain control characters");
        }
        Ok(Self(trimmed.to_owned()))
    }
}

impl AsRef<str> for ApiKeyName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// An API key about to be stored: the secret itself is gone, only its hash remains.
#[derive(Clone, Debug, PartialEq)]
pub struct NewApiKey {
    pub id: ApiKeyId,
    pub name: ApiKeyName,
    pub prefix: String,
    pub key_hash: TokenHash,
    pub organization_id: OrganizationId,
    pub user_id: UserId,
    pub created_at: OffsetDateTime,
}

/// An API key as listed (never with its secret).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub name: ApiKeyName,
    pub prefix: String,
    pub organization_id: OrganizationId,
    #[serde(skip)]
    pub user_id: UserId,
    #[serde(with = "crate::model::timestamp")]
    pub created_at: OffsetDateTime,
    #[serde(with = "crate::model::timestamp::option")]
    pub last_used_at: Option<OffsetDateTime>,
}
