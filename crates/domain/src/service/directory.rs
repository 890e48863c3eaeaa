//! Directory sync: what an organization's identity provider provisions over SCIM, and what
//! that means for the organization's membership.
//!
//! One rule decides it ([`DirectoryService::reconcile`]): a directory user stands for the
//! person with its address ([`UserAttributes::provisioned_address`]) while it is `active`. An
//! address in a domain the organization verified is made (or linked) an active member; any
//! other address gets a mailed invitation, never a link to someone else's account. A user who
//! stops standing for an address (deactivated, deleted, renamed) takes its member out of the
//! organization in the same transaction: their membership and their keys for it end, and
//! every request they make there is refused from then on. The role is the one the
//! organization's [`GroupRoles`] map gives the user's groups, else `settings.default_role`;
//! the owner is never changed or removed by the directory.

use std::{
    collections::{BTreeMap, BTreeSet},
    future::Future,
};

use time::OffsetDateTime;

use super::{
    heavy,
    iam::resolve_role,
    lifecycle::{self, By, Decision, Joiner, Joining, Lifecycle},
    maker_right,
    reclaim::reclaiming,
    Actor, AuthService, Busy, Forbidden, InvitationMails,
};
use crate::{
    model::{
        AssignedRole, AuditAction, AuditRecord, DirectoryCursor, DirectoryGroup, DirectoryGroupId,
        DirectoryPage, DirectorySelection, DirectoryText, DirectoryUser, DirectoryUserId,
        DirectoryWindow, Email, EmailDomain, Feature, GroupAttributes, GroupRoles, GroupRolesError,
        InvitableRole, Member, MemberStatus, Membership, NewEvent, Organization, Origin, Page,
        PageRequest, Permission, ResourceCheck, Role, RoleRef, ScimToken, ScimTokenId,
        ScimTokenName, SecretToken, Slice, TargetKind, TokenKind, User, UserAttributes, UserId,
        DIRECTORY_BATCH,
    },
    ports::{
        service_ports, CipherError, DirectoryChange, DirectoryWrite, GroupMembers, GroupOfUser,
        MemberEffect, Random, StoreError,
    },
};

service_ports! {
    /// The ports [`DirectoryService`] uses.
    pub struct DirectoryPorts { directory: DirectoryStore, organizations: OrganizationStore, domains: DomainStore, accounts: AccountStore, memberships: MembershipStore, roles: RoleStore, heavy: HeavyLanes, clock: Clock, random: Random }
}

/// Why a directory use case failed.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// The caller may not do this.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The organization's heavy requests are all under way (a list).
    #[error(transparent)]
    Busy(#[from] Busy),
    /// The organization's plan has no directory sync.
    #[error("directory sync (SCIM) needs the business or enterprise plan")]
    PlanRequired,
    /// No such user, group or token in the organization.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Another user of the directory has this `userName` (but for case).
    #[error("userName {0:?} is taken by another user of this directory")]
    UserNameTaken(String),
    /// A group names a member that is no user of this directory.
    #[error("member {0} is not a user of this directory")]
    UnknownMember(DirectoryUserId),
    /// The change would remove the organization's owner or change their role.
    #[error("the organization's owner cannot be removed or demoted by the directory: transfer ownership first")]
    OwnerProtected,
    /// A token is created by a member signed in, whom it names (never by a key).
    #[error("a SCIM token names the member who creates it: create it with a user's access token, not an API key")]
    PersonNeeded,
    /// The organization holds the most tokens it may.
    #[error(
        "the organization already has {} SCIM tokens, the most it may; revoke one first",
        crate::model::MAX_SCIM_TOKENS
    )]
    TooManyTokens,
    /// A role the map names does not exist.
    #[error(
        "the organization has no role {0}: map admin, member, viewer or one of its custom roles"
    )]
    UnknownRole(String),
    /// A role the map names grants more than the caller's own.
    #[error("you cannot map the role {0}: it grants more than your own")]
    RoleAboveYours(String),
    /// The map breaks a rule.
    #[error(transparent)]
    GroupRoles(#[from] GroupRolesError),
    /// The membership changed while this request was deciding: try again.
    #[error("the organization's members changed meanwhile: try again")]
    Conflict,
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
    /// An invitation's mail could not be sealed for the outbox.
    #[error("an invitation mail could not be queued")]
    Internal(#[source] CipherError),
}

impl From<StoreError> for DirectoryError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict => Self::Conflict,
            error => Self::Store(error),
        }
    }
}

/// Why a `PATCH` failed: the patch itself (the protocol's error), or the use case.
#[derive(Debug)]
pub enum PatchError<E> {
    /// The patch does not apply to the resource.
    Patch(E),
    /// The use case refused the result.
    Directory(DirectoryError),
}

impl<E> From<DirectoryError> for PatchError<E> {
    fn from(error: DirectoryError) -> Self {
        Self::Directory(error)
    }
}

/// A token just created, with its secret (shown once).
#[derive(Debug)]
pub struct CreatedScimToken {
    /// The token.
    pub token: ScimToken,
    /// Its secret.
    pub secret: SecretToken,
}

/// One request's decisions, gathered before they are written together.
struct Decisions<'a> {
    actor: &'a Actor,
    organization: Organization,
    roles: GroupRoles,
    origin: &'a Origin,
    now: OffsetDateTime,
    effects: Vec<MemberEffect>,
    events: Vec<NewEvent>,
    audit: Vec<AuditRecord>,
    /// Invitations to mail: their mails are written with the decisions.
    mails: Vec<(Email, AssignedRole, SecretToken)>,
}

impl<'a> Decisions<'a> {
    /// The member lifecycle's decisions, at this request's moment.
    fn lifecycle(&self, random: &'a dyn Random) -> Lifecycle<'a> {
        Lifecycle::new(random, self.now, self.origin)
    }

    /// Writes a decision's event and audit record with the others.
    fn record(&mut self, decision: Decision) {
        self.events.push(decision.event);
        self.audit.push(decision.audit);
    }

    /// The role of someone in these groups.
    fn role_of<'g>(&self, groups: impl IntoIterator<Item = &'g str>) -> AssignedRole {
        self.roles.role_of(
            groups,
            self.organization.settings.default_role.role().into(),
        )
    }
}

/// Directory sync of organizations: their SCIM tokens and group-to-role map (for their
/// admins), and the users and groups their identity provider provisions.
#[derive(Clone)]
pub struct DirectoryService {
    ports: DirectoryPorts,
    /// Makes accounts the way every sign-up does.
    auth: AuthService,
    /// Writes invitations' mails the way every invitation's mail is written.
    mails: InvitationMails,
}

impl DirectoryService {
    /// A service on these ports.
    pub fn new(ports: DirectoryPorts, auth: AuthService, mails: InvitationMails) -> Self {
        Self { ports, auth, mails }
    }

    /// `Ok` when the actor may use the permission and the plan includes directory sync.
    fn allow(actor: &Actor, permission: Permission) -> Result<(), DirectoryError> {
        actor.require(permission)?;
        if !actor.plan().includes(Feature::DirectorySync) {
            return Err(DirectoryError::PlanRequired);
        }
        Ok(())
    }

    // --- The organization's admins: tokens and the group-to-role map. ---

    /// Creates a SCIM token; its secret is in the answer only.
    pub async fn create_token(
        &self,
        actor: &Actor,
        name: ScimTokenName,
        origin: &Origin,
    ) -> Result<CreatedScimToken, DirectoryError> {
        Self::allow(actor, Permission::SsoManage)?;
        let created_by = actor
            .person_signed_in()
            .ok_or(DirectoryError::PersonNeeded)?;
        let now = self.ports.clock.now();
        let secret = self.ports.random.secret(TokenKind::ScimToken);
        let token = ScimToken {
            id: self.ports.random.uuid().into(),
            organization_id: actor.organization_id(),
            name,
            prefix: secret.expose().chars().take(12).collect(),
            created_by,
            created_at: now,
            last_used_at: None,
        };
        let record = actor
            .audit(
                self.ports.random.as_ref(),
                now,
                AuditAction::ScimTokenCreated,
                origin,
            )
            .on(TargetKind::ScimToken, token.id);
        if !self
            .ports
            .directory
            .create_scim_token(token.clone(), secret.hash(), record)
            .await?
        {
            return Err(DirectoryError::TooManyTokens);
        }
        Ok(CreatedScimToken { token, secret })
    }

    /// A page of the organization's tokens (never their secrets), oldest first. At most
    /// [`MAX_SCIM_TOKENS`](crate::model::MAX_SCIM_TOKENS) of them: read whole and paged here.
    pub async fn tokens(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> Result<Page<ScimToken>, DirectoryError> {
        Self::allow(actor, Permission::SsoManage)?;
        let all = self
            .ports
            .directory
            .scim_tokens(actor.organization_id())
            .await?;
        Ok(Page::of_all(all, page))
    }

    /// Revokes a token of the organization: it stops at once.
    pub async fn revoke_token(
        &self,
        actor: &Actor,
        id: ScimTokenId,
        origin: &Origin,
    ) -> Result<(), DirectoryError> {
        actor.require(Permission::SsoManage)?;
        let record = actor
            .audit(
                self.ports.random.as_ref(),
                self.ports.clock.now(),
                AuditAction::ScimTokenRevoked,
                origin,
            )
            .on(TargetKind::ScimToken, id);
        if self
            .ports
            .directory
            .revoke_scim_token(actor.organization_id(), id, record)
            .await?
        {
            Ok(())
        } else {
            Err(DirectoryError::NotFound("SCIM token"))
        }
    }

    /// The organization's group-to-role map.
    pub async fn group_roles(&self, actor: &Actor) -> Result<GroupRoles, DirectoryError> {
        Self::allow(actor, Permission::SsoManage)?;
        Ok(self
            .ports
            .directory
            .group_roles(actor.organization_id())
            .await?)
    }

    /// Replaces the group-to-role map, and gives every provisioned user the role it now
    /// says, in the same transaction (`member.role_changed` for each change).
    pub async fn save_group_roles(
        &self,
        actor: &Actor,
        entries: Vec<(DirectoryText, RoleRef)>,
        origin: &Origin,
    ) -> Result<GroupRoles, DirectoryError> {
        Self::allow(actor, Permission::SsoManage)?;
        let organization_id = actor.organization_id();
        let mut resolved = Vec::with_capacity(entries.len());
        for (group, role) in entries {
            let name = role.name().to_owned();
            let role = resolve_role(self.ports.roles.as_ref(), organization_id, role)
                .await?
                .ok_or(DirectoryError::UnknownRole(name))?;
            if !actor.may_give(&role) {
                return Err(DirectoryError::RoleAboveYours(role.to_string()));
            }
            resolved.push((group, role));
        }
        let roles = GroupRoles::new(resolved)?;
        let mut decisions = self.decide(actor, origin).await?;
        decisions.roles = roles.clone();
        decisions.audit.push(
            actor
                .audit(
                    self.ports.random.as_ref(),
                    decisions.now,
                    AuditAction::GroupRolesChanged,
                    origin,
                )
                .on(TargetKind::Organization, organization_id),
        );
        // The directory in batches, each user with their groups: never all of it at once.
        let mut after = None;
        loop {
            let batch = self
                .ports
                .directory
                .directory_users_after(organization_id, after, DIRECTORY_BATCH)
                .await?;
            let Some(last) = batch.last() else {
                break;
            };
            after = Some(user_cursor(last));
            let groups = self.groups_by_user(organization_id, &batch).await?;
            for user in &batch {
                let Some(address) = user.attributes.provisioned_address() else {
                    continue;
                };
                let names = groups
                    .get(&user.id)
                    .into_iter()
                    .flatten()
                    .map(|group| group.display_name.as_str());
                let role = decisions.role_of(names);
                self.set_role(&mut decisions, &address, role).await?;
            }
            if batch.len() < DIRECTORY_BATCH as usize {
                break;
            }
        }
        self.write(decisions, vec![DirectoryChange::GroupRoles(roles.clone())])
            .await?;
        Ok(roles)
    }

    // --- The identity provider: users. ---

    /// A page of the organization's directory users that the selection holds, oldest first,
    /// and how many it holds: a filter by the store's indexes, a check by reading the
    /// directory in batches (holding one batch and the page at a time).
    pub async fn list_users(
        &self,
        actor: &Actor,
        selection: DirectorySelection<DirectoryUser>,
        window: DirectoryWindow,
    ) -> Result<DirectoryPage<DirectoryUser>, DirectoryError> {
        Self::allow(actor, Permission::MembersRead)?;
        let organization_id = actor.organization_id();
        // A list counts what it matches: a heavy request.
        let _lane = heavy::lane(&*self.ports.heavy, organization_id).await?;
        let directory = &self.ports.directory;
        match selection {
            DirectorySelection::Filter(filter) => Ok(directory
                .directory_users_page(organization_id, filter, slice(window))
                .await?),
            DirectorySelection::Check(check) => {
                scan(
                    |after| {
                        directory.directory_users_after(organization_id, after, DIRECTORY_BATCH)
                    },
                    check.as_ref(),
                    window,
                    user_cursor,
                )
                .await
            }
        }
    }

    /// Users, then groups, as one listing (SCIM's `POST /.search` at the root): the window
    /// runs over the users' matches, then the groups'.
    pub async fn list_everything(
        &self,
        actor: &Actor,
        users: DirectorySelection<DirectoryUser>,
        groups: DirectorySelection<DirectoryGroup>,
        window: DirectoryWindow,
        members: GroupMembers,
    ) -> Result<(DirectoryPage<DirectoryUser>, DirectoryPage<DirectoryGroup>), DirectoryError> {
        let users = self.list_users(actor, users, window).await?;
        let taken = u32::try_from(users.resources.len()).unwrap_or(u32::MAX);
        let rest = DirectoryWindow {
            offset: window.offset.saturating_sub(users.total),
            count: window.count.saturating_sub(taken),
        };
        let groups = self.list_groups(actor, groups, rest, members).await?;
        Ok((users, groups))
    }

    /// One directory user.
    pub async fn user(
        &self,
        actor: &Actor,
        id: DirectoryUserId,
    ) -> Result<DirectoryUser, DirectoryError> {
        Self::allow(actor, Permission::MembersRead)?;
        self.ports
            .directory
            .directory_user(actor.organization_id(), id)
            .await?
            .ok_or(DirectoryError::NotFound("user"))
    }

    /// Provisions a user: the resource, and the member or invitation its address makes.
    pub async fn create_user(
        &self,
        actor: &Actor,
        attributes: UserAttributes,
        origin: &Origin,
    ) -> Result<DirectoryUser, DirectoryError> {
        Self::allow(actor, Permission::MembersCreate)?;
        let mut decisions = self.decide(actor, origin).await?;
        let user = DirectoryUser {
            id: self.ports.random.uuid().into(),
            organization_id: actor.organization_id(),
            attributes,
            created_at: decisions.now,
            updated_at: decisions.now,
        };
        let role = decisions.role_of([]);
        self.reconcile(
            &mut decisions,
            None,
            user.attributes.provisioned_address(),
            &user.attributes,
            role,
        )
        .await?;
        let user_name = user.attributes.user_name.as_str().to_owned();
        self.write_user(
            decisions,
            DirectoryChange::CreateUser(user.clone()),
            user_name,
        )
        .await?;
        Ok(user)
    }

    /// Replaces a user's attributes (`PUT`), and what they mean for the organization.
    pub async fn replace_user(
        &self,
        actor: &Actor,
        id: DirectoryUserId,
        attributes: UserAttributes,
        origin: &Origin,
    ) -> Result<DirectoryUser, DirectoryError> {
        self.patch_user(actor, id, |_| Ok::<_, DirectoryError>(attributes), origin)
            .await
            .map_err(|error| match error {
                PatchError::Patch(error) | PatchError::Directory(error) => error,
            })
    }

    /// Changes a user's attributes by a patch of the current ones (`PATCH`).
    pub async fn patch_user<E>(
        &self,
        actor: &Actor,
        id: DirectoryUserId,
        patch: impl FnOnce(&UserAttributes) -> Result<UserAttributes, E>,
        origin: &Origin,
    ) -> Result<DirectoryUser, PatchError<E>> {
        Self::allow(actor, Permission::MembersUpdate)?;
        let current = self.user(actor, id).await?;
        let attributes = patch(&current.attributes).map_err(PatchError::Patch)?;
        let mut decisions = self.decide(actor, origin).await?;
        let groups = self
            .ports
            .directory
            .groups_of(actor.organization_id(), id)
            .await
            .map_err(DirectoryError::from)?;
        let role = decisions.role_of(groups.iter().map(DirectoryText::as_str));
        self.reconcile(
            &mut decisions,
            current.attributes.provisioned_address(),
            attributes.provisioned_address(),
            &attributes,
            role,
        )
        .await?;
        let user = DirectoryUser {
            attributes,
            updated_at: decisions.now,
            ..current
        };
        let user_name = user.attributes.user_name.as_str().to_owned();
        self.write_user(
            decisions,
            DirectoryChange::ReplaceUser(user.clone()),
            user_name,
        )
        .await?;
        Ok(user)
    }

    /// Deprovisions a user: the resource goes, and the member or invitation with it.
    pub async fn delete_user(
        &self,
        actor: &Actor,
        id: DirectoryUserId,
        origin: &Origin,
    ) -> Result<(), DirectoryError> {
        Self::allow(actor, Permission::MembersDelete)?;
        let current = self.user(actor, id).await?;
        let mut decisions = self.decide(actor, origin).await?;
        let role = decisions.role_of([]);
        self.reconcile(
            &mut decisions,
            current.attributes.provisioned_address(),
            None,
            &current.attributes,
            role,
        )
        .await?;
        if self
            .write(decisions, vec![DirectoryChange::DeleteUser(id)])
            .await?
        {
            Ok(())
        } else {
            Err(DirectoryError::NotFound("user"))
        }
    }

    // --- The identity provider: groups. ---

    /// A page of the organization's directory groups that the selection holds, oldest first,
    /// and how many it holds, as [`list_users`](Self::list_users) does; the page's groups
    /// with their members when `members` says so (a check that reads members gets them).
    pub async fn list_groups(
        &self,
        actor: &Actor,
        selection: DirectorySelection<DirectoryGroup>,
        window: DirectoryWindow,
        members: GroupMembers,
    ) -> Result<DirectoryPage<DirectoryGroup>, DirectoryError> {
        Self::allow(actor, Permission::MembersRead)?;
        let organization_id = actor.organization_id();
        // A list counts what it matches: a heavy request.
        let _lane = heavy::lane(&*self.ports.heavy, organization_id).await?;
        let directory = &self.ports.directory;
        match selection {
            DirectorySelection::Filter(filter) => Ok(directory
                .directory_groups_page(organization_id, filter, slice(window), members)
                .await?),
            DirectorySelection::Check(check) => {
                let read = if check.reads_members() {
                    GroupMembers::Read
                } else {
                    members
                };
                let mut page = scan(
                    |after| {
                        directory.directory_groups_after(
                            organization_id,
                            after,
                            DIRECTORY_BATCH,
                            read,
                        )
                    },
                    check.as_ref(),
                    window,
                    |group: &DirectoryGroup| DirectoryCursor {
                        created_at: group.created_at,
                        id: group.id.as_uuid(),
                    },
                )
                .await?;
                if members == GroupMembers::Skipped {
                    for group in &mut page.resources {
                        group.attributes.members = Vec::new();
                    }
                } else if read == GroupMembers::Skipped {
                    // Only the page's groups are read again, with their members.
                    for group in &mut page.resources {
                        if let Some(full) =
                            directory.directory_group(organization_id, group.id).await?
                        {
                            *group = full;
                        }
                    }
                }
                Ok(page)
            }
        }
    }

    /// One directory group.
    pub async fn group(
        &self,
        actor: &Actor,
        id: DirectoryGroupId,
    ) -> Result<DirectoryGroup, DirectoryError> {
        Self::allow(actor, Permission::MembersRead)?;
        self.ports
            .directory
            .directory_group(actor.organization_id(), id)
            .await?
            .ok_or(DirectoryError::NotFound("group"))
    }

    /// Provisions a group; its members get the role it maps to.
    pub async fn create_group(
        &self,
        actor: &Actor,
        attributes: GroupAttributes,
        origin: &Origin,
    ) -> Result<DirectoryGroup, DirectoryError> {
        Self::allow(actor, Permission::MembersUpdate)?;
        let now = self.ports.clock.now();
        let group = DirectoryGroup {
            id: self.ports.random.uuid().into(),
            organization_id: actor.organization_id(),
            attributes: attributes.normalized(),
            created_at: now,
            updated_at: now,
        };
        self.known_members(actor, &group).await?;
        if !self
            .write_group(
                actor,
                origin,
                None,
                Some(&group),
                DirectoryChange::CreateGroup(group.clone()),
            )
            .await?
        {
            return Err(DirectoryError::NotFound("member"));
        }
        Ok(group)
    }

    /// Replaces a group's attributes (`PUT`).
    pub async fn replace_group(
        &self,
        actor: &Actor,
        id: DirectoryGroupId,
        attributes: GroupAttributes,
        origin: &Origin,
    ) -> Result<DirectoryGroup, DirectoryError> {
        self.patch_group(actor, id, |_| Ok::<_, DirectoryError>(attributes), origin)
            .await
            .map_err(|error| match error {
                PatchError::Patch(error) | PatchError::Directory(error) => error,
            })
    }

    /// Changes a group by a patch of its current attributes (`PATCH`): members who join or
    /// leave it, or all of them when it is renamed, get the role their groups now give.
    pub async fn patch_group<E>(
        &self,
        actor: &Actor,
        id: DirectoryGroupId,
        patch: impl FnOnce(&GroupAttributes) -> Result<GroupAttributes, E>,
        origin: &Origin,
    ) -> Result<DirectoryGroup, PatchError<E>> {
        Self::allow(actor, Permission::MembersUpdate)?;
        let current = self.group(actor, id).await?;
        let attributes = patch(&current.attributes).map_err(PatchError::Patch)?;
        let group = DirectoryGroup {
            attributes: attributes.normalized(),
            updated_at: self.ports.clock.now(),
            ..current.clone()
        };
        self.known_members(actor, &group).await?;
        if self
            .write_group(
                actor,
                origin,
                Some(&current),
                Some(&group),
                DirectoryChange::ReplaceGroup(group.clone()),
            )
            .await?
        {
            Ok(group)
        } else {
            Err(DirectoryError::NotFound("group").into())
        }
    }

    /// Deletes a group: its members get the role their other groups give.
    pub async fn delete_group(
        &self,
        actor: &Actor,
        id: DirectoryGroupId,
        origin: &Origin,
    ) -> Result<(), DirectoryError> {
        Self::allow(actor, Permission::MembersUpdate)?;
        let current = self.group(actor, id).await?;
        if self
            .write_group(
                actor,
                origin,
                Some(&current),
                None,
                DirectoryChange::DeleteGroup(id),
            )
            .await?
        {
            Ok(())
        } else {
            Err(DirectoryError::NotFound("group"))
        }
    }

    /// Every member a group names is a user of this directory.
    async fn known_members(
        &self,
        actor: &Actor,
        after: &DirectoryGroup,
    ) -> Result<(), DirectoryError> {
        if after.attributes.members.is_empty() {
            return Ok(());
        }
        let known: BTreeSet<DirectoryUserId> = self
            .ports
            .directory
            .directory_users_with_ids(actor.organization_id(), after.attributes.members.clone())
            .await?
            .into_iter()
            .map(|user| user.id)
            .collect();
        match after
            .attributes
            .members
            .iter()
            .find(|member| !known.contains(member))
        {
            Some(unknown) => Err(DirectoryError::UnknownMember(*unknown)),
            None => Ok(()),
        }
    }

    /// Writes a group's change with the role changes of the users it touches: those who
    /// join or leave it, or every member when its name changes.
    async fn write_group(
        &self,
        actor: &Actor,
        origin: &Origin,
        before: Option<&DirectoryGroup>,
        after: Option<&DirectoryGroup>,
        change: DirectoryChange,
    ) -> Result<bool, DirectoryError> {
        let mut decisions = self.decide(actor, origin).await?;
        let organization_id = actor.organization_id();
        let old: BTreeSet<DirectoryUserId> = before
            .map(|g| g.attributes.members.iter().copied().collect())
            .unwrap_or_default();
        let new: BTreeSet<DirectoryUserId> = after
            .map(|g| g.attributes.members.iter().copied().collect())
            .unwrap_or_default();
        let renamed = match (before, after) {
            (Some(b), Some(a)) => b.attributes.display_name != a.attributes.display_name,
            _ => false,
        };
        let touched: BTreeSet<DirectoryUserId> = if renamed {
            old.union(&new).copied().collect()
        } else {
            old.symmetric_difference(&new).copied().collect()
        };
        let this = before.or(after).map(|group| group.id);
        if !touched.is_empty() {
            // The touched users alone, each with the groups they are in now.
            let mut users = self
                .ports
                .directory
                .directory_users_with_ids(organization_id, touched.iter().copied().collect())
                .await?;
            users.sort_by_key(|user| (user.created_at, user.id));
            let groups = self.groups_by_user(organization_id, &users).await?;
            for user in &users {
                let Some(address) = user.attributes.provisioned_address() else {
                    continue;
                };
                // Their groups once this change is written: the others as they are, and this
                // one as it will be.
                let mut names: Vec<&str> = groups
                    .get(&user.id)
                    .into_iter()
                    .flatten()
                    .filter(|group| Some(group.group_id) != this)
                    .map(|group| group.display_name.as_str())
                    .collect();
                if new.contains(&user.id) {
                    if let Some(after) = after {
                        names.push(after.attributes.display_name.as_str());
                    }
                }
                let role = decisions.role_of(names);
                self.set_role(&mut decisions, &address, role).await?;
            }
        }
        self.write(decisions, vec![change]).await
    }

    /// The groups each of these users is in, by user.
    async fn groups_by_user(
        &self,
        organization_id: crate::model::OrganizationId,
        users: &[DirectoryUser],
    ) -> Result<BTreeMap<DirectoryUserId, Vec<GroupOfUser>>, DirectoryError> {
        let mut by_user: BTreeMap<DirectoryUserId, Vec<GroupOfUser>> = BTreeMap::new();
        if users.is_empty() {
            return Ok(by_user);
        }
        let ids = users.iter().map(|user| user.id).collect();
        for group in self
            .ports
            .directory
            .groups_of_users(organization_id, ids)
            .await?
        {
            by_user.entry(group.user_id).or_default().push(group);
        }
        Ok(by_user)
    }

    // --- What provisioning means for the organization. ---

    /// The decisions of one request, before any is made.
    async fn decide<'a>(
        &self,
        actor: &'a Actor,
        origin: &'a Origin,
    ) -> Result<Decisions<'a>, DirectoryError> {
        let organization = self
            .ports
            .organizations
            .organization(actor.organization_id())
            .await?
            .ok_or(DirectoryError::NotFound("organization"))?;
        let roles = self.ports.directory.group_roles(organization.id).await?;
        Ok(Decisions {
            actor,
            organization,
            roles,
            origin,
            now: self.ports.clock.now(),
            effects: Vec::new(),
            events: Vec::new(),
            audit: Vec::new(),
            mails: Vec::new(),
        })
    }

    /// The one rule: the person of `before` leaves unless they are the person of `after`,
    /// who joins (or is invited) with `role`, or gets `role` when they are there already.
    async fn reconcile(
        &self,
        decisions: &mut Decisions<'_>,
        before: Option<Email>,
        after: Option<Email>,
        attributes: &UserAttributes,
        role: AssignedRole,
    ) -> Result<(), DirectoryError> {
        if before.is_some() && before == after {
            if let Some(address) = after {
                self.set_role(decisions, &address, role).await?;
            }
            return Ok(());
        }
        if let Some(address) = before {
            self.leave(decisions, &address).await?;
        }
        if let Some(address) = after {
            self.join(decisions, &address, attributes, role).await?;
        }
        Ok(())
    }

    /// The account with this address and its membership, if any.
    async fn member_with(
        &self,
        decisions: &Decisions<'_>,
        address: &Email,
    ) -> Result<(Option<User>, Option<Membership>), DirectoryError> {
        let Some(credentials) = self.ports.accounts.credentials_by_email(address).await? else {
            return Ok((None, None));
        };
        let membership = self
            .ports
            .memberships
            .membership(credentials.user.id, decisions.organization.id)
            .await?;
        Ok((Some(credentials.user), membership))
    }

    /// The person with the address joins: an active member when the organization verified
    /// the address's domain (the account made when there is none), else invited by mail.
    async fn join(
        &self,
        decisions: &mut Decisions<'_>,
        address: &Email,
        attributes: &UserAttributes,
        role: AssignedRole,
    ) -> Result<(), DirectoryError> {
        let (user, current) = self.member_with(decisions, address).await?;
        if current.is_some() {
            return self.set_role(decisions, address, role).await;
        }
        let verified = match EmailDomain::parse(address.domain()) {
            Ok(domain) => {
                self.ports.domains.verifying_organization(&domain).await?
                    == Some(decisions.organization.id)
            }
            Err(_) => false,
        };
        if verified {
            let (user_id, full_name, account) = match user {
                Some(mut user) => {
                    // The directory speaks for the address: an account nobody proved it owns
                    // is reclaimed for its owner before it joins.
                    let reclaim = reclaiming(&mut user, |user| {
                        decisions
                            .actor
                            .audit(
                                self.ports.random.as_ref(),
                                decisions.now,
                                AuditAction::UserReclaimed,
                                decisions.origin,
                            )
                            .on(TargetKind::User, user.id)
                    });
                    if let Some(reclaim) = reclaim {
                        decisions.effects.push(MemberEffect::Reclaim(reclaim));
                    }
                    (user.id, user.full_name, None)
                }
                None => {
                    let full_name = attributes
                        .full_name(address)
                        .ok_or(DirectoryError::NotFound("name"))?;
                    // The organization proved it holds the domain: the address is verified.
                    let account = self.auth.new_account(
                        address.clone(),
                        full_name.clone(),
                        None,
                        true,
                        decisions.now,
                    );
                    (account.user.id, full_name, Some(Box::new(account)))
                }
            };
            let joined = decisions.lifecycle(self.ports.random.as_ref()).join(
                By::Actor(decisions.actor),
                decisions.organization.id,
                Joiner {
                    user_id,
                    email: address,
                    full_name: &full_name,
                },
                Joining::Provisioned(&role),
            );
            decisions.record(joined);
            decisions.effects.push(MemberEffect::Join {
                user_id,
                account,
                role,
            });
            return Ok(());
        }
        let Some(invitable) = InvitableRole::new(role.clone()) else {
            return Err(DirectoryError::OwnerProtected);
        };
        let inviter = lifecycle::inviter(decisions.actor).ok_or(DirectoryError::PersonNeeded)?;
        let token = self.ports.random.secret(TokenKind::Invitation);
        let (invitation, invited) = decisions.lifecycle(self.ports.random.as_ref()).invite(
            decisions.actor,
            inviter,
            address.clone(),
            invitable,
            token.hash(),
        );
        decisions.record(invited);
        decisions.effects.push(MemberEffect::Invite(invitation));
        decisions.mails.push((address.clone(), role, token));
        Ok(())
    }

    /// The person with the address leaves: their membership (never the owner's) and any
    /// open invitation end.
    async fn leave(
        &self,
        decisions: &mut Decisions<'_>,
        address: &Email,
    ) -> Result<(), DirectoryError> {
        let (user, current) = self.member_with(decisions, address).await?;
        if let (Some(user), Some(membership)) = (user, current) {
            let member = active_member(&user, &membership);
            let removed = decisions
                .lifecycle(self.ports.random.as_ref())
                .leave(decisions.actor, user.id, member, false)
                .map_err(|_| DirectoryError::OwnerProtected)?;
            decisions.record(removed);
            decisions
                .effects
                .push(MemberEffect::Remove { user_id: user.id });
            self.end_scim_tokens(decisions, user.id, None).await?;
        }
        decisions.effects.push(MemberEffect::RevokeInvitations {
            email: address.clone(),
            at: decisions.now,
        });
        Ok(())
    }

    /// The person with the address holds `role`: a member's changes (never the owner's), an
    /// open invitation's is set.
    async fn set_role(
        &self,
        decisions: &mut Decisions<'_>,
        address: &Email,
        role: AssignedRole,
    ) -> Result<(), DirectoryError> {
        let (user, current) = self.member_with(decisions, address).await?;
        let (Some(user), Some(membership)) = (user, current) else {
            decisions.effects.push(MemberEffect::InvitationRole {
                email: address.clone(),
                role,
            });
            return Ok(());
        };
        // The owner's role is not the directory's to change: it stays, and so does an
        // unchanged one.
        if membership.role.is(Role::Owner) || membership.role == role {
            return Ok(());
        }
        let member = active_member(&user, &membership);
        let change = decisions
            .lifecycle(self.ports.random.as_ref())
            .change_role(decisions.actor, user.id, member, role.clone())
            .map_err(|_| DirectoryError::OwnerProtected)?;
        decisions.record(change.decision);
        self.end_scim_tokens(decisions, user.id, Some(&role))
            .await?;
        decisions.effects.push(MemberEffect::ChangeRole {
            user_id: user.id,
            role,
        });
        Ok(())
    }

    /// The SCIM tokens the member made end when the write leaves them with `role` (`None`:
    /// not a member) that lacks `sso.manage`.
    async fn end_scim_tokens(
        &self,
        decisions: &mut Decisions<'_>,
        user_id: UserId,
        role: Option<&AssignedRole>,
    ) -> Result<(), DirectoryError> {
        let revoked = maker_right::ending_with(
            self.ports.directory.as_ref(),
            self.ports.random.as_ref(),
            decisions.organization.id,
            user_id,
            role,
            decisions.now,
            decisions.origin,
        )
        .await?;
        decisions
            .effects
            .extend(revoked.into_iter().map(MemberEffect::RevokeScimToken));
        Ok(())
    }

    /// Writes a user's change; a `userName` taken is [`DirectoryError::UserNameTaken`].
    async fn write_user(
        &self,
        decisions: Decisions<'_>,
        change: DirectoryChange,
        user_name: String,
    ) -> Result<(), DirectoryError> {
        let replacing = matches!(change, DirectoryChange::ReplaceUser(_));
        match self.write(decisions, vec![change]).await {
            Ok(true) => Ok(()),
            Ok(false) if replacing => Err(DirectoryError::NotFound("user")),
            Ok(false) => Err(DirectoryError::Conflict),
            Err(DirectoryError::Conflict) => {
                // Taken, or the membership changed meanwhile: the name tells which.
                Err(DirectoryError::UserNameTaken(user_name))
            }
            Err(error) => Err(error),
        }
    }

    /// Writes the decisions in one transaction, their invitations' mails with them.
    async fn write(
        &self,
        decisions: Decisions<'_>,
        changes: Vec<DirectoryChange>,
    ) -> Result<bool, DirectoryError> {
        let organization = &decisions.organization;
        let inviter = format!("The {} directory", organization.name.as_ref());
        let mut mails = Vec::with_capacity(decisions.mails.len());
        for (email, role, token) in decisions.mails {
            let mail = self
                .mails
                .mail(organization, &inviter, email, &role, &token)
                .await
                .map_err(DirectoryError::Internal)?;
            mails.push(mail);
        }
        Ok(self
            .ports
            .directory
            .write_directory(DirectoryWrite {
                organization_id: organization.id,
                at: decisions.now,
                changes,
                effects: decisions.effects,
                events: decisions.events,
                audit: decisions.audit,
                mails,
            })
            .await?)
    }
}

/// The member the account is, by its membership.
fn active_member(user: &User, membership: &Membership) -> Member {
    Member {
        organization_id: membership.organization_id,
        user_id: Some(user.id),
        email: user.email.clone(),
        full_name: Some(user.full_name.clone()),
        role: membership.role.clone(),
        status: MemberStatus::Active,
        invitation_id: None,
        invited_at: None,
        invited_by: None,
        accepted_at: Some(membership.joined_at),
        joined_at: membership.joined_at,
    }
}

/// The window as a store's slice.
fn slice(window: DirectoryWindow) -> Slice {
    Slice::new(
        i64::try_from(window.offset).unwrap_or(i64::MAX),
        i64::from(window.count),
    )
}

/// Where a read in order goes on after this user.
fn user_cursor(user: &DirectoryUser) -> DirectoryCursor {
    DirectoryCursor {
        created_at: user.created_at,
        id: user.id.as_uuid(),
    }
}

/// The window of the resources the check accepts, and how many it accepts, read in order in
/// batches of [`DIRECTORY_BATCH`] by `next` (from the first, then after the last read): what it
/// holds at once is one batch and the page.
async fn scan<T, F, Fut>(
    mut next: F,
    check: &dyn ResourceCheck<T>,
    window: DirectoryWindow,
    cursor: impl Fn(&T) -> DirectoryCursor,
) -> Result<DirectoryPage<T>, DirectoryError>
where
    F: FnMut(Option<DirectoryCursor>) -> Fut,
    Fut: Future<Output = Result<Vec<T>, StoreError>>,
{
    let mut page = DirectoryPage {
        resources: Vec::new(),
        total: 0,
    };
    let mut after = None;
    loop {
        let batch = next(after).await?;
        let full = batch.len() >= DIRECTORY_BATCH as usize;
        after = batch.last().map(&cursor);
        for resource in batch {
            if !check.accepts(&resource) {
                continue;
            }
            if page.total >= window.offset && page.resources.len() < window.count as usize {
                page.resources.push(resource);
            }
            page.total += 1;
        }
        if !full || after.is_none() {
            return Ok(page);
        }
    }
}
