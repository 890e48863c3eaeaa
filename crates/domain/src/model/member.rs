use time::{Duration, OffsetDateTime};

use super::{
    Email, FullName, InvitationId, OrganizationId, OrganizationName, Role, Slug, TokenHash, UserId,
};

/// Whether a member has joined or is still invited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberStatus {
    Active,
    Pending,
}

impl MemberStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Pending => "pending",
        }
    }
}

/// A member as the members list shows it: an active membership, or a pending invitation
/// (then without user id and name).
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    pub organization_id: OrganizationId,
    pub user_id: Option<UserId>,
    pub email: Email,
    pub full_name: Option<FullName>,
    pub role: Role,
    pub status: MemberStatus,
    pub invitation_id: Option<InvitationId>,
    pub invited_at: Option<OffsetDateTime>,
    pub invited_by: Option<UserId>,
    pub accepted_at: Option<OffsetDateTime>,
    pub joined_at: OffsetDateTime,
}

/// Filters of the members list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberFilter {
    pub role: Option<Role>,
    /// Case-insensitive substring of the name or email.
    pub search: Option<String>,
    /// Only active members (the IAM users list).
    pub active_only: bool,
}

/// The role an invitation may offer: never `owner`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvitableRole(Role);

impl InvitableRole {
    pub fn new(role: Role) -> Option<Self> {
        (role != Role::Owner).then_some(Self(role))
    }

    pub const fn role(self) -> Role {
        self.0
    }
}

/// How long an invitation can be accepted.
pub const INVITATION_TTL_DAYS: i64 = 7;

/// An invitation about to be stored; its token is known only by its hash.
#[derive(Clone, Debug, PartialEq)]
pub struct NewInvitation {
    pub id: InvitationId,
    pub organization_id: OrganizationId,
    pub email: Email,
    pub role: InvitableRole,
    pub token_hash: TokenHash,
    pub invited_by: UserId,
    pub invited_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

impl NewInvitation {
    pub fn expiry(invited_at: OffsetDateTime) -> OffsetDateTime {
        invited_at + Duration::days(INVITATION_TTL_DAYS)
    }
}

/// A pending invitation (not accepted, not revoked; maybe expired), with what the invitee needs
/// to decide.
#[derive(Clone, Debug, PartialEq)]
pub struct Invitation {
    pub id: InvitationId,
    pub organization_id: OrganizationId,
    pub organization_name: OrganizationName,
    pub organization_slug: Slug,
    pub email: Email,
    pub role: Role,
    pub invited_by: UserId,
    pub invited_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
}

impl Invitation {
    pub fn is_expired(&self, now: OffsetDateTime) -> bool {
        now >= self.expires_at
    }
}
