//! The audit log's store contract, on both backends: a record written with its change and never
//! without it, listing filtered and newest first, and the retention purge.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{AuditAction, AuditActor, AuditFilter, AuditOutcome, PageRequest, TargetKind},
    ports::StoreError,
};
use support::{account, api_key, audited, now, on_both_backends, Db};
use time::Duration;

/// Only `api_key.created`: creating the test's accounts writes records of their own.
fn keys_created() -> AuditFilter {
    AuditFilter {
        action: Some(AuditAction::ApiKeyCreated),
        ..AuditFilter::default()
    }
}

fn everything() -> PageRequest {
    PageRequest::new(Some(1), Some(100)).unwrap()
}

#[on_both_backends(worker_threads = 4)]
async fn a_record_is_written_with_its_change_and_read_back_whole(db: Db) {
    let ada = account("ada@example.com", "Ada");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    let (key, _) = api_key(ada.user.id, ada.workspace.id, "ci", now());
    let record = audited(AuditAction::ApiKeyCreated, ada.user.id)
        .in_organization(ada.workspace.id)
        .on(TargetKind::ApiKey, key.id);
    db.store
        .create_api_key(key, record.clone())
        .await
        .unwrap()
        .expect("created");

    let log = db
        .store
        .audit_log(keys_created(), everything())
        .await
        .unwrap();
    assert_eq!(log.items(), &[record]);
}

#[on_both_backends(worker_threads = 4)]
async fn a_change_that_rolls_back_leaves_no_record(db: Db) {
    let ada = account("ada@example.com", "Ada");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    let (key, _) = api_key(ada.user.id, ada.workspace.id, "ci", now());
    db.store
        .create_api_key(
            key.clone(),
            audited(AuditAction::ApiKeyCreated, ada.user.id),
        )
        .await
        .unwrap()
        .expect("created");
    // The same key again: the insert fails inside the transaction the record was written
    // in, and the record goes with it.
    let again = db
        .store
        .create_api_key(
            key.clone(),
            audited(AuditAction::ApiKeyCreated, ada.user.id),
        )
        .await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
    // A delete of a key that is not the user's changes nothing, and records nothing.
    let bob = db.registered("bob@example.com").await;
    assert!(!db
        .store
        .delete_api_key(bob, key.id, audited(AuditAction::ApiKeyRevoked, bob))
        .await
        .unwrap());
    let log = db
        .store
        .audit_log(keys_created(), everything())
        .await
        .unwrap();
    assert_eq!(log.total(), 1);
    let revoked = AuditFilter {
        action: Some(AuditAction::ApiKeyRevoked),
        ..AuditFilter::default()
    };
    assert_eq!(
        db.store
            .audit_log(revoked, everything())
            .await
            .unwrap()
            .total(),
        0
    );
}

#[on_both_backends(worker_threads = 4)]
async fn the_log_is_filtered_newest_first_and_purged(db: Db) {
    let ada = account("ada@example.com", "Ada");
    // Records point at nothing: no account is needed for them.
    let t = now();
    let mut older = audited(AuditAction::LoginFailed, ada.user.id).failed();
    older.occurred_at = t - Duration::days(400);
    let mut newer = audited(AuditAction::LoginSucceeded, ada.user.id);
    newer.occurred_at = t - Duration::minutes(1);
    let mut theirs =
        audited(AuditAction::ApiKeyCreated, ada.user.id).in_organization(ada.workspace.id);
    theirs.occurred_at = t;
    theirs.actor = AuditActor::Operator;
    for record in [older.clone(), newer.clone(), theirs.clone()] {
        db.store.record_audit(record).await.unwrap();
    }

    let all = db
        .store
        .audit_log(AuditFilter::default(), everything())
        .await
        .unwrap();
    assert_eq!(all.items(), &[theirs.clone(), newer.clone(), older.clone()]);
    let of_org = AuditFilter {
        organization_id: Some(ada.workspace.id),
        ..AuditFilter::default()
    };
    assert_eq!(
        db.store
            .audit_log(of_org, everything())
            .await
            .unwrap()
            .items(),
        &[theirs.clone()]
    );
    let by_ada = AuditFilter {
        actor_id: Some(ada.user.id.to_string()),
        ..AuditFilter::default()
    };
    assert_eq!(
        db.store
            .audit_log(by_ada, everything())
            .await
            .unwrap()
            .total(),
        2
    );
    let failed = AuditFilter {
        action: Some(AuditAction::LoginFailed),
        ..AuditFilter::default()
    };
    let failed = db.store.audit_log(failed, everything()).await.unwrap();
    assert_eq!(failed.items()[0].outcome, AuditOutcome::Failure);
    let window = AuditFilter {
        since: Some(t - Duration::hours(1)),
        until: Some(t),
        ..AuditFilter::default()
    };
    assert_eq!(
        db.store
            .audit_log(window, everything())
            .await
            .unwrap()
            .items(),
        &[newer.clone()]
    );
    let second_page = PageRequest::new(Some(2), Some(2)).unwrap();
    let page = db
        .store
        .audit_log(AuditFilter::default(), second_page)
        .await
        .unwrap();
    assert_eq!((page.total(), page.items()), (3, &[older][..]));
    // Past the last page, up to the deepest a client can ask for: no records, the total.
    for past in [(2, 3), (3, 2), (i64::from(u32::MAX), 100)] {
        let request = PageRequest::new(Some(past.0), Some(past.1)).unwrap();
        let page = db
            .store
            .audit_log(AuditFilter::default(), request)
            .await
            .unwrap();
        assert_eq!((page.total(), page.items().len()), (3, 0), "page {past:?}");
        assert!(!page.has_next() && page.has_prev());
    }

    // A year's retention drops the 400-day-old record only.
    assert_eq!(
        db.store
            .purge_audit(t - Duration::days(365), 1_000)
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        db.store
            .audit_log(AuditFilter::default(), everything())
            .await
            .unwrap()
            .total(),
        2
    );
    // In slices, the oldest first: a slice of one takes the older of the two.
    assert_eq!(
        db.store
            .purge_audit(t + Duration::minutes(1), 1)
            .await
            .unwrap(),
        1
    );
    let left = db
        .store
        .audit_log(AuditFilter::default(), everything())
        .await
        .unwrap();
    assert_eq!(left.items(), &[theirs]);
}

#[on_both_backends(worker_threads = 4)]
async fn periodic_work_is_claimed_by_one_replica_per_interval(db: Db) {
    use gatehouse_domain::ports::PeriodicTask;
    let other = gatehouse_store::open(db.url(), &gatehouse_store::StoreOptions::default())
        .await
        .unwrap();
    let t0 = now();
    let hour = Duration::hours(1);
    // The first claim ever runs; the other replica's, a moment later, does not.
    assert!(db
        .store
        .claim_periodic(PeriodicTask::Purges, t0 - hour, t0)
        .await
        .unwrap());
    let soon = t0 + Duration::seconds(5);
    assert!(!other
        .claim_periodic(PeriodicTask::Purges, soon - hour, soon)
        .await
        .unwrap());
    // An hour on, whichever asks first runs it, once.
    let later = t0 + hour;
    let (a, b) = tokio::join!(
        other.claim_periodic(PeriodicTask::Purges, later - hour, later),
        db.store
            .claim_periodic(PeriodicTask::Purges, later - hour, later),
    );
    assert_eq!(
        [a.unwrap(), b.unwrap()].iter().filter(|ran| **ran).count(),
        1,
        "exactly one replica runs the round"
    );
}
