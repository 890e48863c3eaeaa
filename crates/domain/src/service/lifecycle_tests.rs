//! The member lifecycle's decisions, one rule per test: what each way in decides for an
//! invitation, a joining, a removal and a role change, with nothing but a counter for ids.

use serde_json::json;
use time::Duration;
use uuid::Uuid;

use super::{
    lifecycle::{inviter, By, Decision, Joiner, Joining, Lifecycle},
    tests::{
        ada_acting, bob_in_acme, bobs_invitation, email, full_name, now, origin, ACME, ADA, BOB,
    },
    Actor, DirectoryClient, MemberRule,
};
use crate::{
    mock::MockRandom,
    model::{
        AssignedRole, AuditAction, AuditActor, EventType, InvitableRole, Member, MemberStatus,
        OpenInvitation, OrganizationId, Plan, Role, ScimTokenId, TargetKind, TokenHash, UserId,
    },
};

const OKTA: ScimTokenId = ScimTokenId::from_uuid(Uuid::from_u128(0x0c7a));

/// Ids counted up from 1.
fn counting() -> MockRandom {
    let mut random = MockRandom::new();
    let mut issued: u128 = 0;
    random.expect_uuid().returning(move || {
        issued += 1;
        Uuid::from_u128(issued)
    });
    random
}

/// Acme's directory, through a SCIM token Ada made.
fn directory() -> Actor {
    Actor::Directory(DirectoryClient {
        token_id: OKTA,
        organization_id: ACME,
        plan: Plan::Business,
        created_by: ADA,
    })
}

/// A decision's event: its type, organization and user.
fn event_of(decision: &Decision) -> (EventType, Option<OrganizationId>, Option<UserId>) {
    let event = &decision.event;
    (event.event_type, event.organization_id, event.user_id)
}

/// A decision's audit record: its action, actor and target, in Acme.
fn audit_of(decision: &Decision) -> (AuditAction, AuditActor, Option<(TargetKind, String)>) {
    let audit = &decision.audit;
    assert_eq!(audit.organization_id, Some(ACME));
    let target = audit.target.clone().map(|target| (target.kind, target.id));
    (audit.action, audit.actor, target)
}

/// The audit target of Bob's membership.
fn bobs_membership() -> Option<(TargetKind, String)> {
    Some((TargetKind::Member, BOB.to_string()))
}

/// Bob joins Acme, as `by` decides, `joining` one way or the other.
fn bob_joins(by: By<'_>, joining: Joining<'_>) -> Decision {
    let random = counting();
    let origin = origin();
    Lifecycle::new(&random, now(), &origin).join(
        by,
        ACME,
        Joiner {
            user_id: BOB,
            email: &email("bob@example.com"),
            full_name: &full_name("Bob Babbage"),
        },
        joining,
    )
}

#[test]
fn an_invitation_names_the_member_who_sends_it_or_the_one_who_made_the_directorys_token() {
    assert_eq!(inviter(&ada_acting(Role::Admin, Plan::Free)), Some(ADA));
    assert_eq!(inviter(&directory()), Some(ADA));
}

#[test]
fn an_invitation_is_a_pending_member_for_seven_days_announced_and_audited_on_the_invitation() {
    let random = counting();
    let origin = origin();
    let ada = ada_acting(Role::Admin, Plan::Free);
    let role = InvitableRole::new(Role::Member).unwrap();

    let (invitation, invited) = Lifecycle::new(&random, now(), &origin).invite(
        &ada,
        ADA,
        email("bob@example.com"),
        role,
        TokenHash::of("ghi_token"),
    );

    assert_eq!(
        (invitation.organization_id, invitation.invited_by),
        (ACME, ADA)
    );
    assert_eq!(invitation.token_hash, TokenHash::of("ghi_token"));
    assert_eq!(invitation.expires_at, now() + Duration::days(7));
    assert_eq!(invitation.open, OpenInvitation::Kept);
    assert_eq!(
        invited.member,
        Member {
            organization_id: ACME,
            user_id: None,
            email: email("bob@example.com"),
            full_name: None,
            role: Role::Member.into(),
            status: MemberStatus::Pending,
            invitation_id: Some(invitation.id),
            invited_at: Some(now()),
            invited_by: Some(ADA),
            accepted_at: None,
            joined_at: now(),
        }
    );
    assert_eq!(invited.event.data["status"], json!("pending"));
    assert_eq!(
        event_of(&invited),
        (EventType::MemberInvited, Some(ACME), Some(ADA))
    );
    assert_eq!(
        audit_of(&invited),
        (
            AuditAction::MemberInvited,
            AuditActor::User(ADA),
            Some((TargetKind::Invitation, invitation.id.to_string()))
        )
    );
}

#[test]
fn the_directorys_invitation_is_the_directorys_change_and_replaces_one_still_open() {
    let random = counting();
    let origin = origin();

    let (invitation, invited) = Lifecycle::new(&random, now(), &origin).invite(
        &directory(),
        ADA,
        email("bob@example.com"),
        InvitableRole::new(Role::Viewer).unwrap(),
        TokenHash::of("ghi_token"),
    );

    assert_eq!(invited.event.user_id, None);
    assert_eq!(invited.audit.actor, AuditActor::Scim(OKTA));
    // The directory speaks for the address: its invitation replaces one still open.
    assert_eq!(invitation.open, OpenInvitation::Replaced);
}

#[test]
fn accepting_an_invitation_joins_with_its_role_and_keeps_who_invited_and_when() {
    let invitation = bobs_invitation(Role::Viewer);

    let joined = bob_joins(By::Themself(BOB), Joining::Invited(&invitation));

    assert_eq!(
        joined.member,
        Member {
            organization_id: ACME,
            user_id: Some(BOB),
            email: email("bob@example.com"),
            full_name: Some(full_name("Bob Babbage")),
            role: Role::Viewer.into(),
            status: MemberStatus::Active,
            invitation_id: Some(invitation.id),
            invited_at: Some(invitation.invited_at),
            invited_by: Some(ADA),
            accepted_at: Some(now()),
            joined_at: now(),
        }
    );
    assert_eq!(joined.event.data["full_name"], json!("Bob Babbage"));
    // The invitee acts as themself, in the organization they join.
    assert_eq!(
        event_of(&joined),
        (EventType::MemberJoined, Some(ACME), Some(BOB))
    );
    assert_eq!(
        audit_of(&joined),
        (
            AuditAction::MemberJoined,
            AuditActor::User(BOB),
            bobs_membership()
        )
    );
}

#[test]
fn the_directory_provisions_a_member_of_a_verified_domain_without_an_invitation() {
    let directory = directory();
    let role = AssignedRole::from(Role::Member);

    let joined = bob_joins(By::Actor(&directory), Joining::Provisioned(&role));

    assert_eq!(
        (joined.member.status, &joined.member.role),
        (MemberStatus::Active, &role)
    );
    assert_eq!(
        (joined.member.invitation_id, joined.member.invited_by),
        (None, None)
    );
    // The directory's change, which names no user.
    assert_eq!(
        event_of(&joined),
        (EventType::MemberJoined, Some(ACME), None)
    );
    assert_eq!(
        audit_of(&joined),
        (
            AuditAction::MemberJoined,
            AuditActor::Scim(OKTA),
            bobs_membership()
        )
    );
}

#[test]
fn the_owner_is_neither_removed_nor_leaves() {
    let random = counting();
    let origin = origin();
    let lifecycle = Lifecycle::new(&random, now(), &origin);
    let admin = ada_acting(Role::Admin, Plan::Free);

    let refused = lifecycle.leave(&admin, BOB, bob_in_acme(Role::Owner), false);

    assert_eq!(refused.unwrap_err(), MemberRule::OwnerStays);
    assert_eq!(
        lifecycle
            .leave(&directory(), BOB, bob_in_acme(Role::Owner), false)
            .unwrap_err(),
        MemberRule::OwnerStays
    );
}

#[test]
fn a_removal_says_whether_the_member_left_of_their_own_accord() {
    let random = counting();
    let origin = origin();
    let lifecycle = Lifecycle::new(&random, now(), &origin);
    let admin = ada_acting(Role::Admin, Plan::Free);

    let removed = lifecycle
        .leave(&admin, BOB, bob_in_acme(Role::Member), false)
        .unwrap();
    let left = lifecycle
        .leave(&admin, BOB, bob_in_acme(Role::Member), true)
        .unwrap();

    assert_eq!(removed.event.data["left"], json!(false));
    assert_eq!(left.event.data["left"], json!(true));
    assert_eq!(removed.event.data["user_id"], json!(BOB.to_string()));
    assert_eq!(
        event_of(&removed),
        (EventType::MemberRemoved, Some(ACME), Some(ADA))
    );
    assert_eq!(
        audit_of(&removed),
        (
            AuditAction::MemberRemoved,
            AuditActor::User(ADA),
            bobs_membership()
        )
    );
}

#[test]
fn ownership_is_neither_given_nor_taken_by_a_role_change() {
    let random = counting();
    let origin = origin();
    let lifecycle = Lifecycle::new(&random, now(), &origin);
    let admin = ada_acting(Role::Admin, Plan::Free);

    let given = lifecycle.change_role(&admin, BOB, bob_in_acme(Role::Member), Role::Owner.into());
    let taken = lifecycle.change_role(&admin, BOB, bob_in_acme(Role::Owner), Role::Member.into());

    assert_eq!(given.unwrap_err(), MemberRule::OwnerNotGiven);
    assert_eq!(taken.unwrap_err(), MemberRule::OwnerRoleStays);
}

#[test]
fn a_role_change_tells_the_new_role_and_the_previous_one() {
    let random = counting();
    let origin = origin();
    let admin = ada_acting(Role::Admin, Plan::Free);

    let change = Lifecycle::new(&random, now(), &origin)
        .change_role(&admin, BOB, bob_in_acme(Role::Member), Role::Viewer.into())
        .unwrap();

    assert_eq!(change.previous, AssignedRole::from(Role::Member));
    let decision = change.decision;
    assert_eq!(decision.member.role, AssignedRole::from(Role::Viewer));
    assert_eq!(decision.event.data["role"], json!("viewer"));
    assert_eq!(decision.event.data["previous_role"], json!("member"));
    assert_eq!(
        event_of(&decision),
        (EventType::MemberRoleChanged, Some(ACME), Some(ADA))
    );
    assert_eq!(
        audit_of(&decision),
        (
            AuditAction::MemberRoleChanged,
            AuditActor::User(ADA),
            bobs_membership()
        )
    );
}
