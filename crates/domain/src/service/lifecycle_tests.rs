//! The member lifecycle's decisions, one rule per test: what each way in decides for an
//! invitation, a joining, a removal and a role change, with nothing but a counter for ids.

use serde_json::json;
use time::Duration;
use uuid::Uuid;

use super::{
    lifecycle::{inviter, By, Decision, Joiner, Joining, Lifecycle},
    tests::{ada_acting, email, full_name, now, origin, ACME, ADA},
    Actor, DirectoryClient, MemberRule,
};
use crate::{
    mock::MockRandom,
    model::{
        AssignedRole, AuditAction, AuditActor, EventType, InvitableRole, Invitation, InvitationId,
        Member, MemberStatus, NewInvitation, OrganizationName, Plan, Role, ScimTokenId, Slug,
        TargetKind, TokenHash, UserId,
    },
};

const BOB: UserId = UserId::from_uuid(Uuid::from_u128(0xb0b));
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

/// Bob, an active member of Acme with `role` since a month ago.
fn bob(role: Role) -> Member {
    let joined_at = now() - Duration::days(30);
    Member {
        organization_id: ACME,
        user_id: Some(BOB),
        email: email("bob@example.com"),
        full_name: Some(full_name("Bob Babbage")),
        role: role.into(),
        status: MemberStatus::Active,
        invitation_id: None,
        invited_at: None,
        invited_by: None,
        accepted_at: Some(joined_at),
        joined_at,
    }
}

/// Ada's invitation of bob@example.com to Acme as a viewer, sent yesterday.
fn bobs_invitation() -> Invitation {
    let invited_at = now() - Duration::days(1);
    Invitation {
        id: InvitationId::from_uuid(Uuid::from_u128(0x1417)),
        organization_id: ACME,
        organization_name: OrganizationName::parse("Acme").unwrap(),
        organization_slug: Slug::parse("acme").unwrap(),
        email: email("bob@example.com"),
        role: Role::Viewer.into(),
        invited_by: ADA,
        invited_at,
        expires_at: NewInvitation::expiry(invited_at),
    }
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

    assert_eq!(invitation.organization_id, ACME);
    assert_eq!(invitation.invited_by, ADA);
    assert_eq!(invitation.token_hash, TokenHash::of("ghi_token"));
    assert_eq!(invitation.expires_at, now() + Duration::days(7));
    let member = &invited.member;
    assert_eq!(member.status, MemberStatus::Pending);
    assert_eq!(member.user_id, None);
    assert_eq!(member.invitation_id, Some(invitation.id));
    assert_eq!(member.role, AssignedRole::from(Role::Member));
    assert_eq!(member.invited_by, Some(ADA));
    assert_eq!(invited.event.event_type, EventType::MemberInvited);
    assert_eq!(invited.event.organization_id, Some(ACME));
    assert_eq!(invited.event.user_id, Some(ADA));
    assert_eq!(invited.event.data["status"], json!("pending"));
    assert_eq!(invited.audit.action, AuditAction::MemberInvited);
    assert_eq!(invited.audit.actor, AuditActor::User(ADA));
    assert_eq!(invited.audit.organization_id, Some(ACME));
    let target = invited.audit.target.unwrap();
    assert_eq!(target.kind, TargetKind::Invitation);
    assert_eq!(target.id, invitation.id.to_string());
}

#[test]
fn the_directorys_invitation_is_the_directorys_change_and_names_no_user_in_its_event() {
    let random = counting();
    let origin = origin();

    let (_, invited) = Lifecycle::new(&random, now(), &origin).invite(
        &directory(),
        ADA,
        email("bob@example.com"),
        InvitableRole::new(Role::Viewer).unwrap(),
        TokenHash::of("ghi_token"),
    );

    assert_eq!(invited.event.user_id, None);
    assert_eq!(invited.audit.actor, AuditActor::Scim(OKTA));
}

#[test]
fn accepting_an_invitation_joins_with_its_role_and_keeps_who_invited_and_when() {
    let invitation = bobs_invitation();

    let joined = bob_joins(By::Themself(BOB), Joining::Invited(&invitation));

    let member = &joined.member;
    assert_eq!(member.status, MemberStatus::Active);
    assert_eq!(member.user_id, Some(BOB));
    assert_eq!(member.role, AssignedRole::from(Role::Viewer));
    assert_eq!(member.invitation_id, Some(invitation.id));
    assert_eq!(member.invited_at, Some(invitation.invited_at));
    assert_eq!(member.invited_by, Some(ADA));
    assert_eq!(member.accepted_at, Some(now()));
    assert_eq!(joined.event.event_type, EventType::MemberJoined);
    assert_eq!(joined.event.organization_id, Some(ACME));
    assert_eq!(joined.event.user_id, Some(BOB));
    assert_eq!(joined.event.data["full_name"], json!("Bob Babbage"));
    // The invitee acts as themself, in the organization they join.
    assert_eq!(joined.audit.action, AuditAction::MemberJoined);
    assert_eq!(joined.audit.actor, AuditActor::User(BOB));
    assert_eq!(joined.audit.organization_id, Some(ACME));
    assert_eq!(joined.audit.target.unwrap().id, BOB.to_string());
}

#[test]
fn the_directory_provisions_a_member_of_a_verified_domain_without_an_invitation() {
    let directory = directory();
    let role = AssignedRole::from(Role::Member);

    let joined = bob_joins(By::Actor(&directory), Joining::Provisioned(&role));

    assert_eq!(joined.member.status, MemberStatus::Active);
    assert_eq!(joined.member.role, role);
    assert_eq!(joined.member.invitation_id, None);
    assert_eq!(joined.member.invited_by, None);
    assert_eq!(joined.event.user_id, None);
    assert_eq!(joined.audit.actor, AuditActor::Scim(OKTA));
    assert_eq!(joined.audit.target.unwrap().kind, TargetKind::Member);
}

#[test]
fn the_owner_is_neither_removed_nor_leaves() {
    let random = counting();
    let origin = origin();
    let lifecycle = Lifecycle::new(&random, now(), &origin);
    let admin = ada_acting(Role::Admin, Plan::Free);

    let refused = lifecycle.leave(&admin, BOB, bob(Role::Owner), false);

    assert_eq!(refused.unwrap_err(), MemberRule::OwnerStays);
    assert_eq!(
        lifecycle
            .leave(&directory(), BOB, bob(Role::Owner), false)
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
        .leave(&admin, BOB, bob(Role::Member), false)
        .unwrap();
    let left = lifecycle
        .leave(&admin, BOB, bob(Role::Member), true)
        .unwrap();

    assert_eq!(removed.event.event_type, EventType::MemberRemoved);
    assert_eq!(removed.event.data["left"], json!(false));
    assert_eq!(left.event.data["left"], json!(true));
    assert_eq!(removed.event.data["user_id"], json!(BOB.to_string()));
    assert_eq!(removed.audit.action, AuditAction::MemberRemoved);
    assert_eq!(removed.audit.actor, AuditActor::User(ADA));
    let target = removed.audit.target.unwrap();
    assert_eq!(
        (target.kind, target.id),
        (TargetKind::Member, BOB.to_string())
    );
}

#[test]
fn ownership_is_neither_given_nor_taken_by_a_role_change() {
    let random = counting();
    let origin = origin();
    let lifecycle = Lifecycle::new(&random, now(), &origin);
    let admin = ada_acting(Role::Admin, Plan::Free);

    let given = lifecycle.change_role(&admin, BOB, bob(Role::Member), Role::Owner.into());
    let taken = lifecycle.change_role(&admin, BOB, bob(Role::Owner), Role::Member.into());

    assert_eq!(given.unwrap_err(), MemberRule::OwnerNotGiven);
    assert_eq!(taken.unwrap_err(), MemberRule::OwnerRoleStays);
}

#[test]
fn a_role_change_tells_the_new_role_and_the_previous_one() {
    let random = counting();
    let origin = origin();
    let admin = ada_acting(Role::Admin, Plan::Free);

    let change = Lifecycle::new(&random, now(), &origin)
        .change_role(&admin, BOB, bob(Role::Member), Role::Viewer.into())
        .unwrap();

    assert_eq!(change.previous, AssignedRole::from(Role::Member));
    let decision = change.decision;
    assert_eq!(decision.member.role, AssignedRole::from(Role::Viewer));
    assert_eq!(decision.event.event_type, EventType::MemberRoleChanged);
    assert_eq!(decision.event.data["role"], json!("viewer"));
    assert_eq!(decision.event.data["previous_role"], json!("member"));
    assert_eq!(decision.audit.action, AuditAction::MemberRoleChanged);
    assert_eq!(decision.audit.target.unwrap().id, BOB.to_string());
}
