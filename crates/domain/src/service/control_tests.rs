//! The control plane's use cases against mocked ports.

use super::tests::origin;

use futures::executor::block_on;
use uuid::Uuid;

use super::{
    tests::{now, ready, Mocks},
    ControlService, PurgeSlice, ReplayError, MAX_REPLAY,
};
use crate::{
    model::{
        AuditAction, AuditActor, AuditTarget, DeliveryId, EndpointId, Operator, OperatorToken,
        TargetKind,
    },
    ports::{Gauges, PoolUse, PurgePace, PurgedHistory, ReplaySelection, PURGE_SLICE},
};

fn operator() -> Operator {
    OperatorToken::new("operator-token")
        .unwrap()
        .admit("operator-token")
        .unwrap()
}

fn delivery(n: u128) -> DeliveryId {
    DeliveryId::from_uuid(Uuid::from_u128(n))
}

impl Mocks {
    fn control(self) -> ControlService {
        ControlService::new((&self.ports()).into())
    }
}

#[test]
fn a_replay_re_queues_now_at_most_the_limit_and_says_how_many() {
    let mut mocks = Mocks::new();
    let endpoint = EndpointId::from_uuid(Uuid::from_u128(0xe9));
    mocks
        .operations
        .expect_replay()
        .withf(move |selection, at, limit, record| {
            *selection
                == ReplaySelection::Endpoint {
                    endpoint_id: endpoint,
                    since: None,
                }
                && *at == now()
                && *limit == MAX_REPLAY
                // The operator's action, audited in the replay's transaction.
                && record.actor == AuditActor::Operator
                && record.action == AuditAction::DeadLettersReplayed
                && record.target == Some(AuditTarget::new(TargetKind::WebhookEndpoint, endpoint))
                && record.origin == origin()
                && record.occurred_at == now()
        })
        .times(1)
        .returning(|_, _, _, _| ready(Ok(7)));
    let replayed = block_on(mocks.control().replay(
        &operator(),
        ReplaySelection::Endpoint {
            endpoint_id: endpoint,
            since: None,
        },
        &origin(),
    ));
    assert_eq!(replayed.unwrap(), 7);
}

#[test]
fn a_replay_naming_no_delivery_or_too_many_touches_nothing() {
    for ids in [
        Vec::new(),
        (0..=u128::from(MAX_REPLAY)).map(delivery).collect(),
    ] {
        let mut mocks = Mocks::new();
        mocks.operations.expect_replay().never();
        let result = block_on(mocks.control().replay(
            &operator(),
            ReplaySelection::Deliveries(ids.clone()),
            &origin(),
        ));
        assert!(
            matches!(
                result,
                Err(ReplayError::NothingSelected | ReplayError::TooMany)
            ),
            "{} ids: {result:?}",
            ids.len()
        );
    }
}

#[test]
fn a_scrape_reads_the_backlog_and_the_pools() {
    let mut mocks = Mocks::new();
    mocks
        .operations
        .expect_pending_deliveries()
        .times(1)
        .returning(|| ready(Ok(42)));
    mocks
        .operations
        .expect_queued_mail()
        .times(1)
        .returning(|| ready(Ok(2)));
    let pool = PoolUse {
        pool: "primary",
        max: 10,
        in_use: 3,
        waiting: 1,
    };
    mocks
        .health
        .expect_pools()
        .times(1)
        .return_const(vec![pool]);
    let gauges = block_on(mocks.control().gauges()).unwrap();
    assert_eq!(
        gauges,
        Gauges {
            pending_deliveries: 42,
            queued_mail: 2,
            pools: vec![pool],
        }
    );
}

#[test]
fn the_webhook_history_is_purged_past_its_retention_a_slice_at_a_time() {
    let mut mocks = Mocks::new();
    let mut slices = vec![
        PurgedHistory {
            events: 3,
            deliveries: 5,
        },
        PurgedHistory {
            events: 0,
            deliveries: u64::from(PurgePace::FIRST.rows()),
        },
    ];
    mocks
        .operations
        .expect_purge_webhook_history()
        .withf(|before, limit| *before == now() - time::Duration::days(30) && *limit == 100)
        .times(2)
        .returning(move |_, _| ready(Ok(slices.pop().unwrap())));
    let control = mocks.control();
    // A full slice: more may be left.
    assert_eq!(
        block_on(control.purge_webhook_history(30, PurgePace::FIRST)).unwrap(),
        PurgeSlice {
            deleted: 100,
            more: true
        }
    );
    // The last one.
    assert_eq!(
        block_on(control.purge_webhook_history(30, PurgePace::FIRST)).unwrap(),
        PurgeSlice {
            deleted: 8,
            more: false
        }
    );
}

#[test]
fn a_purges_slices_are_sized_by_how_long_the_last_one_took() {
    let ms = std::time::Duration::from_millis;
    let first = PurgePace::FIRST;
    assert_eq!(first.rows(), 100);
    assert_eq!(first.after(ms(50)).rows(), 50, "too long: half as many");
    assert_eq!(first.after(ms(15)).rows(), 100, "about right: as many");
    assert_eq!(first.after(ms(2)).rows(), 200, "quick: twice as many");
    let mut pace = first;
    for _ in 0..20 {
        pace = pace.after(ms(1));
    }
    assert_eq!(pace.rows(), PURGE_SLICE, "never more than a slice's bound");
    for _ in 0..20 {
        pace = pace.after(ms(500));
    }
    assert_eq!(
        pace.rows(),
        PurgePace::FEWEST,
        "never fewer than the fewest: a purge moves on"
    );
}
