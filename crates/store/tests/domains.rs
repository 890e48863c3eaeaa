//! The verified-domains store contract, on both backends: claims are kept per organization,
//! verified once, by one organization at most, and removed with their events.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{DomainId, EmailDomain, EventType, OrganizationDomain, OrganizationId, Plan},
    ports::StoreError,
};
use support::{event, now, on_both_backends, Db};
use uuid::Uuid;

fn claim(org: OrganizationId, domain: &str) -> OrganizationDomain {
    OrganizationDomain {
        id: DomainId::from_uuid(Uuid::now_v7()),
        organization_id: org,
        domain: EmailDomain::parse(domain).unwrap(),
        verification_value: format!("ghdv_{}", Uuid::new_v4().simple()),
        verified_at: None,
        created_at: now(),
    }
}

async fn verify(db: &Db, domain: &OrganizationDomain) -> Result<bool, StoreError> {
    db.store
        .verify_domain(
            domain.organization_id,
            domain.id,
            now(),
            event(
                EventType::OrganizationDomainVerified,
                Some(domain.organization_id),
                None,
            ),
            support::signed_in(),
        )
        .await
}

#[on_both_backends(worker_threads = 4)]
async fn a_claim_is_pending_until_verified_once(db: Db) {
    let owner = db.registered("owner@acme.test").await;
    let acme = db.team(owner, "acme", Plan::Free).await;
    let claimed = claim(acme, "acme.example");
    assert!(db
        .store
        .add_domain(claimed.clone(), support::signed_in())
        .await
        .unwrap());
    assert_eq!(
        db.store.domains(acme).await.unwrap(),
        std::slice::from_ref(&claimed)
    );
    assert_eq!(
        db.store.domain(acme, claimed.id).await.unwrap(),
        Some(claimed.clone())
    );
    assert_eq!(
        db.store
            .verifying_organization(&claimed.domain)
            .await
            .unwrap(),
        None
    );
    // Claimed twice by the same organization: a conflict.
    assert!(matches!(
        db.store
            .add_domain(claim(acme, "acme.example"), support::signed_in())
            .await,
        Err(StoreError::Conflict)
    ));

    assert!(verify(&db, &claimed).await.unwrap());
    assert!(!verify(&db, &claimed).await.unwrap(), "verified once");
    let stored = db.store.domain(acme, claimed.id).await.unwrap().unwrap();
    assert!(stored.verified_at.is_some());
    assert_eq!(
        db.store
            .verifying_organization(&claimed.domain)
            .await
            .unwrap(),
        Some(acme)
    );
    assert_eq!(
        db.count(
            "SELECT count(*) AS n FROM events WHERE event_type = 'organization.domain_verified'"
        )
        .await,
        1
    );
}

#[on_both_backends(worker_threads = 4)]
async fn a_domain_is_verified_by_one_organization_at_most(db: Db) {
    let owner = db.registered("owner@acme.test").await;
    let acme = db.team(owner, "acme", Plan::Free).await;
    let globex = db.team(owner, "globex", Plan::Free).await;
    let ours = claim(acme, "shared.example");
    let theirs = claim(globex, "shared.example");
    assert!(db
        .store
        .add_domain(ours.clone(), support::signed_in())
        .await
        .unwrap());
    assert!(
        db.store
            .add_domain(theirs.clone(), support::signed_in())
            .await
            .unwrap(),
        "pending claims may share a domain"
    );
    assert!(verify(&db, &ours).await.unwrap());
    assert!(matches!(
        verify(&db, &theirs).await,
        Err(StoreError::Conflict)
    ));
    // Removed, the domain is free for the other to verify.
    assert!(db
        .store
        .remove_domain(
            acme,
            ours.id,
            event(EventType::OrganizationDomainRemoved, Some(acme), None),
            support::signed_in()
        )
        .await
        .unwrap());
    assert!(!db
        .store
        .remove_domain(
            acme,
            ours.id,
            event(EventType::OrganizationDomainRemoved, Some(acme), None),
            support::signed_in()
        )
        .await
        .unwrap());
    assert!(verify(&db, &theirs).await.unwrap());
    assert_eq!(
        db.store
            .verifying_organization(&theirs.domain)
            .await
            .unwrap(),
        Some(globex)
    );
    // Another organization's domain is not found through this one.
    assert_eq!(db.store.domain(acme, theirs.id).await.unwrap(), None);
}
