//! Service accounts: an organization's non-human members. One has a name and a role (never
//! `owner`), never signs in, and acts through its API keys, which outlive whoever made them.

use time::OffsetDateTime;

use super::{
    text::{parse_text, str_ref, TextError},
    AssignedRole, OrganizationId, ServiceAccountId, UserId,
};

/// The most service accounts one organization holds: creating one more is refused.
pub const MAX_SERVICE_ACCOUNTS: u32 = 100;

/// A service account's name: 1 to 100 characters once trimmed (`CI deploys`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceAccountName(String);

impl ServiceAccountName {
    /// A name as given, trimmed and composed (NFC).
    ///
    /// # Errors
    /// Why, completing "`name` ...", when it is empty once trimmed, longer than 100
    /// characters, or holds a control character or a bidirectional or zero-width control.
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 1, 100, false).map(Self)
    }
}

str_ref!(ServiceAccountName);

/// A service account of an organization.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceAccount {
    /// Its id.
    pub id: ServiceAccountId,
    /// The one organization it acts in.
    pub organization_id: OrganizationId,
    /// Its name.
    pub name: ServiceAccountName,
    /// What it may do there: a built-in role (never `owner`) or a custom role.
    pub role: AssignedRole,
    /// The member who created it (kept as a record: the account outlives them).
    pub created_by: UserId,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When its name or role last changed.
    pub updated_at: OffsetDateTime,
}
