//! Organizations, memberships, members and invitations, and the Business plan's policies and
//! branding.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{ScimTokenRevocation, SealedMail, StoreError};
use crate::model::{
    AssignedRole, AuditRecord, Branding, Email, Invitation, InvitationId, InvitationRecord, Member,
    MemberFilter, Membership, NewEvent, NewInvitation, NewOrganization, Organization,
    OrganizationChange, OrganizationFilter, OrganizationId, OrganizationPolicies, Page,
    PageRequest, Plan, SessionId, Slug, TokenHash, UserId,
};

/// A user's membership of an active organization and the organization's saved policies (`None`
/// when it never saved any; whether they bind is the plan's to say), read together.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberAccess {
    /// The membership, with the organization's plan.
    pub membership: Membership,
    /// The organization's saved policies.
    pub policies: Option<SavedPolicies>,
}

/// What admitting a signed-in user to an organization needs, read together: whether their
/// session is live, their membership, and the organization's saved policies.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SessionAccess {
    /// The session is neither revoked nor expired.
    pub session_live: bool,
    /// The user's membership, when they are a member of the live organization.
    pub membership: Option<Membership>,
    /// The organization's saved policies (read only for a member; whether they bind is the
    /// plan's to say).
    pub policies: Option<SavedPolicies>,
    /// The organization whose identity provider signed the session in (SAML), read only for a
    /// member: the one organization for which the session's `ext` counts as a second factor.
    pub sso_organization: Option<OrganizationId>,
    /// The user's address, read only for a member of an organization whose single sign-on
    /// configuration is active: whether that configuration claims the address is
    /// [`Realms`](crate::service)'s to say. `None` where nothing of single sign-on can bar
    /// the session, which spares every other organization the question.
    pub sso_email: Option<Email>,
}

/// Who belongs where, with which role.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait MembershipStore: Send + Sync + 'static {
    /// The user's active membership in the organization, when the organization is live.
    async fn membership(
        &self,
        user_id: UserId,
        organization_id: OrganizationId,
    ) -> Result<Option<Membership>, StoreError>;

    /// The highest plan among the user's live organizations (what sizes the rate limit of a
    /// request made outside any organization).
    async fn highest_plan(&self, user_id: UserId) -> Result<Option<Plan>, StoreError>;

    /// [`SessionAccess`] of the user with this session in the organization at `now`, in one
    /// store round trip (one statement when they are a member): what every request a signed-in
    /// user makes inside an organization reads first.
    async fn session_access(
        &self,
        session_id: SessionId,
        user_id: UserId,
        organization_id: OrganizationId,
        now: OffsetDateTime,
    ) -> Result<SessionAccess, StoreError>;
}

/// Organizations.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait OrganizationStore: Send + Sync + 'static {
    /// The first of `base`'s candidates (`base`, `base-2`, ...) that no organization uses.
    async fn first_free_slug(&self, base: &Slug) -> Result<Slug, StoreError>;

    /// Creates the organization with `owner` as its owner, and records the events and the audit
    /// record. With `slug_generated`, the slug is a base: the organization gets its first free
    /// candidate (`base`, `base-2`, ...), the next one when a concurrent creation takes it, and
    /// that slug goes into the events' data. Returns the slug the organization got.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a slug that was not generated is taken.
    async fn create_organization(
        &self,
        organization: NewOrganization,
        owner: UserId,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<Slug, StoreError>;

    /// The live organizations the user is an active member of, filtered, newest first.
    async fn organizations_of(
        &self,
        user_id: UserId,
        filter: OrganizationFilter,
        page: PageRequest,
    ) -> Result<Page<Organization>, StoreError>;

    /// A live organization, with its counts.
    async fn organization(&self, id: OrganizationId) -> Result<Option<Organization>, StoreError>;

    /// Saves the changed fields and records the event. Returns false when the organization is
    /// not live.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the new slug is taken.
    async fn update_organization(
        &self,
        id: OrganizationId,
        change: OrganizationChange,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Soft-deletes: `is_active = false`, `deleted_at = at`. Its members lose access at once.
    /// Returns false when it was not live.
    async fn delete_organization(
        &self,
        id: OrganizationId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// One slice of the purge of organizations soft-deleted before `deleted_before`, in one
    /// transaction: of the one deleted longest ago, at most `limit` rows of what can grow with
    /// its use (its webhook deliveries, its directory's users and groups, its memberships),
    /// and, when none of those are left, the organization itself with the rest of what belongs
    /// to it (its settings, keys, invitations, endpoints: bounded by its plan). A purge runs
    /// slices until one deletes nothing, so that no transaction holds the store for long,
    /// however large the organization was.
    async fn purge_organizations(
        &self,
        deleted_before: OffsetDateTime,
        limit: u32,
    ) -> Result<PurgedOrganizations, StoreError>;

    /// Sets the plan of a live organization and records the event. Returns false when it is not
    /// live.
    async fn set_plan(
        &self,
        id: OrganizationId,
        plan: Plan,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;
}

/// An organization's saved policies and when they were saved.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedPolicies {
    /// The policies as saved, before the plan decides which of them apply.
    pub policies: OrganizationPolicies,
    /// When they were last saved.
    pub updated_at: OffsetDateTime,
    /// Since when `mfa_policy.required` has been on (the save that turned it on); `None` while
    /// it is off. A member's grace period counts from here, or from when they joined.
    pub mfa_required_since: Option<OffsetDateTime>,
}

/// An organization's plan and its saved policies (`None` when it never saved any): what
/// [`crate::model::EffectivePolicies::of`] folds.
pub type PlanPolicies = (Plan, Option<OrganizationPolicies>);

/// Organization policies.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait PolicyStore: Send + Sync + 'static {
    /// The organization's saved policies, `None` when it never saved any.
    async fn policies(&self, id: OrganizationId) -> Result<Option<SavedPolicies>, StoreError>;

    /// Replaces the policies of a live organization (with since when MFA has been required)
    /// and records the event. Returns false when the organization is not live.
    async fn save_policies(
        &self,
        id: OrganizationId,
        policies: OrganizationPolicies,
        mfa_required_since: Option<OffsetDateTime>,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The plans and policies of the live organizations the user is an active member of.
    async fn policies_of_member(&self, user_id: UserId) -> Result<Vec<PlanPolicies>, StoreError>;

    /// The plans and policies of the live organizations holding a pending invitation for the
    /// email that has not expired at `now`.
    async fn policies_of_invitee(
        &self,
        email: &Email,
        now: OffsetDateTime,
    ) -> Result<Vec<PlanPolicies>, StoreError>;
}

/// An organization's saved branding and when it was saved.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedBranding {
    /// The branding as saved.
    pub branding: Branding,
    /// When it was last saved.
    pub updated_at: OffsetDateTime,
}

/// White-label branding.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait BrandingStore: Send + Sync + 'static {
    /// The organization's saved branding, `None` when it never saved any.
    async fn branding(&self, id: OrganizationId) -> Result<Option<SavedBranding>, StoreError>;

    /// Replaces the branding of a live organization and records the event. Returns false when
    /// the organization is not live.
    async fn save_branding(
        &self,
        id: OrganizationId,
        branding: Branding,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;
}

/// Members and invitations.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait MemberStore: Send + Sync + 'static {
    /// Active members first (by join time), then pending invitations that have not expired at
    /// `now` (by invitation time), filtered and paginated.
    async fn members(
        &self,
        organization_id: OrganizationId,
        filter: MemberFilter,
        page: PageRequest,
        now: OffsetDateTime,
    ) -> Result<Page<Member>, StoreError>;

    /// An active member.
    async fn member(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
    ) -> Result<Option<Member>, StoreError>;

    /// Whether someone with this email is an active member.
    async fn is_member_email(
        &self,
        organization_id: OrganizationId,
        email: &Email,
    ) -> Result<bool, StoreError>;

    /// Stores the invitation, its event and its mail (queued in the mail outbox). An earlier
    /// invitation of the same email that has expired at `invitation.invited_at` is closed
    /// first. A custom role it gives is held (locked) until the commit, so a concurrent
    /// deletion of the role sees the invitation.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a live invitation for the email exists;
    /// [`StoreError::Gone`] when the custom role it gives was deleted meanwhile.
    async fn create_invitation(
        &self,
        invitation: NewInvitation,
        event: NewEvent,
        audit: AuditRecord,
        mail: SealedMail,
    ) -> Result<(), StoreError>;

    /// The pending (not accepted, not revoked) invitation, even if expired.
    async fn invitation(&self, id: InvitationId) -> Result<Option<Invitation>, StoreError>;

    /// The pending invitation whose token has this hash, even if expired.
    async fn invitation_by_token(&self, hash: &TokenHash)
        -> Result<Option<Invitation>, StoreError>;

    /// The invitation whose token has this hash, whatever became of it (accepted, revoked,
    /// expired), in an organization that still exists: what its mailed link's page tells.
    async fn invitation_record(
        &self,
        hash: &TokenHash,
    ) -> Result<Option<InvitationRecord>, StoreError>;

    /// A page of the pending invitations addressed to the email that have not expired at
    /// `now`, in live organizations, newest first.
    async fn invitations_for(
        &self,
        email: &Email,
        now: OffsetDateTime,
        page: PageRequest,
    ) -> Result<Page<Invitation>, StoreError>;

    /// Turns the invitation into an active membership of `user_id`, and records the event.
    /// Returns false when the invitation is no longer pending or its organization is gone. The
    /// organization's row is locked first, so that an owner deleting their account at the
    /// same time either sees the new member (and is refused) or takes the organization (and
    /// the invitation) with them; a custom role it gives is held until the commit.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the user is already a member; [`StoreError::Gone`] when
    /// the custom role it gives was deleted meanwhile.
    async fn accept_invitation(
        &self,
        id: InvitationId,
        user_id: UserId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Revokes a pending invitation of the organization. Returns false when there is none.
    async fn revoke_invitation(
        &self,
        organization_id: OrganizationId,
        id: InvitationId,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Changes an active member's role and records the event and the audit record, and revokes
    /// the SCIM tokens `revoked` names (the member's, when the new role lacks `sso.manage`).
    /// Returns false, writing nothing, when not a member. The owner's role is never changed
    /// here; a custom role given is held (locked) until the commit.
    ///
    /// # Errors
    /// [`StoreError::Conflict`], writing nothing, when the member is the owner (they became it
    /// meanwhile); [`StoreError::Gone`] when the custom role given was deleted meanwhile.
    #[allow(clippy::too_many_arguments)]
    async fn change_role(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
        role: AssignedRole,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<bool, StoreError>;

    /// Hands the organization from its owner `from` to the active member `to`, in one
    /// transaction: `from` becomes `admin`, then `to` becomes `owner` (the one-owner index holds
    /// throughout), and the events and the audit record are written. Returns false, writing
    /// nothing, when `from` is no longer the owner or `to` no longer a member.
    async fn transfer_ownership(
        &self,
        organization_id: OrganizationId,
        from: UserId,
        to: UserId,
        at: OffsetDateTime,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Ends an active membership (the user's API keys for the organization go with it),
    /// records the event and the audit record, and revokes the SCIM tokens `revoked` names
    /// (the member's). Returns false, writing nothing, when not a member.
    ///
    /// # Errors
    /// [`StoreError::Conflict`], writing nothing, when the member is the owner (they became it
    /// meanwhile): the owner's membership never ends here.
    async fn remove_member(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
        event: NewEvent,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<bool, StoreError>;

    /// Live team organizations the user owns that have other active members.
    async fn owned_teams_with_members(
        &self,
        user_id: UserId,
    ) -> Result<Vec<OrganizationId>, StoreError>;

    /// Deletes the user, the organizations they own (personal workspaces, and teams where they
    /// are the only member) and their memberships, records the events (recorded first, so
    /// that they still reach the user's organizations), and revokes the SCIM tokens `revoked`
    /// names (the user's). The organizations they own are locked first and checked again:
    /// a team that gained a member meanwhile (an invitation accepted) refuses the deletion.
    ///
    /// # Errors
    /// [`StoreError::Conflict`], writing nothing, when the user owns a live team organization
    /// with other members (as [`owned_teams_with_members`](Self::owned_teams_with_members)
    /// says).
    async fn delete_user(
        &self,
        user_id: UserId,
        events: Vec<NewEvent>,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<(), StoreError>;
}

/// What a slice of the purge of deleted organizations deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgedOrganizations {
    /// Organizations gone for good (with what the cascade took with them).
    pub organizations: u64,
    /// Rows of theirs deleted before them: deliveries, directory users and groups, memberships.
    pub rows: u64,
}
