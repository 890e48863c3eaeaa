//! The member lifecycle, decided once for every way in: an invitation sent, a person joining,
//! a member removed or leaving, a role changed. The members API, an invitation's acceptance,
//! directory sync (SCIM) and single sign-on's just-in-time provisioning all decide here.
//!
//! Each decision is pure (its ids come from the [`Random`] port it is given): it returns the
//! member as the API shows it afterwards, with the event and the audit record of the change,
//! which the caller's store writes with the change in one transaction. The rules of the
//! membership ([`MemberRule`]) are kept here and answer `422` whoever asks; whether the caller
//! may ask at all (a permission, a role no higher than their own) is their use case's check.

use time::OffsetDateTime;

use super::{event, payloads, payloads::Payload, user_audit, Actor};
use crate::{
    model::{
        AssignedRole, AuditAction, AuditRecord, Email, FullName, InvitableRole, Invitation, Member,
        MemberStatus, NewEvent, NewInvitation, OpenInvitation, OrganizationId, Origin, Role,
        TargetKind, TokenHash, UserId,
    },
    ports::Random,
};

/// The rules of the membership a request can break, whoever asks: each answers `422` with its
/// own words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MemberRule {
    /// A personal workspace has its owner and nobody else.
    #[error("a personal workspace has only its owner: invite people into a team")]
    PersonalWorkspace,
    /// Nobody is invited as the owner.
    #[error("owner cannot be invited: an organization has one owner")]
    OwnerNotInvited,
    /// Nobody is given the owner's role: ownership moves only by a transfer.
    #[error("the owner role cannot be given: an organization has one owner")]
    OwnerNotGiven,
    /// The owner's role is not changed: ownership moves only by a transfer.
    #[error("the owner's role cannot be changed")]
    OwnerRoleStays,
    /// The owner's membership is not ended: ownership moves only by a transfer.
    #[error("the owner cannot be removed: transfer ownership or delete the organization")]
    OwnerStays,
}

/// Who changes the membership: the event names their user, the audit log names them.
#[derive(Clone, Copy)]
pub(crate) enum By<'a> {
    /// A caller acting in the organization: a member, an application, the directory.
    Actor(&'a Actor),
    /// The person themself, as they sign in: accepting their invitation, or provisioned by
    /// single sign-on.
    Themself(UserId),
}

/// One decision: the member as the API shows them afterwards, with the change's event and
/// audit record.
#[derive(Debug)]
pub(crate) struct Decision {
    /// The member (or invitee) after the change.
    pub member: Member,
    /// The change's outbox event.
    pub event: NewEvent,
    /// The change's audit record.
    pub audit: AuditRecord,
}

/// A role change decided: the member with the new role, and the role they held.
#[derive(Debug)]
pub(crate) struct RoleChange {
    /// The change, its member holding the new role.
    pub decision: Decision,
    /// The role the member held before.
    pub previous: AssignedRole,
}

/// A person about to join: their account.
#[derive(Clone, Copy)]
pub(crate) struct Joiner<'a> {
    /// Their account's id.
    pub user_id: UserId,
    /// Their account's address.
    pub email: &'a Email,
    /// Their account's name.
    pub full_name: &'a FullName,
}

/// How a person joins an organization.
#[derive(Clone, Copy)]
pub(crate) enum Joining<'a> {
    /// They accept this invitation, and get the role it offers.
    Invited(&'a Invitation),
    /// The organization's directory or identity provider, which speaks for the address's
    /// verified domain, brings them in with this role.
    Provisioned(&'a AssignedRole),
}

/// Who an invitation the actor sends names as its sender: the member who sends it, or for the
/// directory the member who made its token. `None` for an application's or a service account's
/// token: an invitation names a person.
pub(crate) fn inviter(actor: &Actor) -> Option<UserId> {
    match actor {
        Actor::Directory(directory) => Some(directory.created_by),
        actor => actor.user_id(),
    }
}

/// The moment and the request of one change to a membership, and where its ids come from.
pub(crate) struct Lifecycle<'a> {
    random: &'a dyn Random,
    now: OffsetDateTime,
    origin: &'a Origin,
}

impl<'a> Lifecycle<'a> {
    /// Decisions made `now`, for the request from `origin`.
    pub(crate) fn new(random: &'a dyn Random, now: OffsetDateTime, origin: &'a Origin) -> Self {
        Self {
            random,
            now,
            origin,
        }
    }

    /// An invitation to `email` with `role` and the hash of its mailed token, sent by
    /// [`inviter`] of `actor`: a pending member, `member.invited`, audited on the invitation.
    /// It can be accepted for [`INVITATION_TTL_DAYS`](crate::model::INVITATION_TTL_DAYS) days.
    /// A live invitation of the address is [`OpenInvitation::Replaced`] when the directory
    /// invites, else [`OpenInvitation::Kept`] (and this one refused).
    pub(crate) fn invite(
        &self,
        actor: &Actor,
        invited_by: UserId,
        email: Email,
        role: InvitableRole,
        token_hash: TokenHash,
    ) -> (NewInvitation, Decision) {
        let invitation = NewInvitation {
            id: self.random.uuid().into(),
            organization_id: actor.organization_id(),
            email,
            role,
            token_hash,
            invited_by,
            invited_at: self.now,
            expires_at: NewInvitation::expiry(self.now),
            // The directory speaks for the address; a person learns that it is invited already.
            open: match actor {
                Actor::Directory(_) => OpenInvitation::Replaced,
                _ => OpenInvitation::Kept,
            },
        };
        let member = Member {
            organization_id: invitation.organization_id,
            user_id: None,
            email: invitation.email.clone(),
            full_name: None,
            role: invitation.role.role().clone(),
            status: MemberStatus::Pending,
            invitation_id: Some(invitation.id),
            invited_at: Some(self.now),
            invited_by: Some(invited_by),
            accepted_at: None,
            joined_at: self.now,
        };
        let event = actor.event(
            self.random,
            self.now,
            payloads::MemberInvited(payloads::member(&member)),
        );
        let audit = actor
            .audit(
                self.random,
                self.now,
                AuditAction::MemberInvited,
                self.origin,
            )
            .on(TargetKind::Invitation, invitation.id);
        (
            invitation,
            Decision {
                member,
                event,
                audit,
            },
        )
    }

    /// `joiner` becomes an active member of the organization, `joining` one way or the other:
    /// `member.joined`, audited on the member.
    pub(crate) fn join(
        &self,
        by: By<'_>,
        organization_id: OrganizationId,
        joiner: Joiner<'_>,
        joining: Joining<'_>,
    ) -> Decision {
        let (role, invitation) = match joining {
            Joining::Invited(invitation) => (invitation.role.clone(), Some(invitation)),
            Joining::Provisioned(role) => (role.clone(), None),
        };
        let member = Member {
            organization_id,
            user_id: Some(joiner.user_id),
            email: joiner.email.clone(),
            full_name: Some(joiner.full_name.clone()),
            role,
            status: MemberStatus::Active,
            invitation_id: invitation.map(|invitation| invitation.id),
            invited_at: invitation.map(|invitation| invitation.invited_at),
            invited_by: invitation.map(|invitation| invitation.invited_by),
            accepted_at: Some(self.now),
            joined_at: self.now,
        };
        let payload = payloads::MemberJoined(payloads::member(&member));
        let recorded = self.record(
            by,
            organization_id,
            payload,
            AuditAction::MemberJoined,
            joiner.user_id,
        );
        recorded.of(member)
    }

    /// `member` (the user `user_id`) leaves the organization: removed by `actor`, or `left` of their own accord.
    /// `member.removed`, audited on the member. Never the owner: ownership moves only by a
    /// transfer.
    pub(crate) fn leave(
        &self,
        actor: &Actor,
        user_id: UserId,
        member: Member,
        left: bool,
    ) -> Result<Decision, MemberRule> {
        if member.role.is(Role::Owner) {
            return Err(MemberRule::OwnerStays);
        }
        let payload = payloads::MemberRemoved {
            member: payloads::member(&member),
            removed_at: self.now,
            left,
        };
        let recorded = self.by_actor(actor, payload, AuditAction::MemberRemoved, user_id);
        Ok(recorded.of(member))
    }

    /// `member` (the user `user_id`) gets `role` from `actor`: `member.role_changed`, audited on the member.
    /// Ownership moves only by a transfer: `owner` is neither given nor taken here.
    pub(crate) fn change_role(
        &self,
        actor: &Actor,
        user_id: UserId,
        mut member: Member,
        role: AssignedRole,
    ) -> Result<RoleChange, MemberRule> {
        if role.is(Role::Owner) {
            return Err(MemberRule::OwnerNotGiven);
        }
        if member.role.is(Role::Owner) {
            return Err(MemberRule::OwnerRoleStays);
        }
        let previous = std::mem::replace(&mut member.role, role);
        let payload = payloads::MemberRoleChanged {
            member: payloads::member(&member),
            previous_role: &previous,
        };
        let recorded = self.by_actor(actor, payload, AuditAction::MemberRoleChanged, user_id);
        Ok(RoleChange {
            decision: recorded.of(member),
            previous,
        })
    }

    /// The event and the audit record of a change the actor makes to the member `user_id`.
    fn by_actor(
        &self,
        actor: &Actor,
        payload: impl Payload,
        action: AuditAction,
        user_id: UserId,
    ) -> Recorded {
        let organization_id = actor.organization_id();
        self.record(By::Actor(actor), organization_id, payload, action, user_id)
    }

    /// The event and the audit record of a change to the member `user_id`.
    fn record(
        &self,
        by: By<'_>,
        organization_id: OrganizationId,
        payload: impl Payload,
        action: AuditAction,
        user_id: UserId,
    ) -> Recorded {
        let (event, audit) = match by {
            By::Actor(actor) => (
                actor.event(self.random, self.now, payload),
                actor.audit(self.random, self.now, action, self.origin),
            ),
            By::Themself(themself) => (
                event(
                    self.random,
                    self.now,
                    Some(organization_id),
                    Some(themself),
                    payload,
                ),
                user_audit(self.random, self.now, themself, action, self.origin)
                    .in_organization(organization_id),
            ),
        };
        Recorded {
            event,
            audit: audit.on(TargetKind::Member, user_id),
        }
    }
}

/// A change's event and audit record, before its member is told.
struct Recorded {
    event: NewEvent,
    audit: AuditRecord,
}

impl Recorded {
    /// The decision about `member`.
    fn of(self, member: Member) -> Decision {
        Decision {
            member,
            event: self.event,
            audit: self.audit,
        }
    }
}
