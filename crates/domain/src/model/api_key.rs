use serde::Serialize;
use time::OffsetDateTime;

use super::{
    text::{parse_text, str_ref, TextError},
    ApiKeyId, OrganizationId, ServiceAccountId, TokenHash, UserId,
};

/// A label for an API key: 1 to 100 characters once trimmed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct ApiKeyName(String);

impl ApiKeyName {
    /// A label as given, trimmed.
    ///
    /// # Errors
    /// Why, completing "`name` ...", when it is empty once trimmed, longer than 100
    /// characters, or holds a control character or a bidirectional or zero-width control. Kept
    /// trimmed and composed (NFC).
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 1, 100, false).map(Self)
    }
}

str_ref!(ApiKeyName);

/// The most API keys one user (or one service account) holds in one organization: creating one
/// more is refused.
pub const MAX_API_KEYS_PER_ORGANIZATION: u32 = 50;

/// Whom an API key acts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyHolder {
    /// The user who created it: the key acts as them, with their role, and goes when they leave
    /// the organization.
    User(UserId),
    /// A service account of the organization: the key acts as it, with its role, whoever made
    /// it, and goes when the account is deleted.
    ServiceAccount(ServiceAccountId),
}

impl KeyHolder {
    /// The user, for a user's key.
    pub const fn user_id(self) -> Option<UserId> {
        match self {
            Self::User(user_id) => Some(user_id),
            Self::ServiceAccount(_) => None,
        }
    }

    /// The service account, for a service account's key.
    pub const fn service_account_id(self) -> Option<ServiceAccountId> {
        match self {
            Self::User(_) => None,
            Self::ServiceAccount(id) => Some(id),
        }
    }
}

/// An API key about to be stored: the secret itself is gone, only its hash remains.
#[derive(Clone, Debug, PartialEq)]
pub struct NewApiKey {
    /// The key's id.
    pub id: ApiKeyId,
    /// Its label.
    pub name: ApiKeyName,
    /// The secret's first characters ([`SecretToken::display_prefix`]), shown in lists to tell
    /// keys apart.
    ///
    /// [`SecretToken::display_prefix`]: super::SecretToken::display_prefix
    pub prefix: String,
    /// The hash of the secret, which requests are authenticated by.
    pub key_hash: TokenHash,
    /// The one organization the key acts in.
    pub organization_id: OrganizationId,
    /// Whom it acts as: the member who created it, or a service account of that organization.
    pub holder: KeyHolder,
    /// When it was created.
    pub created_at: OffsetDateTime,
}

/// An API key as listed (never with its secret).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApiKey {
    /// The key's id.
    pub id: ApiKeyId,
    /// Its label.
    pub name: ApiKeyName,
    /// The secret's first characters, to tell keys apart.
    pub prefix: String,
    /// The one organization the key acts in.
    pub organization_id: OrganizationId,
    /// Whom it acts as (not serialised).
    #[serde(skip)]
    pub holder: KeyHolder,
    /// When it was created.
    #[serde(with = "crate::model::timestamp")]
    pub created_at: OffsetDateTime,
    /// When it was last used, to within a minute; `None` if never.
    #[serde(with = "crate::model::timestamp::option")]
    pub last_used_at: Option<OffsetDateTime>,
}
