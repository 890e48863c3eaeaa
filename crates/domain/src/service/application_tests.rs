//! The application use cases against mocked ports: each test states one rule.

use super::tests::origin;

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    tests::{ada_acting, now, ready, recording, secret_of, Mocks, Seen, ACME},
    Actor, ApplicationError, ApplicationService, ApplicationWithSecret,
};
use crate::model::{
    Application, ApplicationChange, ApplicationId, ApplicationName, AuditAction, AuditRecord,
    AuditTarget, ClientId, EventType, NewApplication, NewEvent, Permission, Plan, RedirectUri,
    RedirectUris, Role, TargetKind, TokenHash, TokenKind,
};

const APP: ApplicationId = ApplicationId::from_uuid(Uuid::from_u128(0xa9_0001));

fn ada_as(role: Role) -> Actor {
    ada_acting(role, Plan::Enterprise)
}

fn uris(raw: &[&str]) -> RedirectUris {
    RedirectUris::new(raw.iter().map(|u| RedirectUri::parse(u).unwrap()).collect()).unwrap()
}

fn billing() -> Application {
    Application {
        id: APP,
        organization_id: ACME,
        name: ApplicationName::parse("Billing").unwrap(),
        client_id: ClientId::generate(Uuid::from_u128(7)),
        redirect_uris: uris(&["https://billing.example.com/cb"]),
        is_active: true,
        require_pkce: false,
        created_at: now() - Duration::days(1),
        updated_at: now() - Duration::days(1),
    }
}

impl Mocks {
    fn store_has(&mut self, app: Option<Application>) {
        self.applications
            .expect_application()
            .withf(|organization, id| *organization == ACME && *id == APP)
            .returning(move |_, _| ready(Ok(app.clone())));
    }
}

/// What the store was asked to save for an update: the application, the hash of its new secret
/// if any, the event and the audit record.
type Update = (Application, Option<TokenHash>, NewEvent, AuditRecord);

/// The service over a store that has Billing and saves its updates, and what they saved (each
/// test checks with [`Seen::only`] that there was one).
fn billing_updated() -> (ApplicationService, Seen<Update>) {
    let mut mocks = Mocks::new();
    mocks.store_has(Some(billing()));
    let saved = recording!(
        mocks.applications.expect_update_application(),
        |app, hash, event, audit| (app, hash, event, audit),
        Ok(true)
    );
    (ApplicationService::new((&mocks.ports()).into()), saved)
}

/// Billing registered by an admin (requiring PKCE or not): the answer, and what was stored
/// with its event.
fn registered(require_pkce: bool) -> (ApplicationWithSecret, NewApplication, NewEvent) {
    let mut mocks = Mocks::new();
    let stored = recording!(
        mocks.applications.expect_create_application().times(1),
        |new, event, _| (new, event),
        Ok(true)
    );
    let service = ApplicationService::new((&mocks.ports()).into());

    let created = block_on(service.create(
        &ada_as(Role::Admin),
        ApplicationName::parse("Billing").unwrap(),
        uris(&["https://billing.example.com/cb"]),
        require_pkce,
        &origin(),
    ))
    .unwrap();
    let (new, event) = stored.only();
    (created, new, event)
}

#[test]
fn creating_stores_the_secret_hashed_shows_it_once_and_records_the_event_without_it() {
    let (created, new, event) = registered(false);

    let secret = secret_of(TokenKind::ClientSecret);
    assert_eq!(created.client_secret.expose(), secret);
    assert!(secret.starts_with("ghcs_"));
    assert_eq!(new.application, created.application);
    assert_eq!(new.secret_hash, TokenHash::of(&secret));
    assert!(created.application.client_id.as_str().starts_with("ghc_"));
    assert_eq!(created.application.organization_id, ACME);
    assert!(created.application.is_active);
    assert!(
        !created.application.require_pkce,
        "PKCE optional unless asked"
    );
    assert_eq!(event.event_type, EventType::ApplicationCreated);
    assert_eq!(event.organization_id, Some(ACME));
    assert_eq!(event.data["name"], "Billing");
    assert_eq!(event.data["require_pkce"], false);
    assert_eq!(
        event.data["client_id"],
        created.application.client_id.as_str()
    );
    assert!(
        !event.data.to_string().contains(&secret),
        "no secret in the event"
    );
}

#[test]
fn members_and_viewers_may_read_but_not_change_applications() {
    for role in [Role::Member, Role::Viewer] {
        let mut mocks = Mocks::new();
        mocks.store_has(Some(billing()));
        mocks.applications.expect_create_application().never();
        mocks.applications.expect_update_application().never();
        mocks.applications.expect_delete_application().never();
        let service = ApplicationService::new((&mocks.ports()).into());
        let actor = ada_as(role);

        assert_eq!(block_on(service.get(&actor, APP)).unwrap(), billing());
        let refused = [
            block_on(service.create(
                &actor,
                ApplicationName::parse("x").unwrap(),
                uris(&["https://x.example.com"]),
                true,
                &origin(),
            ))
            .map(|_| ()),
            block_on(service.update(&actor, APP, ApplicationChange::default(), &origin()))
                .map(|_| ()),
            block_on(service.rotate_secret(&actor, APP, &origin())).map(|_| ()),
            block_on(service.delete(&actor, APP, &origin())),
        ];
        for result in refused {
            match result {
                Err(ApplicationError::Forbidden(forbidden)) => {
                    assert_eq!(forbidden.0, Permission::ApplicationsManage, "{role:?}");
                }
                other => panic!("{role:?}: {other:?}"),
            }
        }
    }
}

#[test]
fn an_update_saves_and_announces_only_what_changed() {
    let (service, saved) = billing_updated();

    let change = ApplicationChange {
        name: Some(ApplicationName::parse("Billing").unwrap()),
        redirect_uris: Some(uris(&["http://127.0.0.1:8000/cb"])),
        is_active: Some(true),
        require_pkce: Some(false),
    };
    let updated = block_on(service.update(&ada_as(Role::Owner), APP, change, &origin())).unwrap();

    let (app, secret_hash, event, _) = saved.only();
    assert_eq!(app, updated);
    assert_eq!(secret_hash, None, "the secret is kept");
    assert_eq!(updated.updated_at, now());
    assert_eq!(event.event_type, EventType::ApplicationUpdated);
    assert_eq!(event.data["changed"], serde_json::json!(["redirect_uris"]));
}

#[test]
fn an_application_registered_requiring_pkce_is_stored_and_announced_so() {
    let (created, new, event) = registered(true);

    assert!(created.application.require_pkce);
    assert!(new.application.require_pkce);
    assert_eq!(event.data["require_pkce"], true);
}

#[test]
fn requiring_pkce_is_saved_announced_and_audited_like_any_change() {
    let (service, saved) = billing_updated();

    let change = ApplicationChange {
        require_pkce: Some(true),
        ..ApplicationChange::default()
    };
    let updated = block_on(service.update(&ada_as(Role::Admin), APP, change, &origin())).unwrap();

    assert!(updated.require_pkce);
    let (app, _, event, record) = saved.only();
    assert!(app.require_pkce);
    assert_eq!(event.event_type, EventType::ApplicationUpdated);
    assert_eq!(event.data["changed"], serde_json::json!(["require_pkce"]));
    assert_eq!(event.data["require_pkce"], true);
    assert_eq!(record.action, AuditAction::ApplicationUpdated);
    assert_eq!(
        record.target,
        Some(AuditTarget::new(TargetKind::Application, APP))
    );
}

#[test]
fn an_update_that_changes_nothing_saves_nothing() {
    let mut mocks = Mocks::new();
    mocks.store_has(Some(billing()));
    mocks.applications.expect_update_application().never();
    let service = ApplicationService::new((&mocks.ports()).into());

    let same = ApplicationChange {
        is_active: Some(true),
        ..ApplicationChange::default()
    };
    assert_eq!(
        block_on(service.update(&ada_as(Role::Admin), APP, same, &origin())).unwrap(),
        billing()
    );
}

#[test]
fn rotating_replaces_the_secret_hash_and_announces_it_without_the_secret() {
    let (service, saved) = billing_updated();

    let rotated = block_on(service.rotate_secret(&ada_as(Role::Admin), APP, &origin())).unwrap();

    let (_, secret_hash, event, _) = saved.only();
    assert_eq!(secret_hash, Some(rotated.client_secret.hash()));
    assert_eq!(event.data["changed"], serde_json::json!(["client_secret"]));
    assert!(!event
        .data
        .to_string()
        .contains(rotated.client_secret.expose()));
}

#[test]
fn an_application_the_organization_does_not_have_is_not_found() {
    let mut mocks = Mocks::new();
    mocks.store_has(None);
    mocks.applications.expect_delete_application().never();
    let service = ApplicationService::new((&mocks.ports()).into());
    let admin = ada_as(Role::Admin);

    assert!(matches!(
        block_on(service.get(&admin, APP)),
        Err(ApplicationError::NotFound)
    ));
    assert!(matches!(
        block_on(service.delete(&admin, APP, &origin())),
        Err(ApplicationError::NotFound)
    ));
}

#[test]
fn deleting_records_the_application_as_it_stood() {
    let mut mocks = Mocks::new();
    mocks.store_has(Some(billing()));
    let deleted = recording!(
        mocks
            .applications
            .expect_delete_application()
            .withf(|organization, id, _, _| *organization == ACME && *id == APP)
            .times(1),
        |_, _, event, _| event,
        Ok(true)
    );
    let service = ApplicationService::new((&mocks.ports()).into());

    block_on(service.delete(&ada_as(Role::Admin), APP, &origin())).unwrap();

    let event = deleted.only();
    assert_eq!(event.event_type, EventType::ApplicationDeleted);
    assert_eq!(event.data["id"], APP.to_string());
}
