//! An organization's members: a user's membership, the members list (who joined and who is
//! invited), and invitations, from sending to what became of them.

use time::{Duration, OffsetDateTime};

use super::{
    AssignedRole, Email, FullName, InvitationId, OrganizationId, OrganizationName, Plan, Role,
    RoleRef, SearchTerm, Slug, TokenHash, UserId,
};

/// A user's active membership in a live organization.
#[derive(Clone, Debug, PartialEq)]
pub struct Membership {
    /// The organization the user belongs to.
    pub organization_id: OrganizationId,
    /// The user who belongs to it.
    pub user_id: UserId,
    /// The member's role there, which decides their permissions.
    pub role: AssignedRole,
    /// The organization's plan, which decides its features.
    pub plan: Plan,
    /// When the user joined (what an MFA requirement's grace period counts from, at the
    /// latest).
    pub joined_at: OffsetDateTime,
}

/// Whether a member has joined or is still invited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberStatus {
    /// The member has joined: a membership.
    Active,
    /// The member is invited and has not accepted yet.
    Pending,
}

impl MemberStatus {
    /// The status's lowercase name, as the API writes it.
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
    /// The organization the member belongs to, or is invited to.
    pub organization_id: OrganizationId,
    /// The member's user; `None` for a pending invitation.
    pub user_id: Option<UserId>,
    /// The user's address, or the address invited.
    pub email: Email,
    /// The user's name; `None` for a pending invitation.
    pub full_name: Option<FullName>,
    /// The role held, or the one the invitation offers.
    pub role: AssignedRole,
    /// Whether the member has joined or is still invited.
    pub status: MemberStatus,
    /// The pending invitation's id; `None` for an active member.
    pub invitation_id: Option<InvitationId>,
    /// When the member was invited; `None` for one who joined without an invitation (such as
    /// the organization's creator).
    pub invited_at: Option<OffsetDateTime>,
    /// Who invited the member; `None` for one who joined without an invitation.
    pub invited_by: Option<UserId>,
    /// When the member joined; `None` while the invitation is pending.
    pub accepted_at: Option<OffsetDateTime>,
    /// When the member joined or, for a pending invitation, when it was sent: what the list
    /// sorts by.
    pub joined_at: OffsetDateTime,
}

/// Filters of the members list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberFilter {
    /// Only members holding, or invited with, this role (a built-in one's name or a custom
    /// one's key); `None` for any role.
    pub role: Option<RoleRef>,
    /// Case-insensitive substring of the name or email.
    pub search: Option<SearchTerm>,
    /// Only active members (the IAM users list).
    pub active_only: bool,
}

/// A role that may be given to a member, an invitee or a service account: never `owner` (an
/// organization has one, and it moves only by a transfer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvitableRole(AssignedRole);

impl InvitableRole {
    /// The role, or `None` when it is [`Role::Owner`].
    pub fn new(role: impl Into<AssignedRole>) -> Option<Self> {
        let role = role.into();
        (!role.is(Role::Owner)).then_some(Self(role))
    }

    /// The role offered.
    pub fn role(&self) -> &AssignedRole {
        &self.0
    }

    /// The role offered, owned.
    pub fn into_role(self) -> AssignedRole {
        self.0
    }
}

/// How long an invitation can be accepted.
pub const INVITATION_TTL_DAYS: i64 = 7;

/// An invitation about to be stored; its token is known only by its hash.
#[derive(Clone, Debug, PartialEq)]
pub struct NewInvitation {
    /// The invitation's id.
    pub id: InvitationId,
    /// The organization the invitee is asked to join.
    pub organization_id: OrganizationId,
    /// The address invited; only the user with this address may accept.
    pub email: Email,
    /// The role the invitee gets on accepting.
    pub role: InvitableRole,
    /// The hash of the one-time token the invitation link carries.
    pub token_hash: TokenHash,
    /// The member who sent the invitation.
    pub invited_by: UserId,
    /// When the invitation was sent.
    pub invited_at: OffsetDateTime,
    /// When it can no longer be accepted: [`NewInvitation::expiry`] of `invited_at`.
    pub expires_at: OffsetDateTime,
    /// What becomes of an invitation of the same address still open in the organization.
    pub open: OpenInvitation,
}

/// The one rule for open invitations: an organization has at most one open invitation per
/// address. Sending one closes an expired one whoever sends it; a live one is [`Kept`] or
/// [`Replaced`] by who sends the new one.
///
/// [`Kept`]: OpenInvitation::Kept
/// [`Replaced`]: OpenInvitation::Replaced
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenInvitation {
    /// A live one stays and the new one is refused (`409`, already invited): a person who
    /// invites learns that someone did already.
    Kept,
    /// A live one is revoked, its mailed link with it: the organization's directory speaks for
    /// the address, so its invitation is the one that holds.
    Replaced,
}

impl NewInvitation {
    /// When an invitation sent at `invited_at` expires: [`INVITATION_TTL_DAYS`] days later.
    pub fn expiry(invited_at: OffsetDateTime) -> OffsetDateTime {
        invited_at + Duration::days(INVITATION_TTL_DAYS)
    }
}

/// A pending invitation (not accepted, not revoked; maybe expired), with what the invitee needs
/// to decide.
#[derive(Clone, Debug, PartialEq)]
pub struct Invitation {
    /// The invitation's id.
    pub id: InvitationId,
    /// The organization the invitee is asked to join.
    pub organization_id: OrganizationId,
    /// The organization's name, to show the invitee.
    pub organization_name: OrganizationName,
    /// The organization's slug, to show the invitee.
    pub organization_slug: Slug,
    /// The address invited; only the user with this address may accept.
    pub email: Email,
    /// The role the invitee gets on accepting: an [`InvitableRole`] when created, so not
    /// [`Role::Owner`].
    pub role: AssignedRole,
    /// The member who sent the invitation.
    pub invited_by: UserId,
    /// When the invitation was sent.
    pub invited_at: OffsetDateTime,
    /// When it can no longer be accepted.
    pub expires_at: OffsetDateTime,
}

impl Invitation {
    /// Whether the invitation can no longer be accepted at `now`: from `expires_at` on.
    pub fn is_expired(&self, now: OffsetDateTime) -> bool {
        now >= self.expires_at
    }
}

/// What became of an invitation, as the page of its mailed link tells the invitee.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvitationState {
    /// It can be accepted.
    Pending,
    /// Its seven days have passed.
    Expired,
    /// An owner or admin withdrew it.
    Revoked,
    /// It was accepted: its link has been used.
    Accepted,
}

/// An invitation found by the token of its mailed link, whatever became of it, in an
/// organization that still exists.
#[derive(Clone, Debug, PartialEq)]
pub struct InvitationRecord {
    /// The invitation, as the invitee sees it.
    pub invitation: Invitation,
    /// When it was accepted.
    pub accepted_at: Option<OffsetDateTime>,
    /// When it was revoked.
    pub revoked_at: Option<OffsetDateTime>,
    /// The organization's plan: whether its branding dresses the page.
    pub plan: Plan,
}

impl InvitationRecord {
    /// What became of it by `now`: used or withdrawn before anything else, then expired.
    pub fn state(&self, now: OffsetDateTime) -> InvitationState {
        if self.accepted_at.is_some() {
            InvitationState::Accepted
        } else if self.revoked_at.is_some() {
            InvitationState::Revoked
        } else if self.invitation.is_expired(now) {
            InvitationState::Expired
        } else {
            InvitationState::Pending
        }
    }
}
