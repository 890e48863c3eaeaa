//! The applications store contract, run against both backends (`<name>::postgres` and
//! `<name>::sqlite`): applications are kept per organization with their secret's hash, found by
//! client id, counted, changed and deleted with their events, and deactivated with their
//! organization.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{
        Application, ApplicationId, ApplicationName, ClientId, EventType, NewApplication,
        OrganizationId, PageRequest, RedirectUri, RedirectUris, TokenHash, UserId,
    },
    ports::StoreError,
};
use support::{account, event, now, on_both_backends, Db};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

async fn registered(db: &Db, email: &str) -> (UserId, OrganizationId) {
    let new = account(email, "Someone");
    let ids = (new.user.id, new.workspace.id);
    db.store
        .create_account(new, support::signed_in())
        .await
        .unwrap();
    ids
}

fn app(org: OrganizationId, name: &str, at: OffsetDateTime) -> Application {
    Application {
        id: ApplicationId::from_uuid(Uuid::now_v7()),
        organization_id: org,
        name: ApplicationName::parse(name).unwrap(),
        client_id: ClientId::generate(Uuid::new_v4()),
        redirect_uris: RedirectUris::new(vec![
            RedirectUri::parse("https://app.example.com/cb").unwrap(),
            RedirectUri::parse("http://127.0.0.1:8765/cb").unwrap(),
        ])
        .unwrap(),
        is_active: true,
        require_pkce: false,
        created_at: at,
        updated_at: at,
    }
}

async fn create(db: &Db, app: &Application, secret: &str) {
    let new = NewApplication {
        application: app.clone(),
        secret_hash: TokenHash::of(secret),
    };
    let event = event(
        EventType::ApplicationCreated,
        Some(app.organization_id),
        None,
    );
    assert!(db
        .store
        .create_application(new, event, support::signed_in())
        .await
        .unwrap());
}

async fn pending_of(db: &Db, event_type: EventType) -> usize {
    db.store
        .pending_events(1_000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.event_type == event_type)
        .count()
}

#[on_both_backends(worker_threads = 4)]
async fn applications_are_kept_per_organization_and_found_by_client_id(db: Db) {
    let (_, acme) = registered(&db, "ada@example.com").await;
    let (_, other) = registered(&db, "bob@example.com").await;
    let t0 = now();
    let first = app(acme, "Billing", t0);
    let mut second = app(acme, "Portal", t0 + Duration::seconds(1));
    second.require_pkce = true;
    let theirs = app(other, "Theirs", t0);
    create(&db, &first, "ghcs_first").await;
    create(&db, &second, "ghcs_second").await;
    create(&db, &theirs, "ghcs_theirs").await;
    assert_eq!(pending_of(&db, EventType::ApplicationCreated).await, 3);

    let page = db
        .store
        .applications(acme, PageRequest::default())
        .await
        .unwrap();
    assert_eq!(page.total(), 2);
    assert_eq!(
        page.items(),
        [second.clone(), first.clone()],
        "newest first"
    );
    assert_eq!(
        page.items()
            .iter()
            .map(|a| a.require_pkce)
            .collect::<Vec<_>>(),
        [true, false],
        "require_pkce kept as registered"
    );
    assert_eq!(
        db.store.application(acme, first.id).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(
        db.store.application(other, first.id).await.unwrap(),
        None,
        "not theirs"
    );

    let (found, hash) = db
        .store
        .application_by_client_id(&first.client_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, first);
    assert_eq!(hash, TokenHash::of("ghcs_first"));
    let unknown = ClientId::generate(Uuid::new_v4());
    assert_eq!(
        db.store.application_by_client_id(&unknown).await.unwrap(),
        None
    );

    let org = db.store.organization(acme).await.unwrap().unwrap();
    assert_eq!(org.application_count, 2);
}

#[on_both_backends(worker_threads = 4)]
async fn a_taken_client_id_is_a_conflict_and_writes_nothing(db: Db) {
    let (_, acme) = registered(&db, "ada@example.com").await;
    let first = app(acme, "Billing", now());
    create(&db, &first, "ghcs_first").await;
    let mut copy = app(acme, "Copy", now());
    copy.client_id = first.client_id.clone();
    let new = NewApplication {
        application: copy.clone(),
        secret_hash: TokenHash::of("x"),
    };
    let result = db
        .store
        .create_application(
            new,
            event(EventType::ApplicationCreated, Some(acme), None),
            support::signed_in(),
        )
        .await;
    assert!(matches!(result, Err(StoreError::Conflict)), "{result:?}");
    assert_eq!(db.store.application(acme, copy.id).await.unwrap(), None);
    assert_eq!(pending_of(&db, EventType::ApplicationCreated).await, 1);
}

#[on_both_backends(worker_threads = 4)]
async fn updates_and_deletes_reach_only_the_organizations_own_applications(db: Db) {
    let (_, acme) = registered(&db, "ada@example.com").await;
    let (_, other) = registered(&db, "bob@example.com").await;
    let mut billing = app(acme, "Billing", now());
    create(&db, &billing, "ghcs_old").await;

    billing.name = ApplicationName::parse("Invoices").unwrap();
    billing.redirect_uris =
        RedirectUris::new(vec![
            RedirectUri::parse("https://invoices.example.com/cb").unwrap()
        ])
        .unwrap();
    billing.is_active = false;
    billing.require_pkce = true;
    billing.updated_at = now() + Duration::minutes(1);
    let updated = event(EventType::ApplicationUpdated, Some(acme), None);
    assert!(db
        .store
        .update_application(billing.clone(), None, updated.clone(), support::signed_in())
        .await
        .unwrap());
    assert_eq!(
        db.store.application(acme, billing.id).await.unwrap(),
        Some(billing.clone())
    );
    let (_, hash) = db
        .store
        .application_by_client_id(&billing.client_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hash, TokenHash::of("ghcs_old"), "kept without a new one");

    let rotated = event(EventType::ApplicationUpdated, Some(acme), None);
    assert!(db
        .store
        .update_application(
            billing.clone(),
            Some(TokenHash::of("ghcs_new")),
            rotated,
            support::signed_in()
        )
        .await
        .unwrap());
    let (_, hash) = db
        .store
        .application_by_client_id(&billing.client_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hash, TokenHash::of("ghcs_new"));

    let mut foreign = billing.clone();
    foreign.organization_id = other;
    let event_of_other = event(EventType::ApplicationUpdated, Some(other), None);
    assert!(!db
        .store
        .update_application(foreign, None, event_of_other.clone(), support::signed_in())
        .await
        .unwrap());
    assert!(!db
        .store
        .delete_application(other, billing.id, event_of_other, support::signed_in())
        .await
        .unwrap());
    assert_eq!(
        pending_of(&db, EventType::ApplicationUpdated).await,
        2,
        "no event for what did not happen"
    );

    let deleted = event(EventType::ApplicationDeleted, Some(acme), None);
    assert!(db
        .store
        .delete_application(acme, billing.id, deleted.clone(), support::signed_in())
        .await
        .unwrap());
    assert_eq!(db.store.application(acme, billing.id).await.unwrap(), None);
    assert_eq!(
        db.store
            .application_by_client_id(&billing.client_id)
            .await
            .unwrap(),
        None
    );
    assert!(!db
        .store
        .delete_application(acme, billing.id, deleted, support::signed_in())
        .await
        .unwrap());
    assert_eq!(pending_of(&db, EventType::ApplicationDeleted).await, 1);
    assert_eq!(
        db.store
            .organization(acme)
            .await
            .unwrap()
            .unwrap()
            .application_count,
        0
    );
}

#[on_both_backends(worker_threads = 4)]
async fn deleting_the_organization_deactivates_its_applications(db: Db) {
    let (owner, _) = registered(&db, "ada@example.com").await;
    let team = OrganizationId::from_uuid(Uuid::now_v7());
    db.store
        .create_organization(
            gatehouse_domain::model::NewOrganization {
                id: team,
                name: gatehouse_domain::model::OrganizationName::parse("Acme").unwrap(),
                slug: gatehouse_domain::model::Slug::parse("acme").unwrap(),
                slug_generated: false,
                kind: gatehouse_domain::model::OrganizationType::Team,
                plan: gatehouse_domain::model::Plan::Free,
                created_at: now(),
            },
            owner,
            vec![],
            support::signed_in(),
        )
        .await
        .unwrap();
    let billing = app(team, "Billing", now());
    create(&db, &billing, "ghcs_x").await;
    let at = now() + Duration::minutes(5);
    assert!(db
        .store
        .delete_organization(
            team,
            at,
            event(EventType::OrganizationUpdated, Some(team), None),
            support::signed_in()
        )
        .await
        .unwrap());

    let (found, _) = db
        .store
        .application_by_client_id(&billing.client_id)
        .await
        .unwrap()
        .unwrap();
    assert!(!found.is_active);
    assert_eq!(found.updated_at, at);
    let late = app(team, "Late", now());
    let new = NewApplication {
        application: late,
        secret_hash: TokenHash::of("y"),
    };
    assert!(
        !db.store
            .create_application(
                new,
                event(EventType::ApplicationCreated, Some(team), None),
                support::signed_in()
            )
            .await
            .unwrap(),
        "not in a deleted organization"
    );
}
