//! The members use cases against mocked ports: who may invite, remove and leave, and what
//! reaches the store; the lifecycle's own decisions are `lifecycle_tests.rs`'.

use futures::executor::block_on;

use super::{
    tests::{acme, ada_acting, bob_in_acme, email, origin, ready, Mocks, ACME, BOB},
    Forbidden, MemberError, MemberRule, MemberService,
};
use crate::model::{EventType, Permission, Plan, Role};

fn members(mocks: Mocks) -> MemberService {
    MemberService::new((&mocks.ports()).into(), "https://id.example.com".to_owned())
}

/// Mocks where Acme's member Bob holds `role`.
fn bob_holds(role: Role) -> Mocks {
    let mut mocks = Mocks::new();
    mocks
        .members
        .expect_member()
        .returning(move |_, _| ready(Ok(Some(bob_in_acme(role)))));
    mocks
}

#[test]
fn a_viewer_invites_nobody_even_where_members_may() {
    let viewer = ada_acting(Role::Viewer, Plan::Free);
    let mut mocks = Mocks::new();
    mocks.organizations.expect_organization().returning(|_| {
        let mut acme = acme(Plan::Free);
        acme.settings.allow_member_invite = true;
        ready(Ok(Some(acme)))
    });
    mocks.members.expect_create_invitation().never();

    let refused =
        block_on(members(mocks).invite(&viewer, email("bob@example.com"), None, &origin()));

    assert!(matches!(
        refused,
        Err(MemberError::Forbidden(Forbidden(Permission::MembersCreate)))
    ));
}

#[test]
fn the_owner_is_not_removed_and_nothing_is_written() {
    let admin = ada_acting(Role::Admin, Plan::Free);
    let mut mocks = bob_holds(Role::Owner);
    mocks.members.expect_remove_member().never();
    mocks.directory.expect_scim_tokens().never();

    let refused = block_on(members(mocks).remove(&admin, BOB, &origin()));

    assert!(matches!(
        refused,
        Err(MemberError::Refused(MemberRule::OwnerStays))
    ));
}

#[test]
fn a_removal_writes_the_lifecycles_event_with_the_change() {
    let admin = ada_acting(Role::Admin, Plan::Free);
    let mut mocks = bob_holds(Role::Member);
    mocks
        .directory
        .expect_scim_tokens()
        .returning(|_| ready(Ok(Vec::new())));
    mocks
        .members
        .expect_remove_member()
        .withf(|organization, user, event, audit, revoked| {
            *organization == ACME
                && *user == BOB
                && event.event_type == EventType::MemberRemoved
                && event.data["left"] == false
                && audit
                    .target
                    .as_ref()
                    .is_some_and(|t| t.id == BOB.to_string())
                && revoked.is_empty()
        })
        .times(1)
        .returning(|_, _, _, _, _| ready(Ok(true)));

    let removed = block_on(members(mocks).remove(&admin, BOB, &origin())).unwrap();

    assert_eq!(removed.user_id, BOB);
}

#[test]
fn a_plain_member_changes_nobodys_role() {
    let member = ada_acting(Role::Member, Plan::Free);
    let mut mocks = bob_holds(Role::Admin);
    mocks.members.expect_change_role().never();

    let refused =
        block_on(members(mocks).change_role(&member, BOB, "viewer".parse().unwrap(), &origin()));

    assert!(matches!(refused, Err(MemberError::Forbidden(_))));
}
