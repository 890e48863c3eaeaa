//! Ownership transfer: the owner hands a team organization to another active member, with
//! their password. The new owner is `owner`, the old one `admin`; then the old owner may leave
//! the organization or delete their account.

use time::OffsetDateTime;

use super::{auth::CheckError, payloads, Actor, AuthService, Forbidden, LockedOut, Principal};
use crate::{
    model::{
        AccountKey, AssignedRole, AuditAction, Member, OrganizationType, Origin, Permission, Role,
        TargetKind, UserId,
    },
    ports::{service_ports, StoreError},
};

/// Why ownership did not move.
#[derive(Debug, thiserror::Error)]
pub enum TransferError {
    /// The caller is not the owner (or acts with a token whose scopes do not grant it).
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The owner's API key: ownership is handed over by the owner signed in, who gives their
    /// password.
    #[error("ownership is handed over by the owner signed in, not by an API key")]
    PersonNeeded,
    /// The password is not the owner's.
    #[error("the password is not correct")]
    WrongPassword,
    /// Too many wrong passwords: the account is locked for a while.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// No such active member of the organization (a pending invitation included).
    #[error("member not found")]
    NotFound,
    /// A personal workspace lives with its owner: it is not handed over.
    #[error("a personal workspace lives with its owner: it cannot be handed over")]
    PersonalWorkspace,
    /// The owner named themself as the new owner.
    #[error("user_id is you: you already own the organization")]
    ToSelf,
    /// The owner or the new owner changed while the transfer ran: nothing moved.
    #[error("the organization's members changed meanwhile: nothing was transferred, try again")]
    Changed,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The password could not be checked.
    #[error("the password could not be checked")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

from_refusals!(TransferError: CheckError);

/// What a transfer did.
#[derive(Clone, Debug, PartialEq)]
pub struct Transferred {
    /// The new owner.
    pub owner: Member,
    /// The old owner, now an admin.
    pub previous_owner: Member,
    /// When ownership moved.
    pub transferred_at: OffsetDateTime,
}

service_ports! {
    /// The ports [`OwnershipService`] uses.
    pub struct OwnershipPorts { members: MemberStore, accounts: AccountStore, organizations: OrganizationStore, clock: Clock, random: Random }
}

/// Hands organizations from their owner to another member.
#[derive(Clone)]
pub struct OwnershipService {
    ports: OwnershipPorts,
    /// Checks the owner's password, counting a wrong one against the account.
    auth: AuthService,
}

impl OwnershipService {
    /// A service on these ports, checking passwords as `auth` does.
    pub fn new(ports: OwnershipPorts, auth: AuthService) -> Self {
        Self { ports, auth }
    }

    /// Makes the active member `to` the owner and the caller, the owner, an admin: two
    /// `member.role_changed` events and one `organization.ownership_transferred` record, in
    /// one transaction. Only the owner, signed in, with their password; never a personal
    /// workspace.
    pub async fn transfer(
        &self,
        actor: &Actor,
        to: UserId,
        password: String,
        origin: &Origin,
    ) -> Result<Transferred, TransferError> {
        actor.require(Permission::OwnershipTransfer)?;
        let Actor::Member {
            principal: Principal::User { user_id: from, .. },
            ..
        } = actor
        else {
            return Err(TransferError::PersonNeeded);
        };
        let from = *from;
        let organization_id = actor.organization_id();
        let organization = self
            .ports
            .organizations
            .organization(organization_id)
            .await?
            .ok_or(TransferError::NotFound)?;
        if organization.kind == OrganizationType::Personal {
            return Err(TransferError::PersonalWorkspace);
        }
        // The password before anything about the new owner: a wrong one learns nothing.
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(from)
            .await?
            .ok_or(TransferError::PersonNeeded)?;
        let account = AccountKey::for_email(credentials.user.email.as_ref());
        let right = self
            .auth
            .check_password(&account, password, credentials.password_hash, true)
            .await?;
        if !right {
            return Err(TransferError::WrongPassword);
        }
        if to == from {
            return Err(TransferError::ToSelf);
        }
        let member = |user| self.ports.members.member(organization_id, user);
        let mut owner = member(to).await?.ok_or(TransferError::NotFound)?;
        let mut previous_owner = member(from).await?.ok_or(TransferError::Changed)?;
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let role_changed = |member: &Member, previous: AssignedRole| {
            actor.event(
                random,
                now,
                payloads::MemberRoleChanged {
                    member: payloads::member(member),
                    previous_role: &previous,
                },
            )
        };
        let was = std::mem::replace(&mut owner.role, Role::Owner.into());
        previous_owner.role = Role::Admin.into();
        let events = vec![
            role_changed(&owner, was),
            role_changed(&previous_owner, Role::Owner.into()),
        ];
        let record = actor
            .audit(random, now, AuditAction::OwnershipTransferred, origin)
            .on(TargetKind::Member, to);
        if !self
            .ports
            .members
            .transfer_ownership(organization_id, from, to, now, events, record)
            .await?
        {
            return Err(TransferError::Changed);
        }
        Ok(Transferred {
            owner,
            previous_owner,
            transferred_at: now,
        })
    }
}
