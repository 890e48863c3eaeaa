//! Heavy requests take one of their organization's lanes, against mocked ports.

use futures::executor::block_on;

use super::{
    tests::{ada_acting, ready, Mocks},
    AuditLogError, AuditLogService, Busy, MemberError, MemberService,
};
use crate::{
    model::{AuditAction, AuditFilter, MemberFilter, Page, PageRequest, Plan, Role, SearchTerm},
    ports::HeavyLane,
};

fn searching(term: &str) -> MemberFilter {
    MemberFilter {
        search: SearchTerm::parse(term).unwrap(),
        ..MemberFilter::default()
    }
}

fn members(mocks: Mocks) -> MemberService {
    MemberService::new((&mocks.ports()).into(), "https://id.example.com".to_owned())
}

#[test]
fn a_member_search_runs_in_one_of_its_organizations_heavy_lanes() {
    let actor = ada_acting(Role::Admin, Plan::Free);
    let organization = actor.organization_id();
    let mut mocks = Mocks::new();
    mocks
        .heavy
        .expect_enter()
        .withf(move |org| *org == organization)
        .times(1)
        .returning(|_| ready(Some(HeavyLane::new(()))));
    mocks
        .members
        .expect_members()
        .times(1)
        .returning(|_, _, page, _| ready(Ok(Page::new(Vec::new(), 0, page))));
    let page = block_on(members(mocks).list(&actor, searching("zzqx"), PageRequest::default()));
    assert_eq!(page.unwrap().total(), 0);
}

#[test]
fn a_member_search_that_finds_no_free_lane_is_refused_and_reads_nothing() {
    let actor = ada_acting(Role::Admin, Plan::Free);
    let mut mocks = Mocks::new();
    mocks.heavy.expect_enter().returning(|_| ready(None));
    mocks.members.expect_members().never();
    let refused = block_on(members(mocks).list(&actor, searching("zzqx"), PageRequest::default()));
    assert!(matches!(refused, Err(MemberError::Busy(Busy))));
}

#[test]
fn a_plain_member_list_needs_no_lane() {
    let actor = ada_acting(Role::Admin, Plan::Free);
    let mut mocks = Mocks::new();
    mocks.heavy.expect_enter().never();
    mocks
        .members
        .expect_members()
        .returning(|_, _, page, _| ready(Ok(Page::new(Vec::new(), 0, page))));
    let page =
        block_on(members(mocks).list(&actor, MemberFilter::default(), PageRequest::default()));
    assert!(page.is_ok());
}

#[test]
fn a_filtered_audit_log_is_heavy_and_the_organizations_own_log_is_not() {
    let actor = ada_acting(Role::Owner, Plan::Pro);
    let mut mocks = Mocks::new();
    mocks
        .heavy
        .expect_enter()
        .times(1)
        .returning(|_| ready(None));
    mocks
        .audit
        .expect_audit_log()
        .times(1)
        .returning(|_, page| ready(Ok(Page::new(Vec::new(), 0, page))));
    let service = AuditLogService::new((&mocks.ports()).into());
    let filtered = AuditFilter {
        action: Some(AuditAction::LoginFailed),
        ..AuditFilter::default()
    };
    let refused = block_on(service.organization_log(&actor, filtered, PageRequest::default()));
    assert!(matches!(refused, Err(AuditLogError::Busy(Busy))));
    let plain =
        block_on(service.organization_log(&actor, AuditFilter::default(), PageRequest::default()));
    assert!(plain.is_ok());
}
