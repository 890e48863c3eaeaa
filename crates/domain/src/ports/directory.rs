//! Directory sync: the users, groups, tokens and group-to-role map an organization's identity
//! provider provisions over SCIM, and the membership changes that provisioning makes, written
//! together.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{NewAccount, SealedMail, StoreError};
use crate::model::{
    AssignedRole, AuditRecord, DirectoryCursor, DirectoryFilter, DirectoryGroup, DirectoryGroupId,
    DirectoryPage, DirectoryText, DirectoryUser, DirectoryUserId, Email, GroupRoles, NewEvent,
    NewInvitation, OrganizationId, Plan, ScimToken, ScimTokenId, Slice, TokenHash, UserId,
};

/// A SCIM token with its organization's plan, as a request made with it needs them.
#[derive(Clone, Debug, PartialEq)]
pub struct ScimTokenAccess {
    /// The token.
    pub token: ScimToken,
    /// Its organization's plan.
    pub plan: Plan,
}

/// A SCIM token that ends with its maker's right: revoked (deleted) in the transaction of the
/// write that ends the maker's membership or leaves them without `sso.manage`, with its
/// `scim_token.revoked` record. A token revoked meanwhile is skipped, and so is its record.
#[derive(Clone, Debug, PartialEq)]
pub struct ScimTokenRevocation {
    /// The token.
    pub token_id: ScimTokenId,
    /// Its `scim_token.revoked` record (actor `system`).
    pub audit: AuditRecord,
}

/// The directory's record that a write changes.
#[derive(Clone, Debug, PartialEq)]
pub enum DirectoryChange {
    /// A new user. [`StoreError::Conflict`] when its `userName` is taken in the organization
    /// (but for case).
    CreateUser(DirectoryUser),
    /// The user's attributes replaced. [`StoreError::Conflict`] when its new `userName` is
    /// taken.
    ReplaceUser(DirectoryUser),
    /// The user gone, out of its groups too.
    DeleteUser(DirectoryUserId),
    /// A new group with its members. [`StoreError::Conflict`] when its name is taken.
    CreateGroup(DirectoryGroup),
    /// The group's attributes and members replaced.
    ReplaceGroup(DirectoryGroup),
    /// The group gone.
    DeleteGroup(DirectoryGroupId),
    /// The organization's group-to-role map replaced.
    GroupRoles(GroupRoles),
}

/// What provisioning changes in the organization's membership, in the directory's write
/// transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum MemberEffect {
    /// The user joins as an active member; with `account`, the account is created first (a
    /// user without a password, with their personal workspace and its events).
    /// [`StoreError::Conflict`] when they became a member meanwhile.
    Join {
        /// Who joins.
        user_id: UserId,
        /// The account to create, when nobody has the address yet.
        account: Option<Box<NewAccount>>,
        /// The role they join with.
        role: AssignedRole,
    },
    /// The account of an address whose owner was never verified is reclaimed before it joins
    /// (see [`Reclaim`](super::Reclaim)).
    Reclaim(super::Reclaim),
    /// A pending member: the invitation is stored (its mail goes out after the commit). An
    /// open invitation of the address is replaced.
    Invite(NewInvitation),
    /// An active member's role changes (never the owner's: a member who became the owner
    /// meanwhile makes the write change nothing). A custom role deleted meanwhile makes the write
    /// change nothing too.
    ChangeRole {
        /// Whose.
        user_id: UserId,
        /// The new role.
        role: AssignedRole,
    },
    /// The open invitation of the address, if any, is for this role now.
    InvitationRole {
        /// The invited address.
        email: Email,
        /// The role.
        role: AssignedRole,
    },
    /// The active member leaves: the membership and their API keys for the organization go.
    /// A member who became the owner meanwhile makes the write change nothing.
    Remove {
        /// Who.
        user_id: UserId,
    },
    /// The open invitations of the address end, revoked at `at`.
    RevokeInvitations {
        /// The invited address.
        email: Email,
        /// When.
        at: OffsetDateTime,
    },
    /// A SCIM token of a member who leaves or loses `sso.manage` ends with their right.
    RevokeScimToken(ScimTokenRevocation),
}

/// Everything one provisioning request writes, in one transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectoryWrite {
    /// The organization provisioned.
    pub organization_id: OrganizationId,
    /// When.
    pub at: OffsetDateTime,
    /// The directory's changed records.
    pub changes: Vec<DirectoryChange>,
    /// What changes in the membership.
    pub effects: Vec<MemberEffect>,
    /// The events (`member.*`).
    pub events: Vec<NewEvent>,
    /// The audit records.
    pub audit: Vec<AuditRecord>,
    /// The invitations' mails, queued in the mail outbox.
    pub mails: Vec<SealedMail>,
}

/// A directory user's place in one of the organization's groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupOfUser {
    /// The user.
    pub user_id: DirectoryUserId,
    /// The group.
    pub group_id: DirectoryGroupId,
    /// The group's name.
    pub display_name: DirectoryText,
}

/// Whether groups are read with their members: a listing that does not show them reads none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupMembers {
    /// Each group with its members.
    Read,
    /// Each group with an empty list of members.
    Skipped,
}

/// The directory of each organization.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait DirectoryStore: Send + Sync + 'static {
    /// Stores a new token (its secret's hash) with its audit record; `false`, writing nothing,
    /// when the organization holds [`MAX_SCIM_TOKENS`](crate::model::MAX_SCIM_TOKENS) already.
    async fn create_scim_token(
        &self,
        token: ScimToken,
        hash: TokenHash,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The organization's tokens, oldest first.
    async fn scim_tokens(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ScimToken>, StoreError>;

    /// Deletes the organization's token (it stops at once) with its audit record; `false`
    /// when there is no such token.
    async fn revoke_scim_token(
        &self,
        organization_id: OrganizationId,
        id: ScimTokenId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The token with this hash, while its organization is live, marked as used at `now`.
    async fn use_scim_token(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<ScimTokenAccess>, StoreError>;

    /// The organization's group-to-role map (empty when none was saved). A mapped custom
    /// role deleted since grants nothing.
    async fn group_roles(&self, organization_id: OrganizationId) -> Result<GroupRoles, StoreError>;

    /// The slice of the organization's directory users that the filter selects, oldest first
    /// (then by id), and how many it selects in all.
    async fn directory_users_page(
        &self,
        organization_id: OrganizationId,
        filter: DirectoryFilter,
        slice: Slice,
    ) -> Result<DirectoryPage<DirectoryUser>, StoreError>;

    /// Up to `limit` of the organization's directory users in the same order, from the first
    /// (`after` is `None`) or after the one `after` names.
    async fn directory_users_after(
        &self,
        organization_id: OrganizationId,
        after: Option<DirectoryCursor>,
        limit: u32,
    ) -> Result<Vec<DirectoryUser>, StoreError>;

    /// Those of these ids that are the organization's directory users, in no order.
    async fn directory_users_with_ids(
        &self,
        organization_id: OrganizationId,
        ids: Vec<DirectoryUserId>,
    ) -> Result<Vec<DirectoryUser>, StoreError>;

    /// The groups each of these directory users is in, in no order.
    async fn groups_of_users(
        &self,
        organization_id: OrganizationId,
        ids: Vec<DirectoryUserId>,
    ) -> Result<Vec<GroupOfUser>, StoreError>;

    /// One of the organization's directory users.
    async fn directory_user(
        &self,
        organization_id: OrganizationId,
        id: DirectoryUserId,
    ) -> Result<Option<DirectoryUser>, StoreError>;

    /// The names of the groups the directory user is in.
    async fn groups_of(
        &self,
        organization_id: OrganizationId,
        id: DirectoryUserId,
    ) -> Result<Vec<DirectoryText>, StoreError>;

    /// The slice of the organization's directory groups that the filter selects, oldest first
    /// (then by id), and how many it selects in all; the members of the slice's groups only,
    /// when `members` says so.
    async fn directory_groups_page(
        &self,
        organization_id: OrganizationId,
        filter: DirectoryFilter,
        slice: Slice,
        members: GroupMembers,
    ) -> Result<DirectoryPage<DirectoryGroup>, StoreError>;

    /// Up to `limit` of the organization's directory groups in the same order, from the first
    /// (`after` is `None`) or after the one `after` names.
    async fn directory_groups_after(
        &self,
        organization_id: OrganizationId,
        after: Option<DirectoryCursor>,
        limit: u32,
        members: GroupMembers,
    ) -> Result<Vec<DirectoryGroup>, StoreError>;

    /// One of the organization's directory groups.
    async fn directory_group(
        &self,
        organization_id: OrganizationId,
        id: DirectoryGroupId,
    ) -> Result<Option<DirectoryGroup>, StoreError>;

    /// Writes it all in one transaction; `false`, writing nothing, when a user or group it
    /// replaces or deletes is gone (or a member it names is not the organization's), a member
    /// it removes or gives a role became the owner meanwhile, or a custom role it gives (to a
    /// member, an invitation or a group) was deleted meanwhile. Each custom role it gives is
    /// held (locked) until the commit, so a concurrent deletion of it sees the new holder.
    ///
    /// # Errors
    /// [`StoreError::Conflict`], writing nothing, as [`DirectoryChange`] and [`MemberEffect`]
    /// say.
    async fn write_directory(&self, write: DirectoryWrite) -> Result<bool, StoreError>;
}
