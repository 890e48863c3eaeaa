//! The verified-domain use cases against mocked ports: each test states one rule.

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    tests::{ada_acting, now, origin, ready, recording, secret_of, Mocks, ACME},
    DomainError, DomainService,
};
use crate::{
    model::{
        ClaimableDomain, DomainId, DomainStatus, EmailDomain, EventType, OrganizationDomain,
        OrganizationId, Plan, Role, TokenKind,
    },
    ports::{DnsError, StoreError},
};

const ACME_COM: DomainId = DomainId::from_uuid(Uuid::from_u128(0xd0_0001));
const OTHER: OrganizationId = OrganizationId::from_uuid(Uuid::from_u128(0x07e));

fn pending() -> OrganizationDomain {
    OrganizationDomain {
        id: ACME_COM,
        organization_id: ACME,
        domain: EmailDomain::parse("acme.com").unwrap(),
        verification_value: secret_of(TokenKind::DomainChallenge),
        verified_at: None,
        created_at: now() - Duration::hours(1),
    }
}

impl Mocks {
    /// Acme has these domains (and the store's default, that no domain is verified, is gone:
    /// each test says who verified what).
    fn acme_has(&mut self, domains: Vec<OrganizationDomain>) {
        self.domains = crate::ports::MockDomainStore::new();
        let one = domains.first().cloned();
        self.domains
            .expect_domains()
            .returning(move |_| ready(Ok(domains.clone())));
        self.domains
            .expect_domain()
            .withf(|organization, id| *organization == ACME && *id == ACME_COM)
            .returning(move |_, _| ready(Ok(one.clone())));
    }

    fn dns_says(&mut self, records: Vec<String>) {
        self.dns
            .expect_txt_records()
            .withf(|name| name == "_gatehouse-challenge.acme.com")
            .times(1)
            .returning(move |_| ready(Ok(records.clone())));
    }

    /// Whoever claims a domain finds it verified by `organization` (`None`: by nobody yet).
    fn domain_is_verified_by(&mut self, organization: Option<OrganizationId>) {
        self.domains
            .expect_verifying_organization()
            .returning(move |_| ready(Ok(organization)));
    }

    /// The DNS lookup fails (times out).
    fn dns_fails(&mut self) {
        self.dns
            .expect_txt_records()
            .returning(|_| ready(Err(DnsError("timed out".into()))));
    }
}

/// Mocks in which Acme has claimed acme.com and not yet verified it.
fn with_acme_com_pending() -> Mocks {
    let mut mocks = Mocks::new();
    mocks.acme_has(vec![pending()]);
    mocks
}

fn service(mocks: Mocks) -> DomainService {
    DomainService::new((&mocks.ports()).into())
}

/// An admin of Acme verifies acme.com.
fn admin_verifies(mocks: Mocks) -> Result<OrganizationDomain, DomainError> {
    block_on(service(mocks).verify(&ada_acting(Role::Admin, Plan::Free), ACME_COM, &origin()))
}

#[test]
fn an_admin_claims_a_domain_pending_with_a_random_value_for_its_txt_record() {
    let mut mocks = Mocks::new();
    mocks.acme_has(Vec::new());
    mocks.domain_is_verified_by(None);
    let added = recording!(
        mocks.domains.expect_add_domain().times(1),
        |domain, audit| (domain, audit),
        Ok(true)
    );
    let domain = block_on(service(mocks).add(
        &ada_acting(Role::Admin, Plan::Free),
        ClaimableDomain::parse("Acme.com").unwrap(),
        &origin(),
    ))
    .unwrap();
    assert_eq!(domain.status(), DomainStatus::Pending);
    assert_eq!(domain.challenge_name(), "_gatehouse-challenge.acme.com");
    assert_eq!(
        domain.verification_value,
        secret_of(TokenKind::DomainChallenge)
    );
    let (stored, audit) = added.only();
    assert_eq!(stored, domain);
    assert_eq!(audit.action.as_str(), "organization.domain_added");
}

#[test]
fn members_and_viewers_may_not_manage_domains() {
    for role in [Role::Member, Role::Viewer] {
        let actor = ada_acting(role, Plan::Business);
        let service = service(Mocks::new());
        assert!(matches!(
            block_on(service.add(
                &actor,
                ClaimableDomain::parse("acme.com").unwrap(),
                &origin()
            )),
            Err(DomainError::Forbidden(_))
        ));
        assert!(matches!(
            block_on(service.list(&actor, crate::model::PageRequest::default())),
            Err(DomainError::Forbidden(_))
        ));
        assert!(matches!(
            block_on(service.verify(&actor, ACME_COM, &origin())),
            Err(DomainError::Forbidden(_))
        ));
        assert!(matches!(
            block_on(service.remove(&actor, ACME_COM, &origin())),
            Err(DomainError::Forbidden(_))
        ));
    }
}

#[test]
fn a_domain_another_organization_verified_cannot_be_claimed() {
    let mut mocks = Mocks::new();
    mocks.acme_has(Vec::new());
    mocks.domain_is_verified_by(Some(OTHER));
    let refused = block_on(service(mocks).add(
        &ada_acting(Role::Owner, Plan::Free),
        ClaimableDomain::parse("acme.com").unwrap(),
        &origin(),
    ));
    assert!(matches!(refused, Err(DomainError::VerifiedElsewhere(d)) if d == "acme.com"));
}

#[test]
fn the_txt_record_holding_the_value_verifies_the_domain_with_its_event() {
    let mut mocks = with_acme_com_pending();
    mocks.dns_says(vec![
        "v=spf1 -all".to_owned(),
        secret_of(TokenKind::DomainChallenge),
    ]);
    let verified = recording!(
        mocks
            .domains
            .expect_verify_domain()
            .withf(|organization, id, at, _, _| {
                *organization == ACME && *id == ACME_COM && *at == now()
            })
            .times(1),
        |_, _, _, event, _| event,
        Ok(true)
    );
    let domain = admin_verifies(mocks).unwrap();
    assert_eq!(domain.status(), DomainStatus::Verified);
    let event = verified.only();
    assert_eq!(event.event_type, EventType::OrganizationDomainVerified);
    assert_eq!(event.organization_id, Some(ACME));
    assert_eq!(event.data["domain"], "acme.com");
    assert_eq!(event.data["status"], "verified");
}

#[test]
fn without_the_value_in_dns_the_domain_stays_pending_and_the_answer_names_what_was_found() {
    let mut mocks = with_acme_com_pending();
    mocks.dns_says(vec!["someone-else".to_owned()]);
    let refused = admin_verifies(mocks);
    let Err(refused @ DomainError::NotProven { .. }) = refused else {
        panic!("{refused:?}");
    };
    assert_eq!(
        refused.to_string(),
        "no TXT record at _gatehouse-challenge.acme.com holds the verification value; found: \"someone-else\""
    );

    let mut mocks = with_acme_com_pending();
    mocks.dns_says(Vec::new());
    let refused = admin_verifies(mocks);
    assert_eq!(
        refused.unwrap_err().to_string(),
        "no TXT record found at _gatehouse-challenge.acme.com"
    );
}

#[test]
fn a_dns_failure_is_no_answer() {
    let mut mocks = with_acme_com_pending();
    mocks.dns_fails();
    let refused = admin_verifies(mocks);
    assert!(matches!(refused, Err(DomainError::Dns(_))));
}

#[test]
fn a_domain_verified_by_another_organization_meanwhile_is_a_conflict() {
    let mut mocks = with_acme_com_pending();
    mocks.dns_says(vec![secret_of(TokenKind::DomainChallenge)]);
    mocks
        .domains
        .expect_verify_domain()
        .returning(|_, _, _, _, _| ready(Err(StoreError::Conflict)));
    let refused = admin_verifies(mocks);
    assert!(matches!(refused, Err(DomainError::VerifiedElsewhere(_))));
}

#[test]
fn removing_records_the_event() {
    let mut mocks = with_acme_com_pending();
    let removed = recording!(
        mocks.domains.expect_remove_domain().times(1),
        |_, _, event, _| event,
        Ok(true)
    );
    block_on(service(mocks).remove(&ada_acting(Role::Owner, Plan::Free), ACME_COM, &origin()))
        .unwrap();
    assert_eq!(
        removed.only().event_type,
        EventType::OrganizationDomainRemoved
    );
}
