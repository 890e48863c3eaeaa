//! Members and invitations: list, invite, accept, change roles, remove, leave; the IAM user
//! list; deleting one's own account.

use time::OffsetDateTime;

use super::{
    heavy,
    invitation_mail::{InvitationMailPorts, InvitationMails},
    lifecycle::{self, By, Decision, Joiner, Joining, Lifecycle, MemberRule},
    maker_right, payloads, user_audit, user_event, Actor, Busy, Forbidden, Principal,
};
use crate::{
    model::{
        AssignedRole, AuditAction, Branding, Email, InvitableRole, Invitation, InvitationId,
        InvitationState, Member, MemberFilter, OrganizationFilter, OrganizationId,
        OrganizationType, Origin, Page, PageRequest, Permission, Role, RoleRef, TargetKind,
        TokenHash, TokenKind, User, UserId,
    },
    ports::{service_ports, CipherError, ScimTokenRevocation, StoreError},
};

/// Why a member or invitation use case failed.
#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    /// The caller's role lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The organization's heavy requests are all under way (a search).
    #[error(transparent)]
    Busy(#[from] Busy),
    /// A member (not an admin or owner) tried to invite as admin.
    #[error("members may invite only as member or viewer")]
    MemberInviteRole,
    /// The role given (or taken) grants something the caller's own role does not.
    #[error("you cannot give or take the role {0}: it grants more than your own")]
    RoleAboveYours(String),
    /// The organization has no custom role with this key.
    #[error(
        "the organization has no role {0}: give admin, member, viewer or one of its custom roles"
    )]
    UnknownRole(String),
    /// The organization is gone.
    #[error("organization not found")]
    OrganizationNotFound,
    /// No such member of the organization.
    #[error("member not found")]
    NotFound,
    /// No such invitation, or it is no longer pending.
    #[error("invitation not found")]
    InvitationNotFound,
    /// A request a rule of the membership refuses, whichever the request's caller.
    #[error(transparent)]
    Refused(#[from] MemberRule),
    /// The invitee already belongs to the organization.
    #[error("{0} is already a member")]
    AlreadyMember(Email),
    /// The invitee already has a pending invitation.
    #[error("{0} is already invited")]
    AlreadyInvited(Email),
    /// The invitation was addressed to another email than the caller's.
    #[error("the invitation was sent to another email address")]
    NotTheInvitee,
    /// The caller is an application (a machine token): an invitation names the person who
    /// sent it.
    #[error(
        "an invitation names the person who sends it: an application's machine token cannot invite"
    )]
    PersonNeeded,
    /// The caller is an API key: an invitation is accepted by a user.
    #[error("API keys cannot accept invitations")]
    NotAUser,
    /// The invitation's link has expired.
    #[error("the invitation has expired")]
    Expired,
    /// The account owns team organizations that have other members.
    #[error("you own team organizations that have other members: transfer or delete them first")]
    OwnsTeams,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The invitation's mail could not be sealed for the outbox.
    #[error("the invitation mail could not be queued")]
    Internal(#[source] CipherError),
}

/// A role change's result.
#[derive(Clone, Debug, PartialEq)]
pub struct RoleChanged {
    /// The member with the new role.
    pub member: Member,
    /// When the role changed.
    pub updated_at: OffsetDateTime,
}

/// What the page of an invitation's mailed link shows, and whom it signs in.
#[derive(Clone, Debug, PartialEq)]
pub struct InvitationLink {
    /// The invitation: organization, invited address, role.
    pub invitation: Invitation,
    /// Whether it can still be accepted, and if not why.
    pub state: InvitationState,
    /// The full name of the member who sent it.
    pub inviter: String,
    /// The account of the invited address, when there is one: the page signs it in (else it
    /// registers the address).
    pub invitee: Option<UserId>,
    /// The organization's branding while its plan includes branding, else the default look.
    pub branding: Branding,
}

/// A removal's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Removed {
    /// The user removed (or who left).
    pub user_id: UserId,
    /// When they were removed.
    pub removed_at: OffsetDateTime,
}

service_ports! {
    /// The ports [`MemberService`] uses.
    pub struct MemberPorts { members: MemberStore, roles: RoleStore, accounts: AccountStore, organizations: OrganizationStore, branding: BrandingStore, directory: DirectoryStore, cipher: SecretCipher, heavy: HeavyLanes, clock: Clock, random: Random }
}

/// Invites members, accepts invitations, changes roles and removes members.
#[derive(Clone)]
pub struct MemberService {
    ports: MemberPorts,
    mails: InvitationMails,
}

impl MemberService {
    /// A service on these ports; `public_url` is where Gatehouse is reached, for the links in invitation mails.
    pub fn new(ports: MemberPorts, public_url: String) -> Self {
        let mails = InvitationMails::new(
            InvitationMailPorts {
                accounts: ports.accounts.clone(),
                branding: ports.branding.clone(),
                cipher: ports.cipher.clone(),
                random: ports.random.clone(),
            },
            public_url,
        );
        Self { ports, mails }
    }

    /// The decisions of the member lifecycle, made `now` for a request from `origin`.
    fn lifecycle<'a>(&'a self, now: OffsetDateTime, origin: &'a Origin) -> Lifecycle<'a> {
        Lifecycle::new(self.ports.random.as_ref(), now, origin)
    }

    /// Members and pending invitations.
    pub async fn list(
        &self,
        actor: &Actor,
        filter: MemberFilter,
        page: PageRequest,
    ) -> Result<Page<Member>, MemberError> {
        actor.require(Permission::MembersRead)?;
        // A search reads every member whose name or address holds the term: a heavy request.
        let _lane = match filter.search {
            Some(_) => Some(heavy::lane(&*self.ports.heavy, actor.organization_id()).await?),
            None => None,
        };
        let now = self.ports.clock.now();
        Ok(self
            .ports
            .members
            .members(actor.organization_id(), filter, page, now)
            .await?)
    }

    /// Invites someone by email: a pending member, an invitation mailed with a one-time link,
    /// and `member.invited`. With no `role`, the organization's `settings.default_role`
    /// (which a member inviting under `allow_member_invite` may give too: it is `member` or
    /// `viewer`).
    pub async fn invite(
        &self,
        actor: &Actor,
        email: Email,
        role: Option<RoleRef>,
        origin: &Origin,
    ) -> Result<Member, MemberError> {
        let inviter = lifecycle::inviter(actor).ok_or(MemberError::PersonNeeded)?;
        let organization = self
            .ports
            .organizations
            .organization(actor.organization_id())
            .await?
            .ok_or(MemberError::OrganizationNotFound)?;
        if organization.kind == OrganizationType::Personal {
            return Err(MemberRule::PersonalWorkspace.into());
        }
        // No role named: the organization's `settings.default_role`.
        let role = match role {
            Some(role) => self.resolve(organization.id, role).await?,
            None => organization.settings.default_role.role().into(),
        };
        let role = InvitableRole::new(role).ok_or(MemberRule::OwnerNotInvited)?;
        if actor.require(Permission::MembersCreate).is_err() {
            // A member (never a viewer: the table says who) invites while the organization
            // allows it, and only as member or viewer.
            let may_invite_when_allowed =
                actor.require(Permission::MembersInviteWhenAllowed).is_ok()
                    && organization.settings.allow_member_invite;
            if !may_invite_when_allowed {
                return Err(Forbidden(Permission::MembersCreate).into());
            }
            if !matches!(
                role.role(),
                AssignedRole::BuiltIn(Role::Member | Role::Viewer)
            ) {
                return Err(MemberError::MemberInviteRole);
            }
        }
        if !actor.may_give(role.role()) {
            return Err(MemberError::RoleAboveYours(role.role().to_string()));
        }
        if self
            .ports
            .members
            .is_member_email(organization.id, &email)
            .await?
        {
            return Err(MemberError::AlreadyMember(email));
        }
        let token = self.ports.random.secret(TokenKind::Invitation);
        let (invitation, invited) = self.lifecycle(self.ports.clock.now(), origin).invite(
            actor,
            inviter,
            email.clone(),
            role.clone(),
            token.hash(),
        );
        let inviter = self.mails.inviter_name(inviter).await;
        let mail = self
            .mails
            .mail(&organization, &inviter, email.clone(), role.role(), &token)
            .await
            .map_err(MemberError::Internal)?;
        // The mail is queued with the invitation, in its transaction: the worker sends it.
        match self
            .ports
            .members
            .create_invitation(invitation, invited.event, invited.audit, mail)
            .await
        {
            Ok(()) => {}
            Err(StoreError::Conflict) => return Err(MemberError::AlreadyInvited(email)),
            // The custom role was deleted while it was being given.
            Err(StoreError::Gone) => {
                return Err(MemberError::UnknownRole(role.role().name().to_owned()))
            }
            Err(e) => return Err(e.into()),
        }
        Ok(invited.member)
    }

    /// What the page of a mailed invitation link shows: the invitation whatever became of it,
    /// who sent it, whether its address has an account, in the organization's branding.
    /// `None` for a token that names no invitation of an organization that exists.
    pub async fn invitation_link(
        &self,
        token: &str,
    ) -> Result<Option<InvitationLink>, MemberError> {
        let Some(record) = self
            .ports
            .members
            .invitation_record(&TokenHash::of(token))
            .await?
        else {
            return Ok(None);
        };
        let state = record.state(self.ports.clock.now());
        let invitation = record.invitation;
        let inviter = self.mails.inviter_name(invitation.invited_by).await;
        let invitee = self
            .ports
            .accounts
            .credentials_by_email(&invitation.email)
            .await?
            .map(|c| c.user.id);
        let branding = self
            .mails
            .branding_of(invitation.organization_id, record.plan)
            .await
            .unwrap_or_default();
        Ok(Some(InvitationLink {
            invitation,
            state,
            inviter,
            invitee,
            branding,
        }))
    }

    /// A page of the open invitations addressed to the caller's email, newest first.
    pub async fn my_invitations(
        &self,
        principal: &Principal,
        page: PageRequest,
    ) -> Result<Page<Invitation>, MemberError> {
        let email = self.email_of(principal).await?;
        let now = self.ports.clock.now();
        Ok(self
            .ports
            .members
            .invitations_for(&email, now, page)
            .await?)
    }

    /// Accepts an invitation by its id.
    pub async fn accept_by_id(
        &self,
        principal: &Principal,
        id: InvitationId,
        origin: &Origin,
    ) -> Result<Member, MemberError> {
        let invitation = self.ports.members.invitation(id).await?;
        self.accept(principal, invitation, origin).await
    }

    /// Accepts an invitation by the token of its link.
    pub async fn accept_by_token(
        &self,
        principal: &Principal,
        token: &str,
        origin: &Origin,
    ) -> Result<Member, MemberError> {
        let invitation = self
            .ports
            .members
            .invitation_by_token(&TokenHash::of(token))
            .await?;
        self.accept(principal, invitation, origin).await
    }

    async fn accept(
        &self,
        principal: &Principal,
        invitation: Option<Invitation>,
        origin: &Origin,
    ) -> Result<Member, MemberError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(MemberError::NotAUser);
        }
        let invitation = invitation.ok_or(MemberError::InvitationNotFound)?;
        let user = self.user_of(principal).await?;
        if user.email != invitation.email {
            return Err(MemberError::NotTheInvitee);
        }
        let now = self.ports.clock.now();
        if invitation.is_expired(now) {
            return Err(MemberError::Expired);
        }
        let joined = self.lifecycle(now, origin).join(
            By::Themself(user.id),
            invitation.organization_id,
            Joiner {
                user_id: user.id,
                email: &user.email,
                full_name: &user.full_name,
            },
            Joining::Invited(&invitation),
        );
        match self
            .ports
            .members
            .accept_invitation(invitation.id, user.id, now, joined.event, joined.audit)
            .await
        {
            Ok(true) => Ok(joined.member),
            // No longer pending, or its organization deleted meanwhile (its owner's account
            // with it): either way there is nothing to accept.
            Ok(false) => Err(MemberError::InvitationNotFound),
            Err(StoreError::Conflict) => Err(MemberError::AlreadyMember(user.email)),
            // The invitation's custom role was deleted meanwhile.
            Err(StoreError::Gone) => {
                Err(MemberError::UnknownRole(invitation.role.name().to_owned()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Revokes a pending invitation.
    pub async fn revoke_invitation(
        &self,
        actor: &Actor,
        id: InvitationId,
        origin: &Origin,
    ) -> Result<(), MemberError> {
        actor.require(Permission::MembersDelete)?;
        let now = self.ports.clock.now();
        let record = actor
            .audit(
                self.ports.random.as_ref(),
                now,
                AuditAction::InvitationRevoked,
                origin,
            )
            .on(TargetKind::Invitation, id);
        if self
            .ports
            .members
            .revoke_invitation(actor.organization_id(), id, now, record)
            .await?
        {
            Ok(())
        } else {
            Err(MemberError::InvitationNotFound)
        }
    }

    /// Changes a member's role. Ownership moves only through a transfer, so `owner` is neither
    /// given nor taken here.
    pub async fn change_role(
        &self,
        actor: &Actor,
        user_id: UserId,
        role: RoleRef,
        origin: &Origin,
    ) -> Result<RoleChanged, MemberError> {
        actor.require(Permission::MembersUpdate)?;
        let member = self.member_of(actor, user_id).await?;
        let role = self.resolve(actor.organization_id(), role).await?;
        let now = self.ports.clock.now();
        let change = self
            .lifecycle(now, origin)
            .change_role(actor, user_id, member, role)?;
        let role = &change.decision.member.role;
        for held in [role, &change.previous] {
            if !actor.may_give(held) {
                return Err(MemberError::RoleAboveYours(held.to_string()));
            }
        }
        // A role without `sso.manage` ends the SCIM tokens the member made, in the same write.
        let revoked = self
            .tokens_ending(actor, user_id, Some(role), now, origin)
            .await?;
        let Decision {
            member,
            event,
            audit,
        } = change.decision;
        let name = member.role.name().to_owned();
        match self
            .ports
            .members
            .change_role(
                actor.organization_id(),
                user_id,
                member.role.clone(),
                now,
                event,
                audit,
                revoked,
            )
            .await
        {
            Ok(true) => {}
            Ok(false) => return Err(MemberError::NotFound),
            // They became the owner meanwhile (a transfer): the owner's role stays.
            Err(StoreError::Conflict) => return Err(MemberRule::OwnerRoleStays.into()),
            // The custom role was deleted while it was being given.
            Err(StoreError::Gone) => return Err(MemberError::UnknownRole(name)),
            Err(e) => return Err(e.into()),
        }
        Ok(RoleChanged {
            member,
            updated_at: now,
        })
    }

    /// The member of the actor's organization who is the user.
    async fn member_of(&self, actor: &Actor, user_id: UserId) -> Result<Member, MemberError> {
        self.ports
            .members
            .member(actor.organization_id(), user_id)
            .await?
            .ok_or(MemberError::NotFound)
    }

    /// The revocations of the SCIM tokens the member made in the actor's organization that end
    /// when they are left with `role` (`None`: no longer a member).
    async fn tokens_ending(
        &self,
        actor: &Actor,
        user_id: UserId,
        role: Option<&AssignedRole>,
        now: OffsetDateTime,
        origin: &Origin,
    ) -> Result<Vec<ScimTokenRevocation>, MemberError> {
        Ok(maker_right::ending_with(
            self.ports.directory.as_ref(),
            self.ports.random.as_ref(),
            actor.organization_id(),
            user_id,
            role,
            now,
            origin,
        )
        .await?)
    }

    /// The role named, in the organization.
    async fn resolve(
        &self,
        organization_id: OrganizationId,
        role: RoleRef,
    ) -> Result<AssignedRole, MemberError> {
        let name = role.name().to_owned();
        super::iam::resolve_role(self.ports.roles.as_ref(), organization_id, role)
            .await?
            .ok_or(MemberError::UnknownRole(name))
    }

    /// The principal's user account; gone, [`MemberError::NotAUser`].
    async fn user_of(&self, principal: &Principal) -> Result<User, MemberError> {
        Ok(self
            .ports
            .accounts
            .credentials_by_id(principal.user_id())
            .await?
            .ok_or(MemberError::NotAUser)?
            .user)
    }

    /// Removes a member; a member may also remove themselves (leave). The owner stays.
    pub async fn remove(
        &self,
        actor: &Actor,
        user_id: UserId,
        origin: &Origin,
    ) -> Result<Removed, MemberError> {
        let leaving = actor.user_id() == Some(user_id);
        if !leaving {
            actor.require(Permission::MembersDelete)?;
        }
        let member = self.member_of(actor, user_id).await?;
        let now = self.ports.clock.now();
        let removed = self
            .lifecycle(now, origin)
            .leave(actor, user_id, member, leaving)?;
        // The SCIM tokens they made end with their membership, in the same write.
        let revoked = self
            .tokens_ending(actor, user_id, None, now, origin)
            .await?;
        match self
            .ports
            .members
            .remove_member(
                actor.organization_id(),
                user_id,
                removed.event,
                removed.audit,
                revoked,
            )
            .await
        {
            Ok(true) => {}
            Ok(false) => return Err(MemberError::NotFound),
            // They became the owner meanwhile (a transfer): the owner stays.
            Err(StoreError::Conflict) => return Err(MemberRule::OwnerStays.into()),
            Err(e) => return Err(e.into()),
        }
        Ok(Removed {
            user_id,
            removed_at: now,
        })
    }

    /// The organization's users (active members), for `GET /api/v1/iam/users`.
    pub async fn users(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> Result<Page<Member>, MemberError> {
        self.list(
            actor,
            MemberFilter {
                active_only: true,
                ..MemberFilter::default()
            },
            page,
        )
        .await
    }

    /// Deletes the caller's account, personal workspace and memberships; refused while they
    /// own a team with other members.
    pub async fn delete_me(
        &self,
        principal: &Principal,
        origin: &Origin,
    ) -> Result<(), MemberError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(MemberError::NotAUser);
        }
        let user = self.user_of(principal).await?;
        if !self
            .ports
            .members
            .owned_teams_with_members(user.id)
            .await?
            .is_empty()
        {
            return Err(MemberError::OwnsTeams);
        }
        let now = self.ports.clock.now();
        let revoked = self.scim_tokens_of(user.id, now, origin).await?;
        let deleted = user_event(
            self.ports.random.as_ref(),
            now,
            user.id,
            payloads::UserDeleted(payloads::user(&user)),
        );
        match self
            .ports
            .members
            .delete_user(
                user.id,
                vec![deleted],
                user_audit(
                    self.ports.random.as_ref(),
                    now,
                    user.id,
                    AuditAction::UserDeleted,
                    origin,
                )
                .on(TargetKind::User, user.id),
                revoked,
            )
            .await
        {
            Ok(()) => Ok(()),
            // A team of theirs gained a member meanwhile (an invitation accepted).
            Err(StoreError::Conflict) => Err(MemberError::OwnsTeams),
            Err(e) => Err(e.into()),
        }
    }

    /// The revocations of the SCIM tokens the user made in the teams they belong to, as an
    /// account deletion ends them (a personal workspace's go with it).
    async fn scim_tokens_of(
        &self,
        user_id: UserId,
        now: OffsetDateTime,
        origin: &Origin,
    ) -> Result<Vec<ScimTokenRevocation>, MemberError> {
        let mut revoked = Vec::new();
        let teams = OrganizationFilter {
            kind: Some(OrganizationType::Team),
            search: None,
        };
        for page in 1.. {
            let Ok(request) = PageRequest::new(Some(page), Some(i64::from(PageRequest::MAX_SIZE)))
            else {
                break;
            };
            let organizations = self
                .ports
                .organizations
                .organizations_of(user_id, teams.clone(), request)
                .await?;
            for organization in organizations.items() {
                revoked.extend(
                    maker_right::ending_with(
                        self.ports.directory.as_ref(),
                        self.ports.random.as_ref(),
                        organization.id,
                        user_id,
                        None,
                        now,
                        origin,
                    )
                    .await?,
                );
            }
            if !organizations.has_next() {
                break;
            }
        }
        Ok(revoked)
    }

    async fn email_of(&self, principal: &Principal) -> Result<Email, MemberError> {
        Ok(self.user_of(principal).await?.email)
    }
}
