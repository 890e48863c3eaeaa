//! The webhook use cases against mocked ports: each test states one rule.
//!
//! Built on the fixtures of [`super::tests`]: the clock is stopped at [`now`], ids count up, and
//! a port a test does not set up panics when touched.

use super::tests::origin;

use std::fmt::Debug;

use futures::executor::block_on;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::{
    mail::in_the_clear,
    tests::{ada_acting, email, now, ready, recording, secret_of, Mocks, Seen, ACME, ADA},
    Actor, AttemptOutcome, CreatedEndpoint, DeliveryEngine, DeliverySettings, EndpointUpdate,
    Forbidden, NewEndpointRequest, SigningSecret, WebhookError, WebhookService,
    DISABLE_AFTER_FAILURES,
};
use crate::{
    model::{
        Delivery, DeliveryId, DeliveryState, DeliveryStatus, EndpointDescription, EndpointId,
        EventId, EventType, Member, MemberStatus, OrganizationId, Page, PageRequest, Permission,
        Plan, Role, TokenKind, UserId, WebhookEndpoint, WebhookUrl,
    },
    ports::{
        AttemptEffects, AttemptRecord, CipherError, DeliveryFilter, EndpointChange, EndpointLimit,
        LeasedDelivery, NewDelivery, NewEndpoint, PendingEvent, RetryOutcome, SendTarget, SentTest,
        StoreError, WebhookRequest, WebhookResponse,
    },
};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

const HOOK: EndpointId = EndpointId::from_uuid(Uuid::from_u128(0xe9_0001));
const OTHER_HOOK: EndpointId = EndpointId::from_uuid(Uuid::from_u128(0xe9_0002));
const DELIVERY: DeliveryId = DeliveryId::from_uuid(Uuid::from_u128(0xd1_0001));
const EVENT: EventId = EventId::from_uuid(Uuid::from_u128(0xe7_0001));
const LEASE: Uuid = Uuid::from_u128(0x1ea5e);
const GRACE: UserId = UserId::from_uuid(Uuid::from_u128(0x6ace));

const HOOK_URL: &str = "https://hooks.example.com/in";
/// What the fake cipher seals every secret into: nothing of the plaintext in it.
const SEALED: &[u8] = b"\x00opaque-sealed-bytes\xff";
/// A secret the customer chose.
const CHOSEN_SECRET: &str = "my-very-own-signing-secret-0123";
/// The secret the fake cipher opens [`SEALED`] into.
const ENDPOINT_SECRET: &str = "whsec_the-endpoints-secret-0123456789abcdef";
/// A leased delivery's body, sent and signed byte for byte.
const PAYLOAD: &str = r#"{"event":"member.joined","data":{"user_id":"ada"}}"#;

/// The `n`th id the mocked `Random` hands out.
fn issued_uuid(n: u128) -> Uuid {
    Uuid::from_u128((0xf000_0000 << 96) | n)
}

fn url() -> WebhookUrl {
    WebhookUrl::parse(HOOK_URL).unwrap()
}

/// Ada acting in Acme with `role`.
fn ada_as(role: Role) -> Actor {
    ada_acting(role, Plan::Pro)
}

/// A new endpoint at [`url`] subscribing to `events`, with no description and a generated
/// secret.
fn subscribing_to(events: Vec<EventType>) -> NewEndpointRequest {
    NewEndpointRequest {
        url: url(),
        events,
        description: EndpointDescription::default(),
        secret: None,
    }
}

fn admin() -> Actor {
    ada_as(Role::Admin)
}

fn secret(raw: &str) -> SigningSecret {
    SigningSecret::parse(raw).unwrap()
}

fn endpoint() -> WebhookEndpoint {
    WebhookEndpoint {
        id: HOOK,
        organization_id: ACME,
        url: url(),
        description: "CRM sync".to_owned(),
        events: vec![EventType::MemberJoined],
        is_active: true,
        created_at: now() - Duration::days(2),
        updated_at: now(),
    }
}

fn failed_delivery() -> Delivery {
    Delivery {
        id: DELIVERY,
        webhook_id: HOOK,
        organization_id: ACME,
        event_id: EVENT,
        event: EventType::MemberJoined,
        status: DeliveryStatus::Pending,
        attempt: 6,
        http_status: None,
        request_body: None,
        response_body: None,
        duration_ms: None,
        delivered_at: None,
        next_retry_at: Some(now()),
        created_at: now() - Duration::hours(3),
    }
}

fn page_of<T>(items: Vec<T>) -> Page<T> {
    let total = items.len() as u64;
    Page::new(items, total, PageRequest::default())
}

fn grace_the_owner() -> Member {
    Member {
        organization_id: ACME,
        user_id: Some(GRACE),
        email: email("grace@example.com"),
        full_name: None,
        role: Role::Owner.into(),
        status: MemberStatus::Active,
        invitation_id: None,
        invited_at: None,
        invited_by: None,
        accepted_at: None,
        joined_at: now() - Duration::days(300),
    }
}

fn cipher_failure() -> CipherError {
    CipherError("the key is wrong".into())
}

fn assert_forbidden<T: Debug>(result: Result<T, WebhookError>) {
    assert_missing(result, Permission::WebhooksManage);
}

/// Reading endpoints and their deliveries needs `webhooks.read`.
fn assert_read_forbidden<T: Debug>(result: Result<T, WebhookError>) {
    assert_missing(result, Permission::WebhooksRead);
}

fn assert_missing<T: Debug>(result: Result<T, WebhookError>, permission: Permission) {
    assert!(
        matches!(
            &result,
            Err(WebhookError::Forbidden(Forbidden(missing))) if *missing == permission
        ),
        "{result:?}"
    );
}

impl Mocks {
    fn webhook_service(self) -> WebhookService {
        WebhookService::new((&self.ports()).into())
    }

    fn delivery_engine(self) -> DeliveryEngine {
        DeliveryEngine::new((&self.ports()).into(), DeliverySettings::default())
    }

    /// The cipher seals anything into [`SEALED`], once, and keeps (plaintext, context).
    fn cipher_seals(&mut self) -> Seen<(Vec<u8>, Vec<u8>)> {
        let sealed = Seen::new();
        let seen = sealed.clone();
        self.cipher
            .expect_seal()
            .times(1)
            .returning(move |plaintext, context| {
                seen.record((plaintext.to_vec(), context.to_vec()));
                Ok(SEALED.to_vec())
            });
        sealed
    }

    /// The store accepts the new endpoint, once, and keeps it.
    fn store_creates_endpoint(&mut self) -> Seen<NewEndpoint> {
        recording!(
            self.webhooks.expect_create_endpoint().times(1),
            |endpoint, _| endpoint,
            Ok(Ok(()))
        )
    }

    /// The store updates the endpoint, once, and keeps (organization, id, change, at).
    fn store_updates_endpoint(
        &mut self,
    ) -> Seen<(OrganizationId, EndpointId, EndpointChange, OffsetDateTime)> {
        recording!(
            self.webhooks.expect_update_endpoint().times(1),
            |organization, id, change, at, _| (organization, id, change, at),
            Ok(Some(endpoint()))
        )
    }

    /// The sealed secret of [`HOOK`] opens into [`ENDPOINT_SECRET`].
    fn secret_opens(&mut self) {
        self.cipher
            .expect_open()
            .withf(|sealed, context| sealed == SEALED && context == HOOK.as_uuid().as_bytes())
            .times(1)
            .returning(|_, _| Ok(ENDPOINT_SECRET.as_bytes().to_vec()));
    }

    /// The receiver gives `response`, once, and the request is kept.
    fn receiver_gives(&mut self, response: WebhookResponse) -> Seen<WebhookRequest> {
        recording!(
            self.sender.expect_send().times(1),
            |request| request,
            response.clone()
        )
    }

    /// The receiver answers `status` with a short body.
    fn receiver_answers(&mut self, status: u16) -> Seen<WebhookRequest> {
        self.receiver_gives(WebhookResponse::Answered {
            status,
            body: format!("answered {status}"),
            duration_ms: 42,
        })
    }

    /// The lease holds: the attempt is recorded, once, with `effects`.
    fn store_records_attempt(&mut self, effects: Option<AttemptEffects>) -> Seen<AttemptRecord> {
        let recorded = Seen::new();
        let seen = recorded.clone();
        self.delivery_queue
            .expect_record_attempts()
            .times(1)
            .returning(move |records| {
                let answers = vec![effects.clone(); records.len()];
                records.into_iter().for_each(|record| seen.record(record));
                ready(Ok(answers))
            });
        recorded
    }

    /// Recording the attempt changes nothing beyond the delivery.
    fn attempt_is_recorded(&mut self) -> Seen<AttemptRecord> {
        self.store_records_attempt(Some(AttemptEffects {
            endpoint_disabled: false,
        }))
    }

    /// Nobody is told anything by mail.
    fn no_mail(&mut self) {
        self.members.expect_members().never();
        self.mailer.expect_send().never();
    }
}

// ---------------------------------------------------------------------------------------------
// WebhookService: permission
// ---------------------------------------------------------------------------------------------

#[test]
fn every_webhook_operation_needs_webhooks_read_or_manage_and_touches_nothing_without_it() {
    for role in [Role::Member, Role::Viewer] {
        let mut mocks = Mocks::new();
        mocks.webhooks.expect_create_endpoint().never();
        mocks.webhooks.expect_endpoints().never();
        mocks.webhooks.expect_endpoint().never();
        mocks.webhooks.expect_update_endpoint().never();
        mocks.webhooks.expect_delete_endpoint().never();
        mocks.webhooks.expect_deliveries().never();
        mocks.webhooks.expect_retry_delivery().never();
        mocks.webhooks.expect_send_target().never();
        mocks.webhooks.expect_record_test().never();
        mocks.sender.expect_send().never();
        mocks.cipher.expect_seal().never();
        let service = mocks.webhook_service();
        let actor = ada_as(role);

        assert_forbidden(block_on(service.create(
            &actor,
            NewEndpointRequest {
                url: url(),
                events: vec![EventType::MemberJoined],
                description: EndpointDescription::default(),
                secret: None,
            },
            &origin(),
        )));
        assert_read_forbidden(block_on(service.list(&actor, None, PageRequest::default())));
        assert_read_forbidden(block_on(service.get(&actor, HOOK)));
        assert_forbidden(block_on(service.update(
            &actor,
            HOOK,
            EndpointUpdate {
                secret: Some(secret(CHOSEN_SECRET)),
                ..EndpointUpdate::default()
            },
            &origin(),
        )));
        assert_forbidden(block_on(service.delete(&actor, HOOK, &origin())));
        assert_read_forbidden(block_on(service.deliveries(
            &actor,
            HOOK,
            DeliveryFilter::default(),
            PageRequest::default(),
        )));
        assert_forbidden(block_on(service.retry(&actor, DELIVERY, &origin())));
        assert_forbidden(block_on(service.test(&actor, HOOK, &origin())));
    }
}

// ---------------------------------------------------------------------------------------------
// WebhookService::create
// ---------------------------------------------------------------------------------------------

#[test]
fn create_subscribes_to_each_event_type_once_in_the_order_given() {
    let mut mocks = Mocks::new();
    mocks.cipher_seals();
    let created = mocks.store_creates_endpoint();

    let endpoint = block_on(mocks.webhook_service().create(
        &admin(),
        NewEndpointRequest {
            url: url(),
            events: vec![
                EventType::MemberJoined,
                EventType::UserCreated,
                EventType::MemberJoined,
                EventType::UserCreated,
                EventType::AuthLogin,
            ],
            description: EndpointDescription::parse("CRM sync").unwrap(),
            secret: None,
        },
        &origin(),
    ))
    .unwrap()
    .endpoint;

    let expected = vec![
        EventType::MemberJoined,
        EventType::UserCreated,
        EventType::AuthLogin,
    ];
    assert_eq!(endpoint.events, expected);
    assert_eq!(created.only().endpoint.events, expected);
}

#[test]
fn an_endpoint_beyond_the_plans_bound_is_refused_naming_the_bound() {
    assert_eq!(
        Plan::ALL.map(Plan::max_webhook_endpoints),
        [5, 10, 20, 50, 200]
    );
    let mut mocks = Mocks::new();
    mocks
        .cipher
        .expect_seal()
        .returning(|_, _| Ok(SEALED.to_vec()));
    mocks
        .webhooks
        .expect_create_endpoint()
        .times(1)
        .returning(|_, _| ready(Ok(Err(EndpointLimit::of(Plan::Free)))));
    let result = block_on(mocks.webhook_service().create(
        &admin(),
        subscribing_to(vec![EventType::MemberJoined]),
        &origin(),
    ));
    match result {
        Err(error @ WebhookError::TooManyEndpoints(limit)) => {
            assert_eq!(
                limit,
                EndpointLimit {
                    plan: Plan::Free,
                    max: 5
                }
            );
            assert_eq!(
                error.to_string(),
                "at most 5 webhook endpoints on the free plan: delete one first"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_endpoint_on_a_literal_private_address_is_refused_unless_private_targets_are_allowed() {
    let metadata = || WebhookUrl::parse("https://169.254.169.254/latest/meta-data").unwrap();
    let request = || NewEndpointRequest {
        url: metadata(),
        events: vec![EventType::MemberJoined],
        description: EndpointDescription::default(),
        secret: None,
    };
    let mut mocks = Mocks::new();
    mocks.cipher.expect_seal().never();
    mocks.webhooks.expect_create_endpoint().never();
    mocks.webhooks.expect_update_endpoint().never();
    let service = mocks.webhook_service();
    let result = block_on(service.create(&admin(), request(), &origin()));
    assert!(
        matches!(result, Err(WebhookError::PrivateTarget)),
        "{result:?}"
    );
    let update = EndpointUpdate {
        url: Some(WebhookUrl::parse("https://[::1]:8443/hook").unwrap()),
        ..EndpointUpdate::default()
    };
    let result = block_on(service.update(&admin(), HOOK, update, &origin()));
    assert!(
        matches!(result, Err(WebhookError::PrivateTarget)),
        "{result:?}"
    );

    // GATEHOUSE_WEBHOOK_ALLOW_PRIVATE_TARGETS: for development and tests.
    let mut mocks = Mocks::new();
    mocks.cipher_seals();
    mocks.store_creates_endpoint();
    let service = mocks.webhook_service().allowing_private_targets(true);
    assert!(block_on(service.create(&admin(), request(), &origin())).is_ok());
}

#[test]
fn create_with_no_event_types_is_refused_and_nothing_is_sealed_or_stored() {
    let mut mocks = Mocks::new();
    mocks.cipher.expect_seal().never();
    mocks.webhooks.expect_create_endpoint().never();

    let result = block_on(mocks.webhook_service().create(
        &admin(),
        NewEndpointRequest {
            url: url(),
            events: Vec::new(),
            description: EndpointDescription::default(),
            secret: Some(secret(CHOSEN_SECRET)),
        },
        &origin(),
    ));

    assert!(matches!(result, Err(WebhookError::NoEvents)), "{result:?}");
}

#[test]
fn create_without_a_secret_generates_a_whsec_secret_and_returns_it_once() {
    let mut mocks = Mocks::new();
    let sealed = mocks.cipher_seals();
    mocks.store_creates_endpoint();

    let created = block_on(mocks.webhook_service().create(
        &admin(),
        subscribing_to(vec![EventType::MemberJoined]),
        &origin(),
    ))
    .unwrap();

    let generated = secret_of(TokenKind::WebhookSecret);
    assert!(generated.starts_with("whsec_"));
    assert_eq!(created.signing_secret.expose(), generated);
    assert_eq!(sealed.only().0, generated.as_bytes());
}

#[test]
fn create_makes_an_active_endpoint_of_the_actors_organization() {
    let mut mocks = Mocks::new();
    mocks.cipher_seals();
    let created = mocks.store_creates_endpoint();

    let endpoint = block_on(mocks.webhook_service().create(
        &admin(),
        NewEndpointRequest {
            url: url(),
            events: vec![EventType::MemberJoined],
            description: EndpointDescription::parse("CRM sync").unwrap(),
            secret: None,
        },
        &origin(),
    ))
    .unwrap()
    .endpoint;

    assert_eq!(
        endpoint,
        WebhookEndpoint {
            id: EndpointId::from_uuid(issued_uuid(1)),
            organization_id: ACME,
            url: url(),
            description: "CRM sync".to_owned(),
            events: vec![EventType::MemberJoined],
            is_active: true,
            created_at: now(),
            updated_at: now(),
        }
    );
    assert_eq!(created.only().endpoint, endpoint);
}

/// An admin creates an endpoint for `member.joined` with [`CHOSEN_SECRET`].
fn created_with_chosen_secret(mocks: Mocks) -> CreatedEndpoint {
    block_on(mocks.webhook_service().create(
        &admin(),
        NewEndpointRequest {
            url: url(),
            events: vec![EventType::MemberJoined],
            description: EndpointDescription::default(),
            secret: Some(secret(CHOSEN_SECRET)),
        },
        &origin(),
    ))
    .unwrap()
}

#[test]
fn create_seals_the_secret_for_its_endpoint_and_stores_only_the_sealed_bytes() {
    let mut mocks = Mocks::new();
    let sealed = mocks.cipher_seals();
    let created = mocks.store_creates_endpoint();

    let result = created_with_chosen_secret(mocks);

    assert_eq!(result.signing_secret.expose(), CHOSEN_SECRET);
    let (plaintext, context) = sealed.only();
    let stored = created.only();
    assert_eq!(plaintext, CHOSEN_SECRET.as_bytes());
    assert_eq!(context, stored.endpoint.id.as_uuid().as_bytes());
    assert_eq!(context.len(), 16);
    assert_eq!(stored.secret_sealed, SEALED);
    let printed = format!("{stored:?}");
    assert!(!printed.contains(CHOSEN_SECRET), "{printed}");
}

#[test]
fn create_stores_nothing_when_the_secret_cannot_be_sealed() {
    let mut mocks = Mocks::new();
    mocks
        .cipher
        .expect_seal()
        .times(1)
        .returning(|_, _| Err(cipher_failure()));
    mocks.webhooks.expect_create_endpoint().never();

    let result = block_on(mocks.webhook_service().create(
        &admin(),
        subscribing_to(vec![EventType::MemberJoined]),
        &origin(),
    ));

    assert!(matches!(result, Err(WebhookError::Cipher(_))), "{result:?}");
}

#[test]
fn a_created_endpoint_does_not_debug_print_its_secret() {
    let mut mocks = Mocks::new();
    mocks.cipher_seals();
    mocks.store_creates_endpoint();

    let created = created_with_chosen_secret(mocks);

    let printed = format!("{created:?}");
    assert!(!printed.contains(CHOSEN_SECRET), "{printed}");
}

// ---------------------------------------------------------------------------------------------
// WebhookService::update
// ---------------------------------------------------------------------------------------------

#[test]
fn update_with_a_new_secret_seals_it_for_that_endpoint() {
    let mut mocks = Mocks::new();
    let sealed = mocks.cipher_seals();
    let updated = mocks.store_updates_endpoint();

    block_on(mocks.webhook_service().update(
        &admin(),
        HOOK,
        EndpointUpdate {
            secret: Some(secret(CHOSEN_SECRET)),
            ..EndpointUpdate::default()
        },
        &origin(),
    ))
    .unwrap();

    let (plaintext, context) = sealed.only();
    assert_eq!(plaintext, CHOSEN_SECRET.as_bytes());
    assert_eq!(context, HOOK.as_uuid().as_bytes());
    let (organization, id, change, at) = updated.only();
    assert_eq!((organization, id, at), (ACME, HOOK, now()));
    assert_eq!(
        change,
        EndpointChange {
            secret_sealed: Some(SEALED.to_vec()),
            ..EndpointChange::default()
        }
    );
}

#[test]
fn update_without_a_secret_leaves_it_unsealed_and_deduplicates_events() {
    let mut mocks = Mocks::new();
    mocks.cipher.expect_seal().never();
    let updated = mocks.store_updates_endpoint();

    block_on(mocks.webhook_service().update(
        &admin(),
        HOOK,
        EndpointUpdate {
            events: Some(vec![
                EventType::AuthLogin,
                EventType::AuthLogin,
                EventType::AuthLogout,
            ]),
            is_active: Some(true),
            ..EndpointUpdate::default()
        },
        &origin(),
    ))
    .unwrap();

    let (_, _, change, _) = updated.only();
    assert_eq!(
        change,
        EndpointChange {
            events: Some(vec![EventType::AuthLogin, EventType::AuthLogout]),
            is_active: Some(true),
            ..EndpointChange::default()
        }
    );
}

#[test]
fn update_to_no_event_types_is_refused() {
    let mut mocks = Mocks::new();
    mocks.webhooks.expect_update_endpoint().never();

    let result = block_on(mocks.webhook_service().update(
        &admin(),
        HOOK,
        EndpointUpdate {
            events: Some(Vec::new()),
            ..EndpointUpdate::default()
        },
        &origin(),
    ));

    assert!(matches!(result, Err(WebhookError::NoEvents)), "{result:?}");
}

#[test]
fn update_of_an_endpoint_the_organization_does_not_have_is_not_found() {
    let mut mocks = Mocks::new();
    mocks
        .webhooks
        .expect_update_endpoint()
        .times(1)
        .returning(|_, _, _, _, _| ready(Ok(None)));

    let result = block_on(mocks.webhook_service().update(
        &admin(),
        HOOK,
        EndpointUpdate {
            description: Some(EndpointDescription::parse("renamed").unwrap()),
            ..EndpointUpdate::default()
        },
        &origin(),
    ));

    assert!(
        matches!(result, Err(WebhookError::EndpointNotFound)),
        "{result:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// WebhookService::retry
// ---------------------------------------------------------------------------------------------

fn retry_when_store_says(outcome: RetryOutcome) -> Result<Delivery, WebhookError> {
    let mut mocks = Mocks::new();
    mocks
        .webhooks
        .expect_retry_delivery()
        .withf(|organization, id, at, _| *organization == ACME && *id == DELIVERY && *at == now())
        .times(1)
        .returning(move |_, _, _, _| ready(Ok(outcome.clone())));
    block_on(mocks.webhook_service().retry(&admin(), DELIVERY, &origin()))
}

#[test]
fn retry_of_a_delivery_requeued_by_the_store_returns_it() {
    let result = retry_when_store_says(RetryOutcome::Queued(failed_delivery()));
    assert_eq!(result.unwrap(), failed_delivery());
}

#[test]
fn retry_is_refused_for_each_delivery_the_store_will_not_requeue() {
    for outcome in [
        RetryOutcome::AlreadyPending,
        RetryOutcome::AlreadySucceeded,
        RetryOutcome::NotRetryable,
        RetryOutcome::NotFound,
    ] {
        let result = retry_when_store_says(outcome.clone());
        assert!(
            matches!(
                (&outcome, &result),
                (RetryOutcome::AlreadyPending, Err(WebhookError::AlreadyPending))
                    // Only a failed delivery is retried, not one that succeeded.
                    | (RetryOutcome::AlreadySucceeded, Err(WebhookError::AlreadySucceeded))
                    // A test ping is not retried: another test is another ping.
                    | (RetryOutcome::NotRetryable, Err(WebhookError::NotRetryable))
                    | (RetryOutcome::NotFound, Err(WebhookError::DeliveryNotFound))
            ),
            "{outcome:?}: {result:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// DeliveryEngine::dispatch
// ---------------------------------------------------------------------------------------------

fn pending(id: EventId, organization_id: Option<OrganizationId>) -> PendingEvent {
    PendingEvent {
        id,
        event_type: EventType::MemberJoined,
        organization_id,
        data: json!({ "user_id": ADA, "role": "member" }),
        occurred_at: now() - Duration::seconds(5),
    }
}

impl Mocks {
    fn outbox_holds(&mut self, events: Vec<PendingEvent>) {
        self.delivery_queue
            .expect_pending_events()
            .withf(|limit| *limit == 50)
            .times(1)
            .returning(move |_| ready(Ok(events.clone())));
    }

    /// The store creates the deliveries of each event and marks it dispatched, in one call;
    /// keeps (event, deliveries, at) of each.
    fn store_dispatches(&mut self) -> Seen<(EventId, Vec<NewDelivery>, OffsetDateTime)> {
        let dispatched = Seen::new();
        let seen = dispatched.clone();
        self.delivery_queue
            .expect_dispatch_events()
            .times(1)
            .returning(move |events, at| {
                for (event, deliveries) in events {
                    seen.record((event, deliveries, at));
                }
                ready(Ok(()))
            });
        dispatched
    }
}

#[test]
fn dispatch_makes_one_delivery_per_subscribed_endpoint_with_the_documented_payload() {
    let mut mocks = Mocks::new();
    let event = pending(EVENT, Some(ACME));
    mocks.outbox_holds(vec![event.clone()]);
    mocks
        .delivery_queue
        .expect_subscribed_endpoints()
        .withf(|organization, event| *organization == ACME && *event == EventType::MemberJoined)
        .times(1)
        .returning(|_, _| ready(Ok(vec![HOOK, OTHER_HOOK])));
    let dispatched = mocks.store_dispatches();

    let count = block_on(mocks.delivery_engine().dispatch(50)).unwrap();

    assert_eq!(count, 1);
    let (event_id, deliveries, at) = dispatched.only();
    assert_eq!((event_id, at), (EVENT, now()));
    let endpoints: Vec<_> = deliveries.iter().map(|d| d.endpoint_id).collect();
    assert_eq!(endpoints, [HOOK, OTHER_HOOK]);
    let ids: Vec<_> = deliveries.iter().map(|d| d.id).collect();
    assert_eq!(
        ids,
        [
            DeliveryId::from_uuid(issued_uuid(1)),
            DeliveryId::from_uuid(issued_uuid(2))
        ]
    );
    for delivery in &deliveries {
        let payload: serde_json::Value = serde_json::from_str(&delivery.payload).unwrap();
        let object = payload.as_object().unwrap();
        let mut keys: Vec<_> = object.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["data", "delivery_id", "event", "timestamp", "webhook_id"]
        );
        assert_eq!(object["event"], "member.joined");
        assert_eq!(object["data"], event.data);
        let timestamp =
            crate::model::timestamp::parse(object["timestamp"].as_str().unwrap()).unwrap();
        assert_eq!(timestamp, event.occurred_at);
        let webhook_id = object["webhook_id"].as_str().unwrap();
        assert!(webhook_id.starts_with("ep_"), "{webhook_id}");
        assert_eq!(webhook_id, delivery.endpoint_id.to_string());
        let delivery_id = object["delivery_id"].as_str().unwrap();
        assert!(delivery_id.starts_with("dlv_"), "{delivery_id}");
        assert_eq!(delivery_id, delivery.id.to_string());
    }
}

#[test]
fn dispatch_of_an_event_without_organization_marks_it_dispatched_with_no_deliveries() {
    let mut mocks = Mocks::new();
    mocks.outbox_holds(vec![pending(EVENT, None)]);
    mocks.delivery_queue.expect_subscribed_endpoints().never();
    let dispatched = mocks.store_dispatches();

    let count = block_on(mocks.delivery_engine().dispatch(50)).unwrap();

    assert_eq!(count, 1);
    let (event_id, deliveries, _) = dispatched.only();
    assert_eq!(event_id, EVENT);
    assert!(deliveries.is_empty());
}

#[test]
fn dispatch_marks_every_event_dispatched_and_returns_how_many_there_were() {
    let mut mocks = Mocks::new();
    let events = [0xe7_0001, 0xe7_0002, 0xe7_0003].map(|n| EventId::from_uuid(Uuid::from_u128(n)));
    mocks.outbox_holds(vec![
        pending(events[0], Some(ACME)),
        pending(events[1], None),
        pending(events[2], Some(ACME)),
    ]);
    mocks
        .delivery_queue
        .expect_subscribed_endpoints()
        .times(1)
        .returning(|_, _| ready(Ok(Vec::new())));
    let dispatched = mocks.store_dispatches();

    let count = block_on(mocks.delivery_engine().dispatch(50)).unwrap();

    assert_eq!(count, 3);
    let marked: Vec<_> = dispatched
        .all()
        .into_iter()
        .map(|(event, _, _)| event)
        .collect();
    assert_eq!(marked, events, "in one transaction, in order");
}

#[test]
fn dispatch_of_an_empty_outbox_does_nothing() {
    let mut mocks = Mocks::new();
    mocks.outbox_holds(Vec::new());
    mocks.delivery_queue.expect_dispatch_events().never();

    assert_eq!(block_on(mocks.delivery_engine().dispatch(50)).unwrap(), 0);
}

// ---------------------------------------------------------------------------------------------
// DeliveryEngine::attempt
// ---------------------------------------------------------------------------------------------

/// Attempt `attempt` of a delivery of `member.joined` to [`HOOK`].
fn leased(attempt: u32) -> LeasedDelivery {
    LeasedDelivery {
        id: DELIVERY,
        endpoint_id: HOOK,
        organization_id: ACME,
        url: url(),
        secret_sealed: SEALED.to_vec(),
        event: EventType::MemberJoined,
        payload: PAYLOAD.to_owned(),
        state: DeliveryState::restore(DeliveryStatus::Pending, attempt, Some(now())).unwrap(),
        lease: LEASE,
        created_at: now(),
    }
}

fn attempt(mocks: Mocks, attempt: u32) -> AttemptOutcome {
    block_on(mocks.delivery_engine().attempt(leased(attempt))).unwrap()
}

fn header<'a>(request: &'a WebhookRequest, name: &str) -> &'a str {
    request
        .headers
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} header"))
}

#[test]
fn an_attempt_sends_the_payload_with_the_six_headers() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    let sent = mocks.receiver_answers(200);
    mocks.attempt_is_recorded();

    attempt(mocks, 1);

    let request = sent.only();
    assert_eq!(request.url, url());
    assert_eq!(request.body, PAYLOAD.as_bytes());
    let names: Vec<_> = request.headers.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "Content-Type",
            "User-Agent",
            "X-Service-Event",
            "X-Service-Delivery-ID",
            "X-Service-Timestamp",
            "X-Service-Signature",
        ]
    );
    assert_eq!(header(&request, "Content-Type"), "application/json");
    assert_eq!(header(&request, "User-Agent"), "Service-Webhooks/1.0");
    assert_eq!(header(&request, "X-Service-Event"), "member.joined");
    assert_eq!(
        header(&request, "X-Service-Delivery-ID"),
        DELIVERY.to_string()
    );
    assert_eq!(
        header(&request, "X-Service-Timestamp"),
        now().unix_timestamp().to_string()
    );
}

#[test]
fn the_signature_verifies_as_hmac_sha256_of_timestamp_dot_body_under_the_endpoint_secret() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    let sent = mocks.receiver_answers(200);
    mocks.attempt_is_recorded();

    attempt(mocks, 1);

    let request = sent.only();
    let timestamp = header(&request, "X-Service-Timestamp");
    let signature = header(&request, "X-Service-Signature");
    let digest = hex::decode(signature.strip_prefix("sha256=").unwrap()).unwrap();
    let verify = |key: &[u8], signed: &[u8]| {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
        mac.update(signed);
        mac.verify_slice(&digest).is_ok()
    };
    let signed = [timestamp.as_bytes(), b".", &request.body].concat();
    assert!(verify(ENDPOINT_SECRET.as_bytes(), &signed));
    // ... and by nothing else: not another key, not the body alone.
    assert!(!verify(CHOSEN_SECRET.as_bytes(), &signed));
    assert!(!verify(ENDPOINT_SECRET.as_bytes(), &request.body));
}

#[test]
fn a_2xx_answer_is_delivered_and_nothing_more_is_scheduled() {
    for status in [200, 201, 204, 299] {
        let mut mocks = Mocks::new();
        mocks.secret_opens();
        mocks.receiver_answers(status);
        let recorded = mocks.attempt_is_recorded();
        mocks.no_mail();

        assert_eq!(attempt(mocks, 2), AttemptOutcome::Delivered, "{status}");

        assert_eq!(
            recorded.only(),
            AttemptRecord {
                delivery_id: DELIVERY,
                endpoint_id: HOOK,
                lease: LEASE,
                state: DeliveryState::restore(DeliveryStatus::Success, 2, None).unwrap(),
                http_status: Some(status),
                response_body: Some(format!("answered {status}")),
                duration_ms: 42,
                attempted_at: now(),
                disable_after_failures: DISABLE_AFTER_FAILURES,
            }
        );
    }
}

#[test]
fn a_500_on_the_first_attempt_is_retried_after_the_first_delay_of_the_schedule() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    mocks.receiver_answers(500);
    let recorded = mocks.attempt_is_recorded();
    mocks.no_mail();

    let outcome = attempt(mocks, 1);

    let retry_at = now() + Duration::seconds(60);
    assert_eq!(
        outcome,
        AttemptOutcome::Failed {
            retry_at: Some(retry_at)
        }
    );
    let record = recorded.only();
    assert!(!record.succeeded());
    assert_eq!(record.http_status, Some(500));
    assert_eq!(record.response_body.as_deref(), Some("answered 500"));
    assert_eq!(record.state.attempt(), 1);
    assert_eq!(record.state.next_attempt_at(), Some(retry_at));
}

#[test]
fn a_failed_fifth_attempt_fails_the_delivery_for_good() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    mocks.receiver_answers(503);
    let recorded = mocks.attempt_is_recorded();

    assert_eq!(attempt(mocks, 5), AttemptOutcome::Failed { retry_at: None });
    let record = recorded.only();
    assert!(!record.succeeded());
    assert_eq!(record.state.next_attempt_at(), None);
}

#[test]
fn a_failed_manual_retry_has_no_follow_up() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    mocks.receiver_answers(500);
    let recorded = mocks.attempt_is_recorded();

    assert_eq!(attempt(mocks, 6), AttemptOutcome::Failed { retry_at: None });
    assert_eq!(recorded.only().state.next_attempt_at(), None);
}

#[test]
fn no_answer_is_a_failed_attempt_with_the_error_as_response_body() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    mocks.receiver_gives(WebhookResponse::Failed {
        error: "timed out after 10 s".to_owned(),
        duration_ms: 10_000,
    });
    let recorded = mocks.attempt_is_recorded();

    let outcome = attempt(mocks, 1);

    let retry_at = now() + Duration::seconds(60);
    assert_eq!(
        outcome,
        AttemptOutcome::Failed {
            retry_at: Some(retry_at)
        }
    );
    let record = recorded.only();
    assert!(!record.succeeded());
    assert_eq!(record.http_status, None);
    assert_eq!(
        record.response_body.as_deref(),
        Some("timed out after 10 s")
    );
    assert_eq!(record.duration_ms, 10_000);
    assert_eq!(record.state.next_attempt_at(), Some(retry_at));
}

#[test]
fn a_3xx_is_a_failed_attempt_redirects_are_not_followed() {
    for status in [301, 302, 304, 307, 308] {
        let mut mocks = Mocks::new();
        mocks.secret_opens();
        mocks.receiver_answers(status);
        let recorded = mocks.attempt_is_recorded();

        let outcome = attempt(mocks, 1);

        assert!(
            matches!(outcome, AttemptOutcome::Failed { retry_at: Some(_) }),
            "{status}: {outcome:?}"
        );
        let record = recorded.only();
        assert!(!record.succeeded(), "{status}");
        assert_eq!(record.http_status, Some(status));
    }
}

#[test]
fn a_secret_that_cannot_be_opened_sends_nothing_and_fails_the_attempt() {
    let mut mocks = Mocks::new();
    mocks
        .cipher
        .expect_open()
        .times(1)
        .returning(|_, _| Err(cipher_failure()));
    mocks.sender.expect_send().never();
    let recorded = mocks.attempt_is_recorded();

    let outcome = attempt(mocks, 1);

    assert_eq!(
        outcome,
        AttemptOutcome::Failed {
            retry_at: Some(now() + Duration::seconds(60))
        }
    );
    let record = recorded.only();
    assert!(!record.succeeded());
    assert_eq!(record.http_status, None);
    assert_eq!(record.duration_ms, 0);
    let body = record.response_body.unwrap();
    assert!(
        body.contains("signing secret could not be opened"),
        "{body}"
    );
}

#[test]
fn an_attempt_whose_lease_was_lost_is_abandoned_and_tells_nobody() {
    for status in [200, 500] {
        let mut mocks = Mocks::new();
        mocks.secret_opens();
        mocks.receiver_answers(status);
        mocks.store_records_attempt(None);
        mocks.no_mail();

        assert_eq!(attempt(mocks, 5), AttemptOutcome::Abandoned, "{status}");
    }
}

#[test]
fn the_failure_that_disables_an_endpoint_mails_the_owner_once_naming_it() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    mocks.receiver_answers(500);
    mocks.store_records_attempt(Some(AttemptEffects {
        endpoint_disabled: true,
    }));
    mocks
        .members
        .expect_members()
        .withf(|organization, filter, _, _| {
            *organization == ACME
                && filter.role == Some(crate::model::RoleRef::BuiltIn(Role::Owner))
        })
        .times(1)
        .returning(|_, _, _, _| ready(Ok(page_of(vec![grace_the_owner()]))));
    mocks.mail_is_sealed_in_the_clear();
    let mailed = recording!(
        mocks.mail_queue.expect_queue_mail().times(1),
        |mail, at| (in_the_clear(&mail), at),
        Ok(())
    );
    mocks.mailer.expect_send().never();

    let outcome = attempt(mocks, 3);

    assert_eq!(
        outcome,
        AttemptOutcome::Failed {
            retry_at: Some(now() + Duration::minutes(30))
        }
    );
    let (mail, at) = mailed.only();
    assert_eq!(at, now(), "due at once");
    assert_eq!(mail.to, email("grace@example.com"));
    assert!(mail.text.contains(&HOOK.to_string()), "{}", mail.text);
}

#[test]
fn a_disabled_endpoint_whose_owner_cannot_be_found_mails_nobody_and_still_records() {
    let mut mocks = Mocks::new();
    mocks.secret_opens();
    mocks.receiver_answers(500);
    mocks.store_records_attempt(Some(AttemptEffects {
        endpoint_disabled: true,
    }));
    mocks
        .members
        .expect_members()
        .times(1)
        .returning(|_, _, _, _| ready(Err(StoreError::Conflict)));
    mocks.mail_queue.expect_queue_mail().never();

    assert_eq!(attempt(mocks, 5), AttemptOutcome::Failed { retry_at: None });
}

#[test]
fn attempts_recorded_together_get_one_store_call_and_their_own_outcomes_in_order() {
    let mut mocks = Mocks::new();
    let recorded = Seen::<Vec<AttemptRecord>>::new();
    let seen = recorded.clone();
    mocks
        .delivery_queue
        .expect_record_attempts()
        .times(1)
        .returning(move |records| {
            seen.record(records);
            let kept = Some(AttemptEffects {
                endpoint_disabled: false,
            });
            ready(Ok(vec![kept.clone(), kept, None]))
        });
    mocks.no_mail();
    let engine = mocks.delivery_engine();
    let record = |attempt: u32, succeeded: bool| AttemptRecord {
        delivery_id: DELIVERY,
        endpoint_id: HOOK,
        lease: LEASE,
        state: if succeeded {
            DeliveryState::restore(DeliveryStatus::Success, attempt, None)
        } else {
            DeliveryState::restore(
                DeliveryStatus::Failed,
                attempt,
                Some(now() + Duration::minutes(5)),
            )
        }
        .unwrap(),
        http_status: Some(if succeeded { 200 } else { 500 }),
        response_body: None,
        duration_ms: 1,
        attempted_at: now(),
        disable_after_failures: 5,
    };
    let attempts = vec![
        (leased(1), record(1, true)),
        (leased(2), record(2, false)),
        (leased(3), record(3, true)),
    ];

    let outcomes = block_on(engine.record(attempts.clone())).unwrap();

    assert_eq!(
        outcomes,
        [
            AttemptOutcome::Delivered,
            AttemptOutcome::Failed {
                retry_at: Some(now() + Duration::minutes(5))
            },
            AttemptOutcome::Abandoned,
        ]
    );
    let records: Vec<_> = attempts.into_iter().map(|(_, record)| record).collect();
    assert_eq!(recorded.only(), records);
}

// ---------------------------------------------------------------------------------------------
// WebhookService::test (the ping)
// ---------------------------------------------------------------------------------------------

impl Mocks {
    /// Acme's [`HOOK`] sends to [`HOOK_URL`], signed by the secret sealed in [`SEALED`].
    fn hook_is_a_target(&mut self) {
        self.webhooks
            .expect_send_target()
            .withf(|organization, id| *organization == ACME && *id == HOOK)
            .times(1)
            .returning(|_, id| {
                ready(Ok(Some(SendTarget {
                    endpoint_id: id,
                    url: url(),
                    secret_sealed: SEALED.to_vec(),
                })))
            });
    }

    /// The ping is recorded (`true`: the endpoint is still there), once, and kept.
    fn store_records_test(&mut self, still_there: bool) -> Seen<SentTest> {
        recording!(
            self.webhooks.expect_record_test().times(1),
            |test| test,
            Ok(still_there)
        )
    }
}

#[test]
fn a_ping_sends_a_signed_webhook_test_and_records_it_as_sent_once() {
    let mut mocks = Mocks::new();
    mocks.hook_is_a_target();
    mocks.secret_opens();
    let sent = mocks.receiver_answers(204);
    let recorded = mocks.store_records_test(true);
    mocks.no_mail();

    let outcome = block_on(mocks.webhook_service().test(&admin(), HOOK, &origin())).unwrap();

    let request = sent.only();
    assert_eq!(request.url, url());
    assert_eq!(header(&request, "X-Service-Event"), "webhook.test");
    let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
    assert_eq!(body["event"], "webhook.test");
    assert_eq!(body["webhook_id"], HOOK.to_string());
    assert_eq!(body["delivery_id"], outcome.delivery_id.to_string());
    assert_eq!(
        header(&request, "X-Service-Delivery-ID"),
        outcome.delivery_id.to_string()
    );
    let timestamp = header(&request, "X-Service-Timestamp");
    let mut mac = Hmac::<Sha256>::new_from_slice(ENDPOINT_SECRET.as_bytes()).unwrap();
    mac.update(&[timestamp.as_bytes(), b".", &request.body].concat());
    let digest = hex::decode(
        header(&request, "X-Service-Signature")
            .strip_prefix("sha256=")
            .unwrap(),
    )
    .unwrap();
    assert!(mac.verify_slice(&digest).is_ok());

    assert!(outcome.success);
    assert_eq!(outcome.status_code, Some(204));
    assert_eq!(outcome.duration_ms, 42);
    assert_eq!(outcome.error, None);

    let test = recorded.only();
    assert_eq!(test.organization_id, ACME);
    assert_eq!(test.payload.as_bytes(), request.body);
    assert_eq!(test.record.delivery_id, outcome.delivery_id);
    assert_eq!(test.record.endpoint_id, HOOK);
    assert_eq!(test.record.state, DeliveryState::sent_once(true));
    assert_eq!(test.record.http_status, Some(204));
    assert_eq!(test.record.attempted_at, now());
}

#[test]
fn a_ping_the_endpoint_refuses_is_reported_and_never_due_again() {
    let mut mocks = Mocks::new();
    mocks.hook_is_a_target();
    mocks.secret_opens();
    mocks.receiver_answers(503);
    let recorded = mocks.store_records_test(true);

    let outcome = block_on(mocks.webhook_service().test(&admin(), HOOK, &origin())).unwrap();

    assert!(!outcome.success);
    assert_eq!(outcome.status_code, Some(503));
    assert_eq!(
        outcome.error.as_deref(),
        Some("the endpoint answered HTTP 503")
    );
    let state = recorded.only().record.state;
    assert_eq!(state, DeliveryState::sent_once(false));
    assert_eq!(state.attempt_due(), None);
}

#[test]
fn a_ping_nobody_answers_reports_why() {
    let mut mocks = Mocks::new();
    mocks.hook_is_a_target();
    mocks.secret_opens();
    mocks.receiver_gives(WebhookResponse::Failed {
        error: "connection refused".to_owned(),
        duration_ms: 3,
    });
    let recorded = mocks.store_records_test(true);

    let outcome = block_on(mocks.webhook_service().test(&admin(), HOOK, &origin())).unwrap();

    assert!(!outcome.success);
    assert_eq!(outcome.status_code, None);
    assert_eq!(outcome.error.as_deref(), Some("connection refused"));
    assert_eq!(
        recorded.only().record.response_body.as_deref(),
        Some("connection refused")
    );
}

#[test]
fn a_ping_of_an_endpoint_the_organization_does_not_have_sends_nothing() {
    let mut mocks = Mocks::new();
    mocks
        .webhooks
        .expect_send_target()
        .times(1)
        .returning(|_, _| ready(Ok(None)));
    mocks.sender.expect_send().never();
    mocks.webhooks.expect_record_test().never();

    let result = block_on(mocks.webhook_service().test(&admin(), HOOK, &origin()));
    assert!(
        matches!(result, Err(WebhookError::EndpointNotFound)),
        "{result:?}"
    );
}

#[test]
fn a_ping_of_an_endpoint_deleted_while_it_was_sent_is_not_found() {
    let mut mocks = Mocks::new();
    mocks.hook_is_a_target();
    mocks.secret_opens();
    mocks.receiver_answers(200);
    mocks.store_records_test(false);

    let result = block_on(mocks.webhook_service().test(&admin(), HOOK, &origin()));
    assert!(
        matches!(result, Err(WebhookError::EndpointNotFound)),
        "{result:?}"
    );
}
