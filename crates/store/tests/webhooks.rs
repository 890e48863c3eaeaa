//! The webhook store's contract, run against both backends (`<name>::postgres` and
//! `<name>::sqlite`): endpoints, the outbox's fan-out and dispatch, leases, attempts, retries and
//! the delivery log.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use std::collections::HashSet;

use gatehouse_domain::{
    model::{
        Delivery, DeliveryId, DeliveryState, DeliveryStats, DeliveryStatus, EndpointId, EventId,
        EventType, LeaseRoom, NewEvent, OrganizationId, PageRequest, Plan, UserId, WebhookEndpoint,
        WebhookUrl,
    },
    ports::{
        AttemptEffects, AttemptRecord, DeliveryFilter, EndpointChange, EndpointLimit,
        LeasedDelivery, NewDelivery, NewEndpoint, PurgedHistory, RetryOutcome, StoreError,
    },
};
use gatehouse_store::StoreOptions;
use serde_json::json;
use support::{account, event, now, on_both_backends, session, Db, EmptyDatabase};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

/// Registers an account; returns the user and their personal workspace.
async fn registered(db: &Db, email: &str) -> (UserId, OrganizationId) {
    let new = account(email, "Someone");
    let ids = (new.user.id, new.workspace.id);
    db.store
        .create_account(new, support::signed_in())
        .await
        .unwrap();
    ids
}

fn url(path: &str) -> WebhookUrl {
    WebhookUrl::parse(&format!("https://hooks.example.com/{path}")).unwrap()
}

fn new_endpoint(
    org: OrganizationId,
    events: &[EventType],
    is_active: bool,
    at: OffsetDateTime,
) -> NewEndpoint {
    NewEndpoint {
        endpoint: WebhookEndpoint {
            id: EndpointId::from_uuid(Uuid::now_v7()),
            organization_id: org,
            url: url("in"),
            description: "The receiver".into(),
            events: events.to_vec(),
            is_active,
            created_at: at,
            updated_at: at,
        },
        secret_sealed: b"sealed secret".to_vec(),
    }
}

/// Creates an active endpoint subscribed to the events; returns its id.
async fn endpoint(db: &Db, org: OrganizationId, events: &[EventType]) -> EndpointId {
    let new = new_endpoint(org, events, true, now());
    let id = new.endpoint.id;
    db.store
        .create_endpoint(new, support::signed_in())
        .await
        .unwrap()
        .unwrap();
    id
}

/// Records an event of the organization (with a change of plan) and returns its id.
async fn org_event(
    db: &Db,
    org: OrganizationId,
    event_type: EventType,
    at: OffsetDateTime,
) -> EventId {
    let recorded = NewEvent {
        occurred_at: at,
        ..event(event_type, Some(org), None)
    };
    assert!(db
        .store
        .set_plan(org, Plan::Pro, at, recorded.clone(), support::signed_in())
        .await
        .unwrap());
    recorded.id
}

fn new_delivery(endpoint: EndpointId) -> NewDelivery {
    let id = DeliveryId::from_uuid(Uuid::now_v7());
    NewDelivery {
        id,
        endpoint_id: endpoint,
        payload: json!({ "webhook_id": endpoint, "delivery_id": id }).to_string(),
    }
}

/// Dispatches the event to the endpoints, due at `at`; returns the deliveries' ids.
async fn dispatch(
    db: &Db,
    event: EventId,
    endpoints: &[EndpointId],
    at: OffsetDateTime,
) -> Vec<DeliveryId> {
    let deliveries: Vec<NewDelivery> = endpoints.iter().copied().map(new_delivery).collect();
    let ids = deliveries.iter().map(|d| d.id).collect();
    db.store
        .dispatch_event(event, deliveries, at)
        .await
        .unwrap();
    ids
}

/// An organization event dispatched to the endpoint at `at`: its one delivery.
async fn delivery_at(
    db: &Db,
    org: OrganizationId,
    endpoint: EndpointId,
    at: OffsetDateTime,
) -> DeliveryId {
    let event = org_event(db, org, EventType::OrganizationUpdated, at).await;
    dispatch(db, event, &[endpoint], at).await[0]
}

/// Leases up to 100 due deliveries, none at the `busy` endpoints.
async fn lease(db: &Db, at: OffsetDateTime, busy: &[EndpointId]) -> Vec<LeasedDelivery> {
    let room = busy.iter().fold(LeaseRoom::new(100, 100), |room, id| {
        room.with_in_flight(*id, 100)
    });
    db.store
        .lease_deliveries(at, at + Duration::minutes(1), room, Uuid::new_v4())
        .await
        .unwrap()
}

fn ids(leased: &[LeasedDelivery]) -> Vec<DeliveryId> {
    leased.iter().map(|d| d.id).collect()
}

fn attempt(
    leased: &LeasedDelivery,
    succeeded: bool,
    at: OffsetDateTime,
    next_attempt_at: Option<OffsetDateTime>,
) -> AttemptRecord {
    AttemptRecord {
        delivery_id: leased.id,
        endpoint_id: leased.endpoint_id,
        lease: leased.lease,
        // The state a recorder would write: the test names the retry time itself.
        state: DeliveryState::restore(
            if succeeded {
                DeliveryStatus::Success
            } else {
                DeliveryStatus::Failed
            },
            leased.attempt(),
            if succeeded { None } else { next_attempt_at },
        )
        .unwrap(),
        http_status: Some(if succeeded { 200 } else { 500 }),
        response_body: Some(if succeeded { "ok" } else { "boom" }.into()),
        duration_ms: 42,
        attempted_at: at,
        disable_after_failures: 5,
    }
}

const NOTHING: Option<AttemptEffects> = Some(AttemptEffects {
    endpoint_disabled: false,
});
const DISABLED: Option<AttemptEffects> = Some(AttemptEffects {
    endpoint_disabled: true,
});

/// The endpoint's deliveries, newest first.
async fn log(
    db: &Db,
    org: OrganizationId,
    endpoint: EndpointId,
    filter: DeliveryFilter,
) -> Vec<Delivery> {
    db.store
        .deliveries(
            org,
            endpoint,
            filter,
            PageRequest::new(None, Some(100)).unwrap(),
        )
        .await
        .unwrap()
        .expect("the organization\'s endpoint")
        .into_items()
}

async fn delivery(db: &Db, org: OrganizationId, endpoint: EndpointId, id: DeliveryId) -> Delivery {
    log(db, org, endpoint, DeliveryFilter::default())
        .await
        .into_iter()
        .find(|d| d.id == id)
        .expect("the delivery is in the log")
}

async fn consecutive_failures(db: &Db, endpoint: EndpointId) -> i64 {
    db.count(&format!(
        "SELECT CAST(consecutive_failures AS BIGINT) AS n FROM webhook_endpoints WHERE id = '{}'",
        endpoint.as_uuid()
    ))
    .await
}

fn page(page: i64, size: i64) -> PageRequest {
    PageRequest::new(Some(page), Some(size)).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Endpoints
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn endpoints_are_listed_newest_first_and_filtered(db: Db) {
    let (_, ada) = registered(&db, "ada@example.com").await;
    let (_, bob) = registered(&db, "bob@example.com").await;
    let t0 = now();
    let mut created = Vec::new();
    for (i, active) in [true, false, true].into_iter().enumerate() {
        let new = new_endpoint(
            ada,
            &[EventType::UserCreated],
            active,
            t0 + Duration::seconds(i as i64),
        );
        created.push(new.endpoint.clone());
        db.store
            .create_endpoint(new, support::signed_in())
            .await
            .unwrap()
            .unwrap();
    }
    db.store
        .create_endpoint(
            new_endpoint(bob, &[EventType::UserCreated], true, t0),
            support::signed_in(),
        )
        .await
        .unwrap()
        .unwrap();

    let all = db
        .store
        .endpoints(ada, None, PageRequest::default())
        .await
        .unwrap();
    assert_eq!(all.total(), 3);
    assert_eq!(
        all.items(),
        created.iter().rev().cloned().collect::<Vec<_>>()
    );
    let active = db
        .store
        .endpoints(ada, Some(true), PageRequest::default())
        .await
        .unwrap();
    assert_eq!(active.total(), 2);
    assert_eq!(active.items(), [created[2].clone(), created[0].clone()]);
    let inactive = db
        .store
        .endpoints(ada, Some(false), PageRequest::default())
        .await
        .unwrap();
    assert_eq!(inactive.items(), [created[1].clone()]);

    let second = db.store.endpoints(ada, None, page(2, 2)).await.unwrap();
    assert_eq!(second.items(), [created[0].clone()]);
    assert_eq!(second.total(), 3);
    assert!(second.has_prev() && !second.has_next());

    let bobs = db
        .store
        .endpoints(bob, None, PageRequest::default())
        .await
        .unwrap();
    assert_eq!(bobs.total(), 1);
    assert!(bobs.items().iter().all(|e| e.organization_id == bob));
}

#[on_both_backends(worker_threads = 4)]
async fn an_endpoint_is_found_changed_and_deleted_only_in_its_organization(db: Db) {
    let (_, ada) = registered(&db, "ada@example.com").await;
    let (_, bob) = registered(&db, "bob@example.com").await;
    let new = new_endpoint(ada, &[EventType::UserCreated], true, now());
    let created = new.endpoint.clone();
    let id = created.id;
    db.store
        .create_endpoint(new, support::signed_in())
        .await
        .unwrap()
        .unwrap();

    let detail = db.store.endpoint(ada, id).await.unwrap().unwrap();
    assert_eq!(detail.endpoint, created);
    assert_eq!(detail.last_delivery_at, None);
    assert_eq!(detail.stats, DeliveryStats::default());
    assert!(
        db.store.endpoint(bob, id).await.unwrap().is_none(),
        "another organization's"
    );
    assert!(db
        .store
        .endpoint(ada, EndpointId::from_uuid(Uuid::now_v7()))
        .await
        .unwrap()
        .is_none());

    let at = created.updated_at + Duration::seconds(10);
    let change = EndpointChange {
        url: Some(url("elsewhere")),
        events: Some(vec![EventType::AuthLogin, EventType::MemberJoined]),
        ..EndpointChange::default()
    };
    assert_eq!(
        db.store
            .update_endpoint(bob, id, change.clone(), at, support::signed_in())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        db.store.endpoint(ada, id).await.unwrap().unwrap().endpoint,
        created
    );

    let updated = db
        .store
        .update_endpoint(ada, id, change, at, support::signed_in())
        .await
        .unwrap()
        .unwrap();
    let expected = WebhookEndpoint {
        url: url("elsewhere"),
        events: vec![EventType::AuthLogin, EventType::MemberJoined],
        updated_at: at,
        ..created.clone()
    };
    assert_eq!(updated, expected);
    assert_eq!(
        db.store.endpoint(ada, id).await.unwrap().unwrap().endpoint,
        expected
    );

    // Only the fields given change; a new secret is stored sealed.
    let later = at + Duration::seconds(1);
    let change = EndpointChange {
        description: Some("Renamed".into()),
        secret_sealed: Some(b"new sealed secret".to_vec()),
        is_active: Some(false),
        ..EndpointChange::default()
    };
    let updated = db
        .store
        .update_endpoint(ada, id, change, later, support::signed_in())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        updated,
        WebhookEndpoint {
            description: "Renamed".into(),
            is_active: false,
            updated_at: later,
            ..expected
        }
    );

    assert!(!db
        .store
        .delete_endpoint(bob, id, support::signed_in())
        .await
        .unwrap());
    assert!(db.store.endpoint(ada, id).await.unwrap().is_some());
    assert!(db
        .store
        .delete_endpoint(ada, id, support::signed_in())
        .await
        .unwrap());
    assert!(
        !db.store
            .delete_endpoint(ada, id, support::signed_in())
            .await
            .unwrap(),
        "it is gone"
    );
    assert!(db.store.endpoint(ada, id).await.unwrap().is_none());
    assert_eq!(
        db.store
            .update_endpoint(
                ada,
                id,
                EndpointChange::default(),
                later,
                support::signed_in()
            )
            .await
            .unwrap(),
        None
    );
}

// ---------------------------------------------------------------------------------------------
// The outbox: fan-out and dispatch
// ---------------------------------------------------------------------------------------------

/// The organizations (as text) of the outbox's events of the type, sorted.
async fn event_organizations(db: &Db, event_type: EventType) -> Vec<String> {
    let mut orgs = db
        .strings(&format!(
            "SELECT COALESCE(CAST(organization_id AS TEXT), 'none') AS value FROM events \
             WHERE event_type = '{event_type}'"
        ))
        .await;
    orgs.sort();
    orgs
}

fn sorted(orgs: &[OrganizationId]) -> Vec<String> {
    let mut orgs: Vec<String> = orgs
        .iter()
        .map(|o| o.as_uuid().hyphenated().to_string())
        .collect();
    orgs.sort();
    orgs
}

#[on_both_backends(worker_threads = 4)]
async fn a_change_that_commits_events_wakes_the_dispatcher_and_nothing_else_does(db: Db) {
    let committed = db.store.outbox_committed();
    let woken = || async {
        tokio::time::timeout(std::time::Duration::from_millis(20), committed.notified())
            .await
            .is_ok()
    };
    let (ada, _) = registered(&db, "ada@example.com").await;
    assert!(
        woken().await,
        "a registration commits user.created and organization.created"
    );
    assert!(!woken().await, "one notice for one change, taken");

    let (new, _) = session(ada, now(), Duration::days(1));
    let login = event(EventType::AuthLogin, None, Some(ada));
    db.store
        .create_session(new.clone(), login, None, support::signed_in())
        .await
        .unwrap();
    assert!(woken().await, "a sign-in commits auth.login");

    // A read, and a write that records no event, leave the dispatcher asleep.
    db.store.credentials_by_id(ada).await.unwrap();
    assert!(db
        .store
        .touch_session(new.id, now() + Duration::minutes(1))
        .await
        .unwrap());
    assert!(!woken().await, "nothing was recorded");

    // A change refused leaves it asleep too.
    let twin = db
        .store
        .create_account(account("ada@example.com", "Twin"), support::signed_in())
        .await;
    assert!(
        matches!(twin, Err(StoreError::Conflict)),
        "the email is taken"
    );
    assert!(!woken().await, "nothing was committed");
}

#[on_both_backends(worker_threads = 4)]
async fn user_events_fan_out_to_the_users_live_organizations(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    // Registration: the user's event goes to the workspace they now belong to.
    assert_eq!(
        event_organizations(&db, EventType::UserCreated).await,
        sorted(&[workspace])
    );
    assert_eq!(
        event_organizations(&db, EventType::OrganizationCreated).await,
        sorted(&[workspace])
    );

    let shared = db.team(ada, "ada-team", Plan::Free).await;
    let login = event(EventType::AuthLogin, None, Some(ada));
    let (new, _) = session(ada, now(), Duration::days(1));
    db.store
        .create_session(new, login.clone(), None, support::signed_in())
        .await
        .unwrap();
    assert_eq!(
        event_organizations(&db, EventType::AuthLogin).await,
        sorted(&[workspace, shared])
    );

    let pending: Vec<_> = db
        .store
        .pending_events(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == EventType::AuthLogin)
        .collect();
    assert_eq!(pending.len(), 2);
    assert!(
        pending.iter().any(|e| e.id == login.id),
        "the first row keeps the event's id"
    );
    assert_ne!(pending[0].id, pending[1].id);
    assert!(pending
        .iter()
        .all(|e| e.data == login.data && e.occurred_at == login.occurred_at));
    let orgs: HashSet<_> = pending.iter().map(|e| e.organization_id).collect();
    assert_eq!(orgs, HashSet::from([Some(workspace), Some(shared)]));

    // Someone in no live organization: one row, for no organization.
    let (bob, bobs) = registered(&db, "bob@example.com").await;
    let gone = event(EventType::OrganizationUpdated, Some(bobs), Some(bob));
    assert!(db
        .store
        .delete_organization(bobs, now(), gone, support::signed_in())
        .await
        .unwrap());
    let (new, _) = session(bob, now(), Duration::days(1));
    let login = event(EventType::AuthLogin, None, Some(bob));
    db.store
        .create_session(new, login.clone(), None, support::signed_in())
        .await
        .unwrap();
    assert_eq!(
        event_organizations(&db, EventType::AuthLogin).await.len(),
        3,
        "Ada's two, and Bob's"
    );
    let pending = db.store.pending_events(100).await.unwrap();
    let bobs_login = pending.iter().find(|e| e.id == login.id).unwrap();
    assert_eq!(bobs_login.organization_id, None);
    assert!(event_organizations(&db, EventType::AuthLogin)
        .await
        .contains(&"none".to_owned()));

    // Oldest first.
    let times: Vec<_> = pending.iter().map(|e| e.occurred_at).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]));
}

#[on_both_backends(worker_threads = 4)]
async fn a_users_event_reaches_every_one_of_many_organizations(db: Db) {
    // More organizations than PostgreSQL's store inserts in one statement (eight).
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let mut expected = vec![workspace];
    for n in 0..10 {
        expected.push(db.team(ada, &format!("ada-team-{n}"), Plan::Free).await);
    }
    let login = event(EventType::AuthLogin, None, Some(ada));
    let (new, _) = session(ada, now(), Duration::days(1));
    db.store
        .create_session(new, login.clone(), None, support::signed_in())
        .await
        .unwrap();
    assert_eq!(
        event_organizations(&db, EventType::AuthLogin).await,
        sorted(&expected)
    );
    let pending = db.store.pending_events(100).await.unwrap();
    let logins: HashSet<_> = pending
        .iter()
        .filter(|e| e.event_type == EventType::AuthLogin)
        .map(|e| e.id)
        .collect();
    assert_eq!(
        logins.len(),
        11,
        "one row, with an id of its own, for each organization"
    );
    assert!(
        logins.contains(&login.id),
        "the first row keeps the event's id"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn dispatching_creates_each_delivery_once_and_marks_the_event(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let (_, other) = registered(&db, "bob@example.com").await;
    let subscribed = endpoint(
        &db,
        org,
        &[EventType::MemberJoined, EventType::OrganizationUpdated],
    )
    .await;
    let _elsewhere = endpoint(&db, org, &[EventType::MemberJoined]).await;
    let inactive = new_endpoint(org, &[EventType::OrganizationUpdated], false, now());
    db.store
        .create_endpoint(inactive, support::signed_in())
        .await
        .unwrap()
        .unwrap();
    let others = endpoint(&db, other, &[EventType::OrganizationUpdated]).await;

    assert_eq!(
        db.store
            .subscribed_endpoints(org, EventType::OrganizationUpdated)
            .await
            .unwrap(),
        [subscribed]
    );
    assert_eq!(
        db.store
            .subscribed_endpoints(org, EventType::AuthLogin)
            .await
            .unwrap(),
        Vec::<EndpointId>::new()
    );

    let at = now();
    let event_id = org_event(&db, org, EventType::OrganizationUpdated, at).await;
    let pending = db.store.pending_events(100).await.unwrap();
    let pending_event = pending.iter().find(|e| e.id == event_id).unwrap();
    assert_eq!(pending_event.event_type, EventType::OrganizationUpdated);
    assert_eq!(pending_event.organization_id, Some(org));

    let first = new_delivery(subscribed);
    let payload = first.payload.clone();
    db.store
        .dispatch_event(event_id, vec![first.clone()], at)
        .await
        .unwrap();
    assert!(db
        .store
        .pending_events(100)
        .await
        .unwrap()
        .iter()
        .all(|e| e.id != event_id));

    // Repeated (after a crash, say) with fresh ids: nothing doubles. And an endpoint of
    // another organization never gets the event.
    let later = at + Duration::seconds(5);
    db.store
        .dispatch_event(
            event_id,
            vec![new_delivery(subscribed), new_delivery(others)],
            later,
        )
        .await
        .unwrap();
    let log = log(&db, org, subscribed, DeliveryFilter::default()).await;
    assert_eq!(
        log,
        [Delivery {
            id: first.id,
            webhook_id: subscribed,
            organization_id: org,
            event_id,
            event: EventType::OrganizationUpdated,
            status: DeliveryStatus::Pending,
            attempt: 1,
            http_status: None,
            request_body: Some(serde_json::from_str(&payload).unwrap()),
            response_body: None,
            duration_ms: None,
            delivered_at: None,
            next_retry_at: None,
            created_at: at,
        }]
    );
    let theirs = db
        .store
        .deliveries(
            other,
            others,
            DeliveryFilter::default(),
            PageRequest::default(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(theirs.total(), 0);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM webhook_deliveries")
            .await,
        1
    );

    // An event for no organization is marked dispatched, delivered nowhere.
    let (carol, hers) = registered(&db, "carol@example.com").await;
    let gone = event(EventType::OrganizationUpdated, Some(hers), None);
    db.store
        .delete_organization(hers, now(), gone, support::signed_in())
        .await
        .unwrap();
    let lonely = event(EventType::UserDeleted, None, Some(carol));
    db.store
        .delete_user(carol, vec![lonely.clone()], support::signed_in(), vec![])
        .await
        .unwrap();
    let pending = db.store.pending_events(100).await.unwrap();
    assert!(pending
        .iter()
        .any(|e| e.id == lonely.id && e.organization_id.is_none()));
    db.store
        .dispatch_event(lonely.id, vec![], at)
        .await
        .unwrap();
    assert!(db
        .store
        .pending_events(100)
        .await
        .unwrap()
        .iter()
        .all(|e| e.id != lonely.id));
}

#[on_both_backends(worker_threads = 4)]
async fn a_batch_of_events_from_several_organizations_goes_each_to_its_own_endpoints(db: Db) {
    let (_, ada) = registered(&db, "ada@example.com").await;
    let (_, bob) = registered(&db, "bob@example.com").await;
    let hers = endpoint(&db, ada, &[EventType::OrganizationUpdated]).await;
    let his = endpoint(&db, bob, &[EventType::OrganizationUpdated]).await;
    let at = now();
    let [first, second] = [
        org_event(&db, ada, EventType::OrganizationUpdated, at).await,
        org_event(&db, bob, EventType::OrganizationUpdated, at).await,
    ];
    // The dispatcher's batch, as a confused or hostile caller might write it: each event
    // names the other organization's endpoint too, and a third event is gone.
    let gone = EventId::from_uuid(Uuid::now_v7());
    let batch = vec![
        (first, vec![new_delivery(hers), new_delivery(his)]),
        (second, vec![new_delivery(his), new_delivery(hers)]),
        (gone, vec![new_delivery(hers)]),
    ];
    db.store.dispatch_events(batch, at).await.unwrap();

    let events_of = |log: Vec<Delivery>| log.into_iter().map(|d| d.event_id).collect::<Vec<_>>();
    assert_eq!(
        events_of(log(&db, ada, hers, DeliveryFilter::default()).await),
        [first]
    );
    assert_eq!(
        events_of(log(&db, bob, his, DeliveryFilter::default()).await),
        [second]
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM webhook_deliveries")
            .await,
        2
    );
    let pending = db.store.pending_events(100).await.unwrap();
    assert!(
        pending.iter().all(|e| e.id != first && e.id != second),
        "both marked dispatched"
    );
}

// ---------------------------------------------------------------------------------------------
// Leases and attempts
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn leases_are_exclusive_until_they_expire(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let types = [EventType::OrganizationUpdated];
    let (one, busy, off) = (
        endpoint(&db, org, &types).await,
        endpoint(&db, org, &types).await,
        endpoint(&db, org, &types).await,
    );
    let t0 = now();
    let event_id = org_event(&db, org, EventType::OrganizationUpdated, t0).await;
    let [d1, d2, d3] = dispatch(&db, event_id, &[one, busy, off], t0).await[..] else {
        panic!("three deliveries")
    };
    let later = delivery_at(&db, org, one, t0 + Duration::hours(1)).await;
    let change = EndpointChange {
        is_active: Some(false),
        ..EndpointChange::default()
    };
    db.store
        .update_endpoint(org, off, change, t0, support::signed_in())
        .await
        .unwrap()
        .unwrap();

    let at = t0 + Duration::seconds(1);
    let first = lease(&db, at, &[busy]).await;
    assert_eq!(
        ids(&first),
        [d1],
        "busy and inactive endpoints are skipped, later ones wait"
    );
    let leased = &first[0];
    assert_eq!(leased.endpoint_id, one);
    assert_eq!(leased.organization_id, org);
    assert_eq!(leased.url, url("in"));
    assert_eq!(leased.secret_sealed, b"sealed secret");
    assert_eq!(leased.event, EventType::OrganizationUpdated);
    assert_eq!(leased.attempt(), 1);
    let body: serde_json::Value = serde_json::from_str(&leased.payload).unwrap();
    assert_eq!(body["delivery_id"], json!(d1));

    let second = lease(&db, at, &[]).await;
    assert_eq!(ids(&second), [d2], "a leased delivery is not leased again");
    assert!(lease(&db, at, &[]).await.is_empty());
    assert_ne!(first[0].lease, second[0].lease);

    // Given back unused: due again at once.
    db.store
        .release_deliveries(vec![(d2, second[0].lease)])
        .await
        .unwrap();
    // A lease that no longer holds is ignored.
    db.store
        .release_deliveries(vec![(d1, Uuid::new_v4())])
        .await
        .unwrap();
    let again = lease(&db, at, &[]).await;
    assert_eq!(ids(&again), [d2]);

    // Once the leases expire, the deliveries are leased again, under new leases.
    let expired = at + Duration::minutes(1) + Duration::seconds(1);
    let retaken = lease(&db, expired, &[]).await;
    assert_eq!(ids(&retaken), [d1, d2]);
    assert_ne!(retaken[0].lease, first[0].lease);
    assert_eq!(retaken[0].attempt(), 1);
    // The first lease is lost: its attempt is not recorded.
    assert_eq!(
        db.store
            .record_attempt(attempt(&first[0], true, expired, None))
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        delivery(&db, org, one, d1).await.status,
        DeliveryStatus::Pending
    );
    assert_eq!(
        db.store
            .record_attempt(attempt(&retaken[0], true, expired, None))
            .await
            .unwrap(),
        NOTHING
    );

    // The later delivery is leased when it is due; the inactive endpoint's never.
    let due = lease(&db, t0 + Duration::hours(2), &[]).await;
    assert_eq!(ids(&due), [d2, later]);
    assert!(!ids(&due).contains(&d3));
    let limited = db
        .store
        .lease_deliveries(
            t0 + Duration::hours(3),
            t0 + Duration::hours(4),
            LeaseRoom::new(1, 100),
            Uuid::new_v4(),
        )
        .await
        .unwrap();
    assert_eq!(ids(&limited), [d2], "oldest due first, up to the limit");
}

#[on_both_backends(worker_threads = 4)]
async fn a_lease_takes_only_what_fits_at_each_endpoint(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let types = [EventType::OrganizationUpdated];
    let (crowded, other) = (
        endpoint(&db, org, &types).await,
        endpoint(&db, org, &types).await,
    );
    let t0 = now();
    // Three due at the crowded endpoint, then one at the other.
    let mut crowded_due = Vec::new();
    for minute in 0..3 {
        crowded_due.push(delivery_at(&db, org, crowded, t0 + Duration::minutes(minute)).await);
    }
    let behind = delivery_at(&db, org, other, t0 + Duration::minutes(3)).await;

    let at = t0 + Duration::hours(1);
    let room = LeaseRoom::new(10, 2).with_in_flight(crowded, 1);
    let leased = db
        .store
        .lease_deliveries(at, at + Duration::minutes(1), room, Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(
        ids(&leased),
        [crowded_due[0], behind],
        "one fits at the crowded endpoint"
    );
    assert_eq!(leased[0].lease, leased[1].lease, "one lease for the batch");

    // What did not fit is still due, and nothing else is leased twice.
    let rest = lease(&db, at, &[]).await;
    assert_eq!(ids(&rest), crowded_due[1..]);
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[1], true, at, None))
            .await
            .unwrap(),
        NOTHING
    );
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[0], true, at, None))
            .await
            .unwrap(),
        NOTHING
    );
}

#[on_both_backends(worker_threads = 4)]
async fn attempts_are_recorded_under_their_lease(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let hook = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let t0 = now();
    let id = delivery_at(&db, org, hook, t0).await;

    let leased = lease(&db, t0, &[]).await;
    let failed_at = t0 + Duration::seconds(2);
    let retry_at = failed_at + Duration::seconds(60);
    let effects = db
        .store
        .record_attempt(attempt(&leased[0], false, failed_at, Some(retry_at)))
        .await
        .unwrap();
    assert_eq!(effects, NOTHING);
    let failed = delivery(&db, org, hook, id).await;
    assert_eq!(failed.status, DeliveryStatus::Failed);
    assert_eq!(failed.attempt, 1);
    assert_eq!(failed.http_status, Some(500));
    assert_eq!(failed.response_body.as_deref(), Some("boom"));
    assert_eq!(failed.duration_ms, Some(42));
    assert_eq!(failed.delivered_at, Some(failed_at));
    assert_eq!(failed.next_retry_at, Some(retry_at));
    assert_eq!(consecutive_failures(&db, hook).await, 1);
    // Recorded once: the lease went with it.
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[0], true, failed_at, None))
            .await
            .unwrap(),
        None
    );

    assert!(
        lease(&db, retry_at - Duration::seconds(1), &[])
            .await
            .is_empty(),
        "not yet due"
    );
    let retried = lease(&db, retry_at, &[]).await;
    assert_eq!(ids(&retried), [id]);
    assert_eq!(retried[0].attempt(), 2, "a failed delivery's next attempt");
    let done_at = retry_at + Duration::seconds(1);
    assert_eq!(
        db.store
            .record_attempt(attempt(&retried[0], true, done_at, None))
            .await
            .unwrap(),
        NOTHING
    );
    let done = delivery(&db, org, hook, id).await;
    assert_eq!(done.status, DeliveryStatus::Success);
    assert_eq!(done.attempt, 2);
    assert_eq!(done.http_status, Some(200));
    assert_eq!(done.next_retry_at, None);
    assert_eq!(done.delivered_at, Some(done_at));
    assert_eq!(
        consecutive_failures(&db, hook).await,
        0,
        "a success ends the run of failures"
    );
    assert!(
        lease(&db, done_at + Duration::days(1), &[])
            .await
            .is_empty(),
        "finished"
    );

    // A last failure: failed for good.
    let other = delivery_at(&db, org, hook, done_at).await;
    let leased = lease(&db, done_at, &[]).await;
    assert_eq!(ids(&leased), [other]);
    let last_at = done_at + Duration::seconds(1);
    let mut record = attempt(&leased[0], false, last_at, None);
    record.http_status = None;
    db.store.record_attempt(record).await.unwrap();
    let gave_up = delivery(&db, org, hook, other).await;
    assert_eq!(
        (gave_up.status, gave_up.next_retry_at, gave_up.http_status),
        (DeliveryStatus::Failed, None, None)
    );
    assert!(lease(&db, last_at + Duration::days(30), &[])
        .await
        .is_empty());

    let detail = db.store.endpoint(org, hook).await.unwrap().unwrap();
    assert_eq!(detail.last_delivery_at, Some(last_at));
    assert_eq!(
        detail.stats,
        DeliveryStats {
            total: 2,
            successful: 1,
            failed: 1
        }
    );
}

#[on_both_backends(worker_threads = 4)]
async fn five_failures_in_a_row_disable_the_endpoint_once(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let hook = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let mut t = now();
    let first = delivery_at(&db, org, hook, t).await;

    // Three failures, then a success: the run starts again.
    for _ in 0..3 {
        let leased = lease(&db, t, &[]).await;
        assert_eq!(ids(&leased), [first]);
        t += Duration::seconds(1);
        assert_eq!(
            db.store
                .record_attempt(attempt(&leased[0], false, t, Some(t)))
                .await
                .unwrap(),
            NOTHING
        );
    }
    assert_eq!(consecutive_failures(&db, hook).await, 3);
    let leased = lease(&db, t, &[]).await;
    assert_eq!(leased[0].attempt(), 4);
    db.store
        .record_attempt(attempt(&leased[0], true, t, None))
        .await
        .unwrap();
    assert_eq!(consecutive_failures(&db, hook).await, 0);

    // Two deliveries failing together: the fifth failure in a row disables, the sixth finds
    // the endpoint disabled already.
    t += Duration::seconds(1);
    let second = delivery_at(&db, org, hook, t).await;
    let third = delivery_at(&db, org, hook, t).await;
    let mut effects = Vec::new();
    for _ in 0..3 {
        let leased = lease(&db, t, &[]).await;
        assert_eq!(
            ids(&leased).into_iter().collect::<HashSet<_>>(),
            HashSet::from([second, third])
        );
        t += Duration::seconds(1);
        for delivery in &leased {
            effects.push(
                db.store
                    .record_attempt(attempt(delivery, false, t, Some(t)))
                    .await
                    .unwrap(),
            );
        }
    }
    assert_eq!(
        effects,
        [NOTHING, NOTHING, NOTHING, NOTHING, DISABLED, NOTHING]
    );
    let detail = db.store.endpoint(org, hook).await.unwrap().unwrap();
    assert!(!detail.endpoint.is_active);
    assert_eq!(detail.endpoint.updated_at, t);
    assert_eq!(consecutive_failures(&db, hook).await, 6);
    assert!(
        lease(&db, t, &[]).await.is_empty(),
        "an inactive endpoint gets nothing"
    );

    // Turned back on: the run of failures is cleared and its deliveries are due again.
    let on = EndpointChange {
        is_active: Some(true),
        ..EndpointChange::default()
    };
    let updated = db
        .store
        .update_endpoint(org, hook, on.clone(), t, support::signed_in())
        .await
        .unwrap()
        .unwrap();
    assert!(updated.is_active);
    assert_eq!(consecutive_failures(&db, hook).await, 0);
    let leased = lease(&db, t, &[]).await;
    assert_eq!(leased.len(), 2);
    assert!(leased.iter().all(|d| d.attempt() == 4));
    t += Duration::seconds(1);
    db.store
        .record_attempt(attempt(&leased[0], false, t, Some(t)))
        .await
        .unwrap();
    // Turning an active endpoint on again changes nothing of its run.
    db.store
        .update_endpoint(org, hook, on, t, support::signed_in())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(consecutive_failures(&db, hook).await, 1);
}

#[on_both_backends(worker_threads = 4)]
async fn attempts_recorded_together_count_in_their_order(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let types = [EventType::OrganizationUpdated];
    let (mixed, fine) = (
        endpoint(&db, org, &types).await,
        endpoint(&db, org, &types).await,
    );
    let t0 = now();
    for minute in 0..3 {
        delivery_at(&db, org, mixed, t0 + Duration::minutes(minute)).await;
        delivery_at(&db, org, fine, t0 + Duration::minutes(minute)).await;
    }
    let at = t0 + Duration::hours(1);
    let leased = lease(&db, at, &[]).await;
    let at_mixed: Vec<_> = leased.iter().filter(|d| d.endpoint_id == mixed).collect();
    let at_fine: Vec<_> = leased.iter().filter(|d| d.endpoint_id == fine).collect();
    let mut lost = attempt(at_fine[2], true, at, None);
    lost.lease = Uuid::new_v4();

    let effects = db
        .store
        .record_attempts(vec![
            attempt(at_mixed[0], true, at, None),
            attempt(at_fine[0], true, at, None),
            attempt(at_mixed[1], false, at, Some(at)),
            lost,
            attempt(at_fine[1], true, at + Duration::seconds(1), None),
            attempt(at_mixed[2], false, at, Some(at)),
        ])
        .await
        .unwrap();

    assert_eq!(
        effects,
        [NOTHING, NOTHING, NOTHING, None, NOTHING, NOTHING],
        "one answer each, in order"
    );
    assert_eq!(
        consecutive_failures(&db, mixed).await,
        2,
        "a success, then two failures"
    );
    assert_eq!(consecutive_failures(&db, fine).await, 0);
    let detail = db.store.endpoint(org, fine).await.unwrap().unwrap();
    assert_eq!(
        detail.last_delivery_at,
        Some(at + Duration::seconds(1)),
        "the latest attempt"
    );
    assert_eq!(
        delivery(&db, org, fine, at_fine[2].id).await.status,
        DeliveryStatus::Pending
    );
}

#[on_both_backends(worker_threads = 4)]
async fn successes_at_several_endpoints_recorded_together_end_each_ones_run(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let types = [EventType::OrganizationUpdated];
    let mut hooks = Vec::new();
    for _ in 0..3 {
        hooks.push(endpoint(&db, org, &types).await);
    }
    let t0 = now();
    for hook in &hooks {
        delivery_at(&db, org, *hook, t0).await;
    }
    let failed: Vec<_> = lease(&db, t0, &[])
        .await
        .iter()
        .map(|d| attempt(d, false, t0, Some(t0 + Duration::minutes(1))))
        .collect();
    db.store.record_attempts(failed).await.unwrap();
    for hook in &hooks {
        assert_eq!(consecutive_failures(&db, *hook).await, 1);
    }

    let retried = lease(&db, t0 + Duration::minutes(1), &[]).await;
    assert_eq!(retried.len(), 3, "each delivery due again");
    let succeeded: Vec<_> = retried
        .iter()
        .zip(1..)
        .map(|(d, n)| {
            attempt(
                d,
                true,
                t0 + Duration::minutes(1) + Duration::seconds(n),
                None,
            )
        })
        .collect();
    let effects = db.store.record_attempts(succeeded.clone()).await.unwrap();

    assert_eq!(effects, [NOTHING, NOTHING, NOTHING]);
    for record in &succeeded {
        assert_eq!(consecutive_failures(&db, record.endpoint_id).await, 0);
        let detail = db
            .store
            .endpoint(org, record.endpoint_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            detail.last_delivery_at,
            Some(record.attempted_at),
            "each endpoint its own time"
        );
    }
}

#[on_both_backends(worker_threads = 4)]
async fn deleting_an_endpoint_removes_its_deliveries(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let hook = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let kept = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let t0 = now();
    let event_id = org_event(&db, org, EventType::OrganizationUpdated, t0).await;
    dispatch(&db, event_id, &[hook, kept], t0).await;
    let leased = lease(&db, t0, &[kept]).await;
    assert_eq!(leased[0].endpoint_id, hook);

    assert!(db
        .store
        .delete_endpoint(org, hook, support::signed_in())
        .await
        .unwrap());
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM webhook_deliveries")
            .await,
        1
    );
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[0], false, t0, Some(t0)))
            .await
            .unwrap(),
        None,
        "the attempt of a deleted endpoint's delivery is not recorded"
    );
    assert!(db
        .store
        .deliveries(org, hook, DeliveryFilter::default(), PageRequest::default())
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        ids(&lease(&db, t0, &[]).await).len(),
        1,
        "the other endpoint's remains"
    );
}

// ---------------------------------------------------------------------------------------------
// Manual retries and the delivery log
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn manual_retries_queue_a_new_attempt(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let (_, other) = registered(&db, "bob@example.com").await;
    let hook = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let t0 = now();
    let id = delivery_at(&db, org, hook, t0).await;

    assert_eq!(
        db.store
            .retry_delivery(org, id, t0, support::signed_in())
            .await
            .unwrap(),
        RetryOutcome::AlreadyPending
    );
    assert_eq!(
        db.store
            .retry_delivery(other, id, t0, support::signed_in())
            .await
            .unwrap(),
        RetryOutcome::NotFound
    );
    let unknown = DeliveryId::from_uuid(Uuid::now_v7());
    assert_eq!(
        db.store
            .retry_delivery(org, unknown, t0, support::signed_in())
            .await
            .unwrap(),
        RetryOutcome::NotFound
    );

    // Waiting for an automatic retry (attempt 1 made): retried now, as attempt 2.
    let leased = lease(&db, t0, &[]).await;
    let failed_at = t0 + Duration::seconds(1);
    let record = attempt(
        &leased[0],
        false,
        failed_at,
        Some(failed_at + Duration::hours(1)),
    );
    db.store.record_attempt(record).await.unwrap();
    let at = failed_at + Duration::seconds(1);
    let RetryOutcome::Queued(queued) = db
        .store
        .retry_delivery(org, id, at, support::signed_in())
        .await
        .unwrap()
    else {
        panic!("a failed delivery is queued again");
    };
    assert_eq!(queued.id, id);
    assert_eq!(queued.status, DeliveryStatus::Pending);
    assert_eq!(queued.attempt, 2);
    assert_eq!(queued.next_retry_at, None);
    assert_eq!(
        queued.http_status,
        Some(500),
        "the last attempt's outcome stays"
    );
    assert_eq!(delivery(&db, org, hook, id).await, queued);
    assert_eq!(
        db.store
            .retry_delivery(org, id, at, support::signed_in())
            .await
            .unwrap(),
        RetryOutcome::AlreadyPending
    );

    let leased = lease(&db, at, &[]).await;
    assert_eq!(ids(&leased), [id], "due at once");
    assert_eq!(leased[0].attempt(), 2);
    assert_eq!(
        db.store
            .retry_delivery(org, id, at, support::signed_in())
            .await
            .unwrap(),
        RetryOutcome::AlreadyPending,
        "leased, still pending"
    );

    // An automatic retry in flight when a manual one comes: the manual one takes over, and
    // the attempt in flight is not recorded.
    db.store
        .record_attempt(attempt(&leased[0], false, at, Some(at)))
        .await
        .unwrap();
    let in_flight = lease(&db, at, &[]).await;
    assert_eq!(in_flight[0].attempt(), 3);
    let RetryOutcome::Queued(taken_over) = db
        .store
        .retry_delivery(org, id, at, support::signed_in())
        .await
        .unwrap()
    else {
        panic!("a failed delivery is queued again");
    };
    assert_eq!(
        (taken_over.status, taken_over.attempt),
        (DeliveryStatus::Pending, 3)
    );
    assert_eq!(
        db.store
            .record_attempt(attempt(&in_flight[0], true, at, None))
            .await
            .unwrap(),
        None
    );
    let leased = lease(&db, at, &[]).await;
    assert_eq!(ids(&leased), [id]);
    assert_eq!(leased[0].attempt(), 3);
    assert_ne!(leased[0].lease, in_flight[0].lease);

    // Delivered: a manual retry is for a failed delivery, so this one is refused and left
    // as it is.
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[0], true, at, None))
            .await
            .unwrap(),
        NOTHING
    );
    assert_eq!(
        db.store
            .retry_delivery(org, id, at, support::signed_in())
            .await
            .unwrap(),
        RetryOutcome::AlreadySucceeded
    );
    let delivered = delivery(&db, org, hook, id).await;
    assert_eq!(
        (delivered.status, delivered.attempt),
        (DeliveryStatus::Success, 3)
    );
    assert!(lease(&db, at, &[]).await.is_empty(), "nothing queued");
}

#[on_both_backends(worker_threads = 4)]
async fn the_delivery_log_pages_and_filters(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let (_, other) = registered(&db, "bob@example.com").await;
    let types = [
        EventType::OrganizationUpdated,
        EventType::BillingSubscriptionUpdated,
    ];
    let hook = endpoint(&db, org, &types).await;
    let t0 = now();
    let mut made = Vec::new();
    for i in 0..4 {
        let at = t0 + Duration::seconds(i);
        let event_type = if i == 3 { types[1] } else { types[0] };
        let event_id = org_event(&db, org, event_type, at).await;
        made.push(dispatch(&db, event_id, &[hook], at).await[0]);
    }
    let leased = lease(&db, t0 + Duration::seconds(10), &[]).await;
    assert_eq!(ids(&leased), made);
    let at = t0 + Duration::seconds(11);
    db.store
        .record_attempt(attempt(&leased[0], true, at, None))
        .await
        .unwrap();
    db.store
        .record_attempt(attempt(
            &leased[1],
            false,
            at,
            Some(at + Duration::minutes(1)),
        ))
        .await
        .unwrap();

    let listed = |filter: DeliveryFilter| {
        let db = &db;
        async move {
            log(db, org, hook, filter)
                .await
                .into_iter()
                .map(|d| d.id)
                .collect::<Vec<_>>()
        }
    };
    let newest_first: Vec<_> = made.iter().rev().copied().collect();
    assert_eq!(listed(DeliveryFilter::default()).await, newest_first);
    let by_status = |status| DeliveryFilter {
        status: Some(status),
        event: None,
    };
    assert_eq!(listed(by_status(DeliveryStatus::Success)).await, [made[0]]);
    assert_eq!(listed(by_status(DeliveryStatus::Failed)).await, [made[1]]);
    assert_eq!(
        listed(by_status(DeliveryStatus::Pending)).await,
        [made[3], made[2]]
    );
    let by_event = |event| DeliveryFilter {
        status: None,
        event: Some(event),
    };
    assert_eq!(listed(by_event(types[1])).await, [made[3]]);
    assert_eq!(
        listed(by_event(types[0])).await,
        [made[2], made[1], made[0]]
    );
    let both = DeliveryFilter {
        status: Some(DeliveryStatus::Pending),
        event: Some(types[0]),
    };
    assert_eq!(listed(both).await, [made[2]]);

    let second = db
        .store
        .deliveries(org, hook, DeliveryFilter::default(), page(2, 3))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        second.items().iter().map(|d| d.id).collect::<Vec<_>>(),
        [made[0]]
    );
    assert_eq!(second.total(), 4);
    assert!(second.has_prev() && !second.has_next());

    // Another organization sees no such endpoint.
    assert!(db
        .store
        .deliveries(
            other,
            hook,
            DeliveryFilter::default(),
            PageRequest::default()
        )
        .await
        .unwrap()
        .is_none());
    let unknown = EndpointId::from_uuid(Uuid::now_v7());
    assert!(db
        .store
        .deliveries(
            org,
            unknown,
            DeliveryFilter::default(),
            PageRequest::default()
        )
        .await
        .unwrap()
        .is_none());

    let detail = db.store.endpoint(org, hook).await.unwrap().unwrap();
    assert_eq!(
        detail.stats,
        DeliveryStats {
            total: 4,
            successful: 1,
            failed: 1
        }
    );
    assert_eq!(detail.last_delivery_at, Some(at));
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn concurrent_leasers_in_two_processes_never_share_a_delivery(db: EmptyDatabase) {
    // Two stores, two pools: as two replicas would be.
    let first = gatehouse_store::open(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let second = gatehouse_store::open(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    let new = account("ada@example.com", "Ada");
    let org = new.workspace.id;
    first
        .create_account(new, support::signed_in())
        .await
        .unwrap();
    let t0 = now();
    let mut hooks = Vec::new();
    for _ in 0..5 {
        let new = new_endpoint(org, &[EventType::OrganizationUpdated], true, t0);
        hooks.push(new.endpoint.id);
        first
            .create_endpoint(new, support::signed_in())
            .await
            .unwrap()
            .unwrap();
    }
    for _ in 0..10 {
        let recorded = NewEvent {
            occurred_at: t0,
            ..event(EventType::OrganizationUpdated, Some(org), None)
        };
        first
            .set_plan(org, Plan::Pro, t0, recorded.clone(), support::signed_in())
            .await
            .unwrap();
        let deliveries = hooks.iter().copied().map(new_delivery).collect();
        first
            .dispatch_event(recorded.id, deliveries, t0)
            .await
            .unwrap();
    }

    let at = t0 + Duration::seconds(1);
    let workers: Vec<_> = [first.clone(), second.clone(), first, second]
        .into_iter()
        .map(|store| {
            tokio::spawn(async move {
                let mut leased = Vec::new();
                loop {
                    let batch = store
                        .lease_deliveries(
                            at,
                            at + Duration::minutes(5),
                            LeaseRoom::new(3, 100),
                            Uuid::new_v4(),
                        )
                        .await
                        .unwrap();
                    if batch.is_empty() {
                        return leased;
                    }
                    leased.extend(batch.into_iter().map(|d| d.id));
                }
            })
        })
        .collect();
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.await.unwrap());
    }
    let distinct: HashSet<_> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "no delivery was leased twice");
    assert_eq!(all.len(), 50, "every delivery was leased");
}

/// PostgreSQL only: a SQLite leaser holds the database's write lock, so no other transaction can
/// hold one delivery while it leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_leaser_beaten_to_the_oldest_delivery_takes_the_next_one() {
    use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

    let db = Db::new(gatehouse_store::Backend::Postgres).await;
    let (_, org) = registered(&db, "ada@example.com").await;
    let hook = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let t0 = now();
    let oldest = delivery_at(&db, org, hook, t0).await;
    let next = delivery_at(&db, org, hook, t0 + Duration::minutes(1)).await;

    // Another process's leaser has locked the oldest, its transaction still open.
    let mut other = AsyncPgConnection::establish(db.url()).await.unwrap();
    diesel::sql_query("BEGIN")
        .execute(&mut other)
        .await
        .unwrap();
    let locked = diesel::sql_query(format!(
        "SELECT id FROM webhook_deliveries WHERE id = '{}' FOR UPDATE",
        oldest.as_uuid()
    ))
    .execute(&mut other)
    .await
    .unwrap();
    assert_eq!(locked, 1);

    // Room for one: not nothing, but the next due.
    let at = t0 + Duration::hours(1);
    let room = LeaseRoom::new(1, 100);
    let leased = db
        .store
        .lease_deliveries(at, at + Duration::minutes(1), room, Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(ids(&leased), [next]);

    // The other leaser gives up without leasing it: it is due again, to whoever asks.
    diesel::sql_query("ROLLBACK")
        .execute(&mut other)
        .await
        .unwrap();
    assert_eq!(ids(&lease(&db, at, &[]).await), [oldest]);
}

/// SQLite only (PostgreSQL plans from the statistics autovacuum keeps): the dispatcher's poll,
/// the undispatched events oldest first, reads them from their own index in its order and stops
/// at its limit, on a fresh database without statistics. With only `occurred_at` in that index,
/// SQLite walked the index of every stored event instead, and every poll read the whole table.
#[tokio::test]
async fn the_outbox_poll_reads_only_the_undispatched_events() {
    let db = Db::new(gatehouse_store::Backend::Sqlite).await;
    let (_, org) = registered(&db, "ada@example.com").await;
    let hook = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let t0 = now();
    for i in 0..20 {
        delivery_at(&db, org, hook, t0 + Duration::milliseconds(i)).await;
    }
    // What registering and the plan changes recorded, dispatched to no one.
    let recorded = db.store.pending_events(100).await.unwrap();
    let nowhere = recorded.iter().map(|e| (e.id, Vec::new())).collect();
    db.store.dispatch_events(nowhere, t0).await.unwrap();
    let waiting = org_event(&db, org, EventType::OrganizationUpdated, t0).await;
    let pending = db.store.pending_events(100).await.unwrap();
    assert_eq!(pending.iter().map(|e| e.id).collect::<Vec<_>>(), [waiting]);

    // The statement `pending_events` makes (diesel's SQL, columns aside).
    let plan = db
        .sqlite_plan(
            "SELECT id FROM events WHERE dispatched_at IS NULL \
             ORDER BY occurred_at ASC, id ASC LIMIT 100",
        )
        .await;
    assert_eq!(
        plan,
        ["SCAN events USING INDEX events_undispatched_time_idx"]
    );
}

/// Vacuums of the deliveries table that this database has run outside autovacuum.
async fn deliveries_vacuumed(db: &Db) -> i64 {
    db.count(
        "SELECT vacuum_count AS n FROM pg_stat_user_tables WHERE relname = 'webhook_deliveries'",
    )
    .await
}

/// PostgreSQL only: every delivery leaves dead index entries that later leases read past until
/// a vacuum removes them, and autovacuum comes once a minute at most; SQLite changes rows in
/// place. The store vacuums the deliveries itself once a burst of them has been recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_recorded_deliveries_is_vacuumed_away_at_once() {
    let db = Db::new(gatehouse_store::Backend::Postgres).await;
    let (_, org) = registered(&db, "ada@example.com").await;
    let t0 = now();
    // Pro: room for 20 endpoints; 20 × 100 events is the burst.
    org_event(&db, org, EventType::OrganizationUpdated, t0).await;
    let mut hooks = Vec::new();
    for _ in 0..20 {
        hooks.push(endpoint(&db, org, &[EventType::OrganizationUpdated]).await);
    }
    for i in 0..100 {
        let at = t0 + Duration::milliseconds(i);
        let event = org_event(&db, org, EventType::OrganizationUpdated, at).await;
        dispatch(&db, event, &hooks, at).await;
    }
    let before = deliveries_vacuumed(&db).await;

    // Delivered, a lease of at most 100 at a time, as the delivery loop does.
    let at = t0 + Duration::minutes(1);
    let mut delivered = 0;
    loop {
        let leased = lease(&db, at, &[]).await;
        if leased.is_empty() {
            break;
        }
        delivered += leased.len();
        let records = leased.iter().map(|d| attempt(d, true, at, None)).collect();
        let effects = db.store.record_attempts(records).await.unwrap();
        assert!(effects.iter().all(|e| *e == NOTHING));
        if delivered < 1_900 {
            assert_eq!(
                deliveries_vacuumed(&db).await,
                before,
                "not before the burst is over"
            );
        }
    }
    assert_eq!(delivered, 2_000);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while deliveries_vacuumed(&db).await == before {
        assert!(
            std::time::Instant::now() < deadline,
            "2,000 recorded deliveries and no vacuum of the deliveries table"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // What the vacuum left: the 2,000 rows, none of them still due.
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE status = 'success'")
            .await,
        2_000
    );
    assert!(lease(&db, at, &[]).await.is_empty());
}

// ---------------------------------------------------------------------------------------------
// Bounds: fair leases, endpoints per plan, retention
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn a_lease_takes_each_organizations_oldest_before_anyones_second(db: Db) {
    let (_, noisy) = registered(&db, "noisy@example.com").await;
    let (_, quiet) = registered(&db, "quiet@example.com").await;
    let types = [EventType::OrganizationUpdated];
    let (slow, slower) = (
        endpoint(&db, noisy, &types).await,
        endpoint(&db, noisy, &types).await,
    );
    let fast = endpoint(&db, quiet, &types).await;
    let t0 = now();
    // The noisy organization's backlog, all due before the quiet one's fresh delivery.
    let mut backlog = Vec::new();
    for minute in 0..6 {
        let hook = if minute % 2 == 0 { slow } else { slower };
        backlog.push(delivery_at(&db, noisy, hook, t0 + Duration::minutes(minute)).await);
    }
    let fresh = delivery_at(&db, quiet, fast, t0 + Duration::minutes(10)).await;

    let at = t0 + Duration::hours(1);
    let room = LeaseRoom::new(2, 100);
    let leased = db
        .store
        .lease_deliveries(at, at + Duration::minutes(1), room, Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(
        ids(&leased),
        [backlog[0], fresh],
        "each organization's oldest first"
    );
    assert_eq!(leased[1].organization_id, quiet);

    // An organization at its share gets nothing more while another waits, however old its
    // backlog.
    let later = delivery_at(&db, quiet, fast, t0 + Duration::minutes(11)).await;
    let last = delivery_at(&db, quiet, fast, t0 + Duration::minutes(12)).await;
    let room = LeaseRoom::new(3, 100)
        .per_organization(2)
        .with_in_flight_of(noisy, 1);
    let leased = db
        .store
        .lease_deliveries(at, at + Duration::minutes(1), room, Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(
        ids(&leased),
        [backlog[1], later, last],
        "one more of noisy's fits, and quiet's two"
    );
    // Alone with work, it may use the free slots but a share's worth: the share binds only
    // while others wait.
    let alone = LeaseRoom::new(5, 100)
        .per_organization(2)
        .with_in_flight_of(noisy, 2);
    let leased = db
        .store
        .lease_deliveries(at, at + Duration::minutes(1), alone, Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(
        ids(&leased),
        backlog[2..5],
        "noisy alone: beyond its share, oldest first"
    );
    // Without a bound, the rest of the backlog, oldest first.
    assert_eq!(ids(&lease(&db, at, &[]).await), backlog[5..]);
}

#[on_both_backends(worker_threads = 4)]
async fn an_organization_has_at_most_its_plans_endpoints(db: Db) {
    let (_, free) = registered(&db, "ada@example.com").await;
    let (_, other) = registered(&db, "bob@example.com").await;
    let types = [EventType::UserCreated];
    for _ in 0..Plan::Free.max_webhook_endpoints() {
        endpoint(&db, free, &types).await;
    }
    let one_more = new_endpoint(free, &types, true, now());
    let refused = db
        .store
        .create_endpoint(one_more.clone(), support::signed_in())
        .await
        .unwrap();
    assert_eq!(
        refused,
        Err(EndpointLimit {
            plan: Plan::Free,
            max: 5
        })
    );
    let listed = db
        .store
        .endpoints(free, None, PageRequest::default())
        .await
        .unwrap();
    assert_eq!(listed.total(), 5, "nothing written");
    // Inactive endpoints count too: turning one off frees no room.
    let inactive = new_endpoint(free, &types, false, now());
    assert_eq!(
        db.store
            .create_endpoint(inactive, support::signed_in())
            .await
            .unwrap(),
        Err(EndpointLimit {
            plan: Plan::Free,
            max: 5
        })
    );
    // Another organization's bound is its own.
    endpoint(&db, other, &types).await;

    // A higher plan has room for more.
    org_event(&db, free, EventType::OrganizationUpdated, now()).await;
    assert_eq!(
        db.store
            .create_endpoint(one_more, support::signed_in())
            .await
            .unwrap(),
        Ok(())
    );
}

#[on_both_backends(worker_threads = 4)]
async fn concurrent_creations_never_pass_the_plans_bound(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let creations: Vec<_> = (0..12)
        .map(|_| {
            let store = db.store.clone();
            let new = new_endpoint(org, &[EventType::UserCreated], true, now());
            tokio::spawn(async move { store.create_endpoint(new, support::signed_in()).await })
        })
        .collect();
    let mut created = 0;
    for creation in creations {
        if creation.await.unwrap().unwrap().is_ok() {
            created += 1;
        }
    }
    assert_eq!(created, 5);
    let listed = db
        .store
        .endpoints(org, None, PageRequest::default())
        .await
        .unwrap();
    assert_eq!(listed.total(), 5);
}

#[on_both_backends(worker_threads = 4)]
async fn finished_deliveries_and_their_events_are_purged_past_retention(db: Db) {
    let (_, org) = registered(&db, "ada@example.com").await;
    let hook = endpoint(&db, org, &[EventType::OrganizationUpdated]).await;
    let t0 = now();
    let old = t0 - Duration::days(40);
    let mut olds = Vec::new();
    for second in 0..4 {
        olds.push(delivery_at(&db, org, hook, old + Duration::seconds(second)).await);
    }
    // An old event not dispatched yet: kept, whatever its age.
    let waiting = NewEvent {
        occurred_at: old,
        ..event(EventType::OrganizationUpdated, Some(org), None)
    };
    db.store
        .set_plan(org, Plan::Pro, old, waiting, support::signed_in())
        .await
        .unwrap();
    let at = old + Duration::minutes(1);
    // Leased until well after now: the fourth is still in flight when the purge runs.
    let leased = db
        .store
        .lease_deliveries(
            at,
            t0 + Duration::days(1),
            LeaseRoom::new(100, 100),
            Uuid::new_v4(),
        )
        .await
        .unwrap();
    assert_eq!(ids(&leased), olds);
    // Delivered; failed for good (a dead letter); failed with a retry to come; the fourth
    // stays leased, its attempt under way.
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[0], true, at, None))
            .await
            .unwrap(),
        NOTHING
    );
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[1], false, at, None))
            .await
            .unwrap(),
        NOTHING
    );
    let retry_at = t0 + Duration::hours(1);
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[2], false, at, Some(retry_at)))
            .await
            .unwrap(),
        NOTHING
    );
    // A recent delivery, delivered.
    let recent = delivery_at(&db, org, hook, t0).await;
    let fresh = lease(&db, t0, &[]).await;
    assert_eq!(ids(&fresh), [recent]);
    db.store
        .record_attempt(attempt(&fresh[0], true, t0, None))
        .await
        .unwrap();

    let events_before = db.count("SELECT COUNT(*) AS n FROM events").await;
    let before = t0 - Duration::days(30);
    // In slices, the oldest first: a slice of one takes the first delivery; events wait
    // until no finished delivery is left to purge.
    let purged = db.store.purge_webhook_history(before, 1).await.unwrap();
    assert_eq!(
        purged,
        PurgedHistory {
            events: 0,
            deliveries: 1
        }
    );
    let kept = async || -> HashSet<DeliveryId> {
        log(&db, org, hook, DeliveryFilter::default())
            .await
            .into_iter()
            .map(|d| d.id)
            .collect()
    };
    assert_eq!(
        kept().await,
        HashSet::from([olds[1], olds[2], olds[3], recent])
    );
    // The next takes the dead letter, then the two events left without a delivery.
    let purged = db.store.purge_webhook_history(before, 1_000).await.unwrap();
    assert_eq!(
        purged,
        PurgedHistory {
            events: 2,
            deliveries: 1
        }
    );
    assert_eq!(kept().await, HashSet::from([olds[2], olds[3], recent]));
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM events").await,
        events_before - 2
    );
    // The kept ones still go on: the lease holds and the retry is due when it was.
    assert_eq!(
        db.store
            .record_attempt(attempt(&leased[3], true, at, None))
            .await
            .unwrap(),
        NOTHING
    );
    assert_eq!(ids(&lease(&db, retry_at, &[]).await), [olds[2]]);

    // Finished now, the fourth goes at the next purge, and its event with it.
    let purged = db.store.purge_webhook_history(before, 1_000).await.unwrap();
    assert_eq!(
        purged,
        PurgedHistory {
            events: 1,
            deliveries: 1
        }
    );
    assert_eq!(
        db.store.purge_webhook_history(before, 1_000).await.unwrap(),
        PurgedHistory::default()
    );
}

/// A second store on the test's database: another replica.
async fn replica(db: &Db) -> std::sync::Arc<dyn gatehouse_store::Store> {
    gatehouse_store::open(db.url(), &StoreOptions::default())
        .await
        .unwrap()
}

#[on_both_backends(worker_threads = 4)]
async fn a_lease_counts_what_every_replica_holds_at_an_endpoint(db: Db) {
    let other = replica(&db).await;
    let (_, org) = registered(&db, "ada@example.com").await;
    let types = [EventType::OrganizationUpdated];
    let (busy, quiet) = (
        endpoint(&db, org, &types).await,
        endpoint(&db, org, &types).await,
    );
    let t0 = now();
    for minute in 0..5 {
        delivery_at(&db, org, busy, t0 + Duration::minutes(minute)).await;
    }
    let at = t0 + Duration::hours(1);
    let until = at + Duration::minutes(1);

    // This replica takes the endpoint's bound (2); the other, with nothing of its own in
    // flight there, takes none: the bound is the cluster's.
    let here = db
        .store
        .lease_deliveries(at, until, LeaseRoom::new(10, 2), Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(here.len(), 2);
    let there = other
        .lease_deliveries(at, until, LeaseRoom::new(10, 2), Uuid::new_v4())
        .await
        .unwrap();
    assert!(
        there.is_empty(),
        "another replica went past the bound: {}",
        there.len()
    );

    // It still leases what fits elsewhere.
    let elsewhere = delivery_at(&db, org, quiet, t0).await;
    let there = other
        .lease_deliveries(at, until, LeaseRoom::new(10, 2), Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(ids(&there), [elsewhere]);

    // A recorded attempt frees its slot for every replica.
    assert_eq!(
        db.store
            .record_attempt(attempt(&here[0], true, at, None))
            .await
            .unwrap(),
        NOTHING
    );
    let there = other
        .lease_deliveries(at, until, LeaseRoom::new(10, 2), Uuid::new_v4())
        .await
        .unwrap();
    assert_eq!(there.len(), 1);
    assert_eq!(there[0].endpoint_id, busy);

    // Leases a dead replica left count until they expire, and no longer.
    let later = until + Duration::seconds(1);
    let after = other
        .lease_deliveries(
            later,
            later + Duration::minutes(1),
            LeaseRoom::new(10, 2),
            Uuid::new_v4(),
        )
        .await
        .unwrap();
    let at_busy = after.iter().filter(|d| d.endpoint_id == busy).count();
    assert_eq!(at_busy, 2, "the expired leases hold no slots");
}

/// PostgreSQL's replicas wake each other: a change committed through one store notifies the
/// other's dispatcher (`NOTIFY gatehouse_outbox` from the change's transaction), and a read
/// does not. (SQLite has one process: its own signal is the whole story.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_committed_on_one_replica_wakes_the_others_dispatcher() {
    let db = Db::new(gatehouse_store::Backend::Postgres).await;
    let other = replica(&db).await;
    let woken = other.outbox_committed();
    // The listener connects in the background; a registration until one is heard.
    let mut heard = false;
    for n in 0..50 {
        registered(&db, &format!("wake{n}@example.com")).await;
        if tokio::time::timeout(std::time::Duration::from_millis(100), woken.notified())
            .await
            .is_ok()
        {
            heard = true;
            break;
        }
    }
    assert!(
        heard,
        "the other replica never heard of the committed events"
    );
    // Drain what came meanwhile, then: a read wakes nobody; a change does, at once.
    while tokio::time::timeout(std::time::Duration::from_millis(300), woken.notified())
        .await
        .is_ok()
    {}
    db.store
        .credentials_by_id(UserId::from_uuid(Uuid::new_v4()))
        .await
        .unwrap();
    assert!(
        matches!(
            tokio::time::timeout(std::time::Duration::from_millis(300), woken.notified()).await,
            Err(tokio::time::error::Elapsed { .. })
        ),
        "a read woke the other replica"
    );
    registered(&db, "last@example.com").await;
    assert!(
        tokio::time::timeout(std::time::Duration::from_secs(5), woken.notified())
            .await
            .is_ok(),
        "a change did not wake the other replica"
    );
}
