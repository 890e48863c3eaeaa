//! Webhook endpoints, their deliveries, and the outbox's dispatch.
//!
//! A delivery's state is the domain's `DeliveryState`, kept as `status`, `attempt` and
//! `next_attempt_at`: read back with `DeliveryState::restore`, changed only by writing what one
//! of its transitions returned. An endpoint's `consecutive_failures` is the domain's
//! `FailureRun` likewise. A lease (`lease`, `leased_until`) makes a delivery one worker's until
//! the attempt is recorded or the lease expires.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use diesel::{
    prelude::*,
    sql_types::{Bool, Nullable},
};
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        AuditRecord, Delivery, DeliveryId, DeliveryState, DeliveryStats, DeliveryStatus, DueRule,
        EndpointId, EventId, EventType, FailureRun, LeaseRoom, NewEvent, OrganizationId, Page,
        PageRequest, Plan, Subscription, TimeBound, TransitionError, WebhookEndpoint, WebhookUrl,
    },
    ports::{
        AttemptEffects, AttemptRecord, DeliveryFilter, DeliveryQueue, EndpointChange,
        EndpointDetail, EndpointLimit, LeasedDelivery, NewDelivery, NewEndpoint, PendingEvent,
        RetryOutcome, SendTarget, SentTest, StoreError, WebhookStore,
    },
};
use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    audit::insert_audit,
    backend::{
        column_types::Moment,
        schema::{events, organizations, webhook_deliveries, webhook_endpoints},
        Conn, Db, DbStore, Sql,
    },
    events::record_events,
    rows::{
        event_strings, stored_state, DeliveryRow, EndpointRow, EventRow, LeasedRow, NewDeliveryRow,
        NewEndpointRow,
    },
};
use crate::{
    corrupt, db_error,
    dialect::Dialect,
    pool_error,
    types::{DbStrings, DbUuid},
};

/// What a [`LeasedRow`] is read from.
const LEASED_COLUMNS: (
    webhook_deliveries::id,
    webhook_deliveries::endpoint_id,
    webhook_deliveries::organization_id,
    webhook_endpoints::url,
    webhook_endpoints::secret_sealed,
    webhook_deliveries::event_type,
    webhook_deliveries::payload,
    webhook_deliveries::status,
    webhook_deliveries::attempt,
    webhook_deliveries::next_attempt_at,
    webhook_deliveries::lease,
    webhook_deliveries::created_at,
) = (
    webhook_deliveries::id,
    webhook_deliveries::endpoint_id,
    webhook_deliveries::organization_id,
    webhook_endpoints::url,
    webhook_endpoints::secret_sealed,
    webhook_deliveries::event_type,
    webhook_deliveries::payload,
    webhook_deliveries::status,
    webhook_deliveries::attempt,
    webhook_deliveries::next_attempt_at,
    webhook_deliveries::lease,
    webhook_deliveries::created_at,
);

/// A condition on the deliveries' rows, as this backend's diesel writes it.
type Condition =
    Box<dyn BoxableExpression<webhook_deliveries::table, Db, SqlType = Nullable<Bool>>>;

/// `column` (a delivery's time) stands against `now` as `bound` says: the domain's
/// [`TimeBound`] in diesel (`due::operator` writes it in SQL).
fn stands<C>(column: C, bound: TimeBound, now: OffsetDateTime) -> Condition
where
    C: Expression<SqlType = Nullable<Moment>>,
    diesel::dsl::LtEq<C, OffsetDateTime>:
        BoxableExpression<webhook_deliveries::table, Db, SqlType = Nullable<Bool>> + 'static,
    diesel::dsl::Lt<C, OffsetDateTime>:
        BoxableExpression<webhook_deliveries::table, Db, SqlType = Nullable<Bool>> + 'static,
{
    match bound {
        TimeBound::AtOrBefore => Box::new(column.le(now)),
        TimeBound::Before => Box::new(column.lt(now)),
    }
}

/// The organization's endpoints, optionally only the active (or inactive) ones.
fn endpoints_of(
    org: DbUuid,
    is_active: Option<bool>,
) -> webhook_endpoints::BoxedQuery<'static, Db> {
    let mut query = webhook_endpoints::table
        .filter(webhook_endpoints::organization_id.eq(org))
        .into_boxed();
    if let Some(active) = is_active {
        query = query.filter(webhook_endpoints::is_active.eq(active));
    }
    query
}

/// The endpoint's deliveries (the organization's, doubly scoped), filtered.
fn deliveries_of(
    org: DbUuid,
    endpoint: DbUuid,
    filter: &DeliveryFilter,
) -> webhook_deliveries::BoxedQuery<'static, Db> {
    let mut query = webhook_deliveries::table
        .filter(webhook_deliveries::organization_id.eq(org))
        .filter(webhook_deliveries::endpoint_id.eq(endpoint))
        .into_boxed();
    if let Some(status) = filter.status {
        query = query.filter(webhook_deliveries::status.eq(status.as_str()));
    }
    if let Some(event) = filter.event {
        query = query.filter(webhook_deliveries::event_type.eq(event.as_str()));
    }
    query
}

/// The delivery counts of an endpoint: one grouped query.
async fn stats_of(conn: &mut Conn, endpoint: DbUuid) -> QueryResult<DeliveryStats> {
    let counts: Vec<(String, i64)> = webhook_deliveries::table
        .filter(webhook_deliveries::endpoint_id.eq(endpoint))
        .group_by(webhook_deliveries::status)
        .select((webhook_deliveries::status, diesel::dsl::count_star()))
        .load(conn)
        .await?;
    let mut stats = DeliveryStats::default();
    for (status, n) in counts {
        let n = n.unsigned_abs();
        stats.total += n;
        if status == DeliveryStatus::Success.as_str() {
            stats.successful += n;
        } else if status == DeliveryStatus::Failed.as_str() {
            stats.failed += n;
        }
    }
    Ok(stats)
}

/// The columns an endpoint change may touch; `None` leaves a column alone.
#[derive(AsChangeset)]
#[diesel(table_name = webhook_endpoints)]
struct EndpointChangeset<'a> {
    url: Option<&'a str>,
    description: Option<&'a str>,
    events: Option<DbStrings>,
    secret_sealed: Option<&'a [u8]>,
    is_active: Option<bool>,
    updated_at: OffsetDateTime,
}

/// What a manual retry found, before mapping rows to the domain.
enum Retried {
    NotFound,
    AlreadyPending,
    AlreadySucceeded,
    Queued(Box<DeliveryRow>),
    NotRetryable,
    /// The stored state is not one the state machine makes.
    Corrupt,
}

/// What an endpoint's creation came to, before mapping to the domain.
enum Creation {
    Done,
    AtLimit(EndpointLimit),
    /// The organization's plan is not one the domain knows.
    CorruptPlan,
}

/// The most due deliveries one lease looks at.
const MAX_LEASE_SCAN: usize = 1_024;
#[async_trait]
impl WebhookStore for DbStore {
    async fn create_endpoint(
        &self,
        new: NewEndpoint,
        audit: AuditRecord,
    ) -> Result<Result<(), EndpointLimit>, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(pool_error)?;
                let created = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    let endpoint = &new.endpoint;
                    let org = DbUuid(endpoint.organization_id.as_uuid());
                    // A write that changes nothing, to read the plan under the organization's
                    // write lock: concurrent creations in one organization count in turn.
                    let plan: Option<String> = diesel::update(organizations::table.find(org))
                        .set(organizations::plan.eq(organizations::plan))
                        .returning(organizations::plan)
                        .get_result(conn)
                        .await
                        .optional()?;
                    if let Some(plan) = plan {
                        let Ok(plan) = plan.parse::<Plan>() else {
                            return Ok(Creation::CorruptPlan);
                        };
                        let limit = EndpointLimit::of(plan);
                        let count: i64 = webhook_endpoints::table
                            .filter(webhook_endpoints::organization_id.eq(org))
                            .count()
                            .get_result(conn)
                            .await?;
                        if usize::try_from(count).unwrap_or(usize::MAX) >= limit.max {
                            return Ok(Creation::AtLimit(limit));
                        }
                    }
                    diesel::insert_into(webhook_endpoints::table)
                        .values(NewEndpointRow {
                            id: DbUuid(endpoint.id.as_uuid()),
                            organization_id: org,
                            url: endpoint.url.as_ref(),
                            description: &endpoint.description,
                            events: event_strings(&endpoint.events),
                            secret_sealed: &new.secret_sealed,
                            is_active: endpoint.is_active,
                            created_at: endpoint.created_at,
                            updated_at: endpoint.updated_at,
                        })
                        .execute(conn)
                        .await?;
                    insert_audit(conn, audit.clone()).await?;
                    Ok::<_, diesel::result::Error>(Creation::Done)
                })
                .await
                .map_err(db_error)?;
                match created {
                    Creation::Done => Ok(Ok(())),
                    Creation::AtLimit(limit) => Ok(Err(limit)),
                    Creation::CorruptPlan => Err(corrupt("organizations.plan")),
                }
            })
            .await
    }

    async fn endpoints(
        &self,
        organization_id: OrganizationId,
        is_active: Option<bool>,
        page: PageRequest,
    ) -> Result<Page<WebhookEndpoint>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let org = DbUuid(organization_id.as_uuid());
            let total: i64 = endpoints_of(org, is_active)
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<EndpointRow> = page_rows!(
                conn,
                page,
                total,
                endpoints_of(org, is_active).select(EndpointRow::as_select()),
                desc / asc(webhook_endpoints::created_at, webhook_endpoints::id)
            );
            let items = rows
                .into_iter()
                .map(EndpointRow::into_domain)
                .collect::<Result<_, _>>()?;
            Ok(Page::new(items, total.unsigned_abs(), page))
        })
    }

    async fn endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
    ) -> Result<Option<EndpointDetail>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let endpoint = DbUuid(id.as_uuid());
            let row: Option<EndpointRow> = endpoints_of(DbUuid(organization_id.as_uuid()), None)
                .filter(webhook_endpoints::id.eq(endpoint))
                .select(EndpointRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            let Some(row) = row else {
                return Ok(None);
            };
            let stats = stats_of(conn, endpoint).await.map_err(db_error)?;
            let last_delivery_at = row.last_delivery_at;
            Ok(Some(EndpointDetail {
                endpoint: row.into_domain()?,
                last_delivery_at,
                stats,
            }))
        })
    }

    async fn update_endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
        change: EndpointChange,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<Option<WebhookEndpoint>, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(pool_error)?;
                let row = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    let theirs = webhook_endpoints::table
                        .filter(webhook_endpoints::id.eq(DbUuid(id.as_uuid())))
                        .filter(
                            webhook_endpoints::organization_id
                                .eq(DbUuid(organization_id.as_uuid())),
                        );
                    if change.is_active == Some(true) {
                        // Turned back on: its run of failures starts again.
                        diesel::update(theirs.filter(webhook_endpoints::is_active.eq(false)))
                            .set(webhook_endpoints::consecutive_failures.eq(0))
                            .execute(conn)
                            .await?;
                    }
                    let row = diesel::update(theirs)
                        .set(EndpointChangeset {
                            url: change.url.as_ref().map(AsRef::as_ref),
                            description: change.description.as_deref(),
                            events: change.events.as_deref().map(event_strings),
                            secret_sealed: change.secret_sealed.as_deref(),
                            is_active: change.is_active,
                            updated_at: at,
                        })
                        .returning(EndpointRow::as_returning())
                        .get_result(conn)
                        .await
                        .optional()?;
                    if row.is_some() {
                        insert_audit(conn, audit.clone()).await?;
                    }
                    Ok::<_, diesel::result::Error>(row)
                })
                .await
                .map_err(db_error)?;
                row.map(EndpointRow::into_domain).transpose()
            })
            .await
    }

    async fn delete_endpoint(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let (endpoint, org) = (DbUuid(id.as_uuid()), DbUuid(organization_id.as_uuid()));
            let theirs = webhook_endpoints::table
                .filter(webhook_endpoints::id.eq(endpoint))
                .filter(webhook_endpoints::organization_id.eq(org));
            // Deliveries first, then the endpoint: the order the delivery loop locks them in
            // when it records attempts. The cascade alone would lock the endpoint first, and a
            // recording under way would deadlock with it on PostgreSQL.
            diesel::delete(webhook_deliveries::table.filter(
                webhook_deliveries::endpoint_id.eq_any(theirs.select(webhook_endpoints::id)),
            ))
            .execute(conn)
            .await?;
            let deleted = diesel::delete(theirs).execute(conn).await? == 1;
            if deleted {
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(deleted)
        })
    }

    async fn deliveries(
        &self,
        organization_id: OrganizationId,
        endpoint_id: EndpointId,
        filter: DeliveryFilter,
        page: PageRequest,
    ) -> Result<Option<Page<Delivery>>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let (org, endpoint) = (
                DbUuid(organization_id.as_uuid()),
                DbUuid(endpoint_id.as_uuid()),
            );
            let exists: Option<DbUuid> = endpoints_of(org, None)
                .filter(webhook_endpoints::id.eq(endpoint))
                .select(webhook_endpoints::id)
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            if exists.is_none() {
                return Ok(None);
            }
            let total: i64 = deliveries_of(org, endpoint, &filter)
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<DeliveryRow> = page_rows!(
                conn,
                page,
                total,
                deliveries_of(org, endpoint, &filter).select(DeliveryRow::as_select()),
                desc / asc(webhook_deliveries::created_at, webhook_deliveries::id)
            );
            let items = rows
                .into_iter()
                .map(DeliveryRow::into_domain)
                .collect::<Result<_, _>>()?;
            Ok(Some(Page::new(items, total.unsigned_abs(), page)))
        })
    }

    async fn retry_delivery(
        &self,
        organization_id: OrganizationId,
        id: DeliveryId,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<RetryOutcome, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(pool_error)?;
                let retried = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    let theirs = webhook_deliveries::table
                        .filter(webhook_deliveries::id.eq(DbUuid(id.as_uuid())))
                        .filter(
                            webhook_deliveries::organization_id
                                .eq(DbUuid(organization_id.as_uuid())),
                        );
                    let stored: Option<(String, i32, Option<OffsetDateTime>, String)> = theirs
                        .select((
                            webhook_deliveries::status,
                            webhook_deliveries::attempt,
                            webhook_deliveries::next_attempt_at,
                            webhook_deliveries::event_type,
                        ))
                        .get_result(conn)
                        .await
                        .optional()?;
                    let Some((status, attempt, next, event_type)) = stored else {
                        return Ok(Retried::NotFound);
                    };
                    if event_type
                        .parse::<EventType>()
                        .is_ok_and(|event| !event.retryable())
                    {
                        return Ok(Retried::NotRetryable);
                    }
                    let Ok(state) = stored_state(&status, attempt, next) else {
                        return Ok(Retried::Corrupt);
                    };
                    let queued = match state.retried(at) {
                        Ok(queued) => queued,
                        Err(TransitionError::AlreadyPending | TransitionError::NothingDue) => {
                            return Ok(Retried::AlreadyPending)
                        }
                        Err(TransitionError::AlreadySucceeded) => {
                            return Ok(Retried::AlreadySucceeded)
                        }
                    };
                    // Written only over the state it was read as, so that of concurrent
                    // retries one queues an attempt and the others find it pending.
                    let queued: Option<DeliveryRow> = diesel::update(
                        theirs
                            .filter(webhook_deliveries::status.eq(&status))
                            .filter(webhook_deliveries::attempt.eq(attempt)),
                    )
                    .set((
                        webhook_deliveries::status.eq(queued.status().as_str()),
                        webhook_deliveries::attempt
                            .eq(i32::try_from(queued.attempt()).unwrap_or(i32::MAX)),
                        webhook_deliveries::next_attempt_at.eq(queued.next_attempt_at()),
                        webhook_deliveries::lease.eq(None::<DbUuid>),
                        webhook_deliveries::leased_until.eq(None::<OffsetDateTime>),
                    ))
                    .returning(DeliveryRow::as_returning())
                    .get_result(conn)
                    .await
                    .optional()?;
                    Ok::<_, diesel::result::Error>(match queued {
                        Some(row) => {
                            insert_audit(conn, audit.clone()).await?;
                            Retried::Queued(Box::new(row))
                        }
                        None => Retried::AlreadyPending,
                    })
                })
                .await
                .map_err(db_error)?;
                Ok(match retried {
                    Retried::NotFound => RetryOutcome::NotFound,
                    Retried::AlreadyPending => RetryOutcome::AlreadyPending,
                    Retried::AlreadySucceeded => RetryOutcome::AlreadySucceeded,
                    Retried::NotRetryable => RetryOutcome::NotRetryable,
                    Retried::Queued(row) => RetryOutcome::Queued(row.into_domain()?),
                    Retried::Corrupt => return Err(corrupt("webhook_deliveries.status")),
                })
            })
            .await
    }

    async fn send_target(
        &self,
        organization_id: OrganizationId,
        id: EndpointId,
    ) -> Result<Option<SendTarget>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let found: Option<(String, Vec<u8>)> = webhook_endpoints::table
                .filter(webhook_endpoints::id.eq(DbUuid(id.as_uuid())))
                .filter(webhook_endpoints::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .select((webhook_endpoints::url, webhook_endpoints::secret_sealed))
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            found
                .map(|(url, secret_sealed)| {
                    Ok(SendTarget {
                        endpoint_id: id,
                        url: WebhookUrl::parse(&url)
                            .map_err(|_| corrupt("webhook_endpoints.url"))?,
                        secret_sealed,
                    })
                })
                .transpose()
        })
    }

    async fn record_test(&self, test: SentTest) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let record = &test.record;
            let org = DbUuid(test.organization_id.as_uuid());
            let endpoint = DbUuid(record.endpoint_id.as_uuid());
            let at = record.attempted_at;
            // Locks the endpoint against a concurrent delete until the ping is recorded.
            let still_there = diesel::update(
                webhook_endpoints::table
                    .filter(webhook_endpoints::id.eq(endpoint))
                    .filter(webhook_endpoints::organization_id.eq(org)),
            )
            .set(webhook_endpoints::last_delivery_at.eq(Some(at)))
            .execute(conn)
            .await?;
            if still_there == 0 {
                return Ok(false);
            }
            let event_type = EventType::WebhookTest.as_str();
            record_events(
                conn,
                vec![NewEvent {
                    id: test.event_id,
                    event_type: EventType::WebhookTest,
                    organization_id: Some(test.organization_id),
                    user_id: None,
                    data: test.data.clone(),
                    occurred_at: at,
                }],
            )
            .await?;
            diesel::update(events::table.find(DbUuid(test.event_id.as_uuid())))
                .set(events::dispatched_at.eq(Some(at)))
                .execute(conn)
                .await?;
            let state = record.state;
            Sql::insert_deliveries(
                conn,
                vec![NewDeliveryRow {
                    id: DbUuid(record.delivery_id.as_uuid()),
                    endpoint_id: endpoint,
                    organization_id: org,
                    event_id: DbUuid(test.event_id.as_uuid()),
                    event_type,
                    payload: &test.payload,
                    status: state.status().as_str(),
                    attempt: i32::try_from(state.attempt()).unwrap_or(i32::MAX),
                    next_attempt_at: state.next_attempt_at(),
                    created_at: at,
                }],
            )
            .await?;
            diesel::update(webhook_deliveries::table.find(DbUuid(record.delivery_id.as_uuid())))
                .set((
                    webhook_deliveries::http_status.eq(record.http_status.map(i32::from)),
                    webhook_deliveries::response_body.eq(record.response_body.as_deref()),
                    webhook_deliveries::duration_ms
                        .eq(Some(i64::try_from(record.duration_ms).unwrap_or(i64::MAX))),
                    webhook_deliveries::delivered_at.eq(Some(at)),
                ))
                .execute(conn)
                .await?;
            insert_audit(conn, test.audit.clone()).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }
}

#[async_trait]
impl DeliveryQueue for DbStore {
    async fn pending_events(&self, limit: i64) -> Result<Vec<PendingEvent>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            events::table
                .filter(events::dispatched_at.is_null())
                .order((events::occurred_at.asc(), events::id.asc()))
                .limit(limit)
                .select(EventRow::as_select())
                .load::<EventRow>(conn)
                .await
                .map_err(db_error)?
                .into_iter()
                .map(EventRow::into_domain)
                .collect()
        })
    }

    async fn subscribed_endpoints(
        &self,
        organization_id: OrganizationId,
        event: EventType,
    ) -> Result<Vec<EndpointId>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            // An organization has few endpoints (its plan bounds them): the domain's
            // `Subscription` decides which of them the event goes to, the same way on both
            // backends (the list is a `text[]` on one, a JSON array on the other).
            let endpoints: Vec<(DbUuid, bool, DbStrings)> =
                endpoints_of(DbUuid(organization_id.as_uuid()), None)
                    .select((
                        webhook_endpoints::id,
                        webhook_endpoints::is_active,
                        webhook_endpoints::events,
                    ))
                    .order((
                        webhook_endpoints::created_at.asc(),
                        webhook_endpoints::id.asc(),
                    ))
                    .load(conn)
                    .await
                    .map_err(db_error)?;
            Ok(endpoints
                .into_iter()
                .filter(|(_, is_active, events)| {
                    Subscription::from_names(*is_active, &events.0).matches(event)
                })
                .map(|(id, _, _)| EndpointId::from_uuid(id.0))
                .collect())
        })
    }

    async fn dispatch_events(
        &self,
        events: Vec<(EventId, Vec<NewDelivery>)>,
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        in_write_tx!(self, async |conn: &mut Conn| {
            Sql::bookkeeping(conn).await?;
            dispatch_all(conn, &events, at).await
        })
    }

    async fn lease_deliveries(
        &self,
        now: OffsetDateTime,
        lease_until: OffsetDateTime,
        room: LeaseRoom,
        lease: Uuid,
    ) -> Result<Vec<LeasedDelivery>, StoreError> {
        if room.total() == 0 {
            return Ok(Vec::new());
        }
        // Candidates beyond the total, so that deliveries of endpoints with room are found
        // behind those of endpoints without.
        let scan =
            i64::try_from(room.total().saturating_mul(4).min(MAX_LEASE_SCAN)).unwrap_or(i64::MAX);
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(pool_error)?;
                let rows = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    // One lease at a time in the cluster, each counting every replica's
                    // attempts in flight: the per-endpoint bound holds for all of them.
                    Sql::begin_lease(conn).await?;
                    let room = held_in_cluster(conn, now)
                        .await?
                        .into_iter()
                        .fold(room.clone(), |room, (endpoint, held)| {
                            room.with_held_in_cluster(endpoint, held)
                        });
                    let full: Vec<DbUuid> =
                        room.full().iter().map(|id| DbUuid(id.as_uuid())).collect();
                    // One lease for the batch: an attempt is recorded under its delivery's id and
                    // this lease together.
                    let held = Held {
                        lease: DbUuid(lease),
                        until: lease_until,
                    };
                    let ids = pick_and_lease(conn, &room, now, scan, &full, held).await?;
                    if ids.is_empty() {
                        return Ok(Vec::new());
                    }
                    webhook_deliveries::table
                        .inner_join(webhook_endpoints::table)
                        .filter(webhook_deliveries::id.eq_any(&ids))
                        .order((
                            webhook_deliveries::next_attempt_at.asc(),
                            webhook_deliveries::id.asc(),
                        ))
                        .select(LEASED_COLUMNS)
                        .load::<LeasedRow>(conn)
                        .await
                })
                .await
                .map_err(db_error)?;
                rows.into_iter().map(LeasedRow::into_domain).collect()
            })
            .await
    }

    async fn release_deliveries(&self, leases: Vec<(DeliveryId, Uuid)>) -> Result<(), StoreError> {
        if leases.is_empty() {
            return Ok(());
        }
        in_write_tx!(self, async |conn: &mut Conn| {
            Sql::bookkeeping(conn).await?;
            for (id, lease) in &leases {
                // Still due (it was when leased): the next lease call takes it.
                let held = webhook_deliveries::table
                    .filter(webhook_deliveries::id.eq(DbUuid(id.as_uuid())))
                    .filter(webhook_deliveries::lease.eq(Some(DbUuid(*lease))));
                diesel::update(held)
                    .set((
                        webhook_deliveries::lease.eq(None::<DbUuid>),
                        webhook_deliveries::leased_until.eq(None::<OffsetDateTime>),
                    ))
                    .execute(conn)
                    .await?;
            }
            Ok::<_, diesel::result::Error>(())
        })
    }

    async fn record_attempts(
        &self,
        records: Vec<AttemptRecord>,
    ) -> Result<Vec<Option<AttemptEffects>>, StoreError> {
        if records.is_empty() {
            return Ok(Vec::new());
        }
        let recorded = records.len();
        let effects = in_write_tx!(self, async |conn: &mut Conn| {
            Sql::bookkeeping(conn).await?;
            // By endpoint, so that endpoint rows are locked in one order by every recorder in
            // every process (two batches never wait on each other in a cycle); in record order
            // within an endpoint, as its run of failures counts them.
            let endpoints = Sql::record_deliveries(conn, &records).await?;
            let mut order: Vec<usize> = (0..records.len()).collect();
            order.sort_by_key(|i| (records[*i].endpoint_id.as_uuid(), *i));
            let mut effects = vec![None; records.len()];
            // Endpoints whose attempts all succeeded, written together when the batch or a
            // failure comes next (every id before the failure's: the order holds).
            let mut succeeded: Vec<(DbUuid, OffsetDateTime)> = Vec::new();
            for group in order.chunk_by(|a, b| records[*a].endpoint_id == records[*b].endpoint_id) {
                let held: Vec<(usize, DbUuid)> = group
                    .iter()
                    .filter_map(|i| endpoints.get(*i).copied().flatten().map(|e| (*i, e)))
                    .collect();
                let all_succeeded = held.iter().all(|(i, _)| records[*i].succeeded());
                let latest = held.iter().map(|(i, _)| records[*i].attempted_at).max();
                match (<[_]>::first(&held), latest) {
                    (Some((_, endpoint)), Some(latest)) if all_succeeded => {
                        // One update for the endpoint, however many attempts succeeded.
                        succeeded.push((*endpoint, latest));
                        for (i, _) in &held {
                            effects[*i] = Some(AttemptEffects {
                                endpoint_disabled: false,
                            });
                        }
                    }
                    _ => {
                        Sql::end_runs_of_failures(
                            conn,
                            &std::mem::take(&mut succeeded),
                            ended_run(),
                        )
                        .await?;
                        for (i, endpoint) in &held {
                            effects[*i] = Some(count_attempt(conn, *endpoint, &records[*i]).await?);
                        }
                    }
                }
            }
            Sql::end_runs_of_failures(conn, &succeeded, ended_run()).await?;
            Ok::<_, diesel::result::Error>(effects)
        })?;
        self.deliveries_recorded(recorded);
        Ok(effects)
    }
}

/// The attempts in flight at each endpoint in every process on the store: its deliveries
/// whose leases hold at `now` (`DueRule::lease_holds`: not run out), read from the partial
/// index `webhook_deliveries_held_idx`, as small as the work in flight. A lease a dead process
/// left counts until it expires.
async fn held_in_cluster(
    conn: &mut Conn,
    now: OffsetDateTime,
) -> QueryResult<Vec<(EndpointId, usize)>> {
    let held: Vec<(DbUuid, i64)> = webhook_deliveries::table
        .filter(webhook_deliveries::lease.is_not_null())
        .filter(diesel::dsl::not(stands(
            webhook_deliveries::leased_until,
            DueRule::LEASE_EXPIRED,
            now,
        )))
        .group_by(webhook_deliveries::endpoint_id)
        .select((webhook_deliveries::endpoint_id, diesel::dsl::count_star()))
        .load(conn)
        .await?;
    Ok(held
        .into_iter()
        .map(|(endpoint, n)| {
            (
                EndpointId::from_uuid(endpoint.0),
                usize::try_from(n).unwrap_or(usize::MAX),
            )
        })
        .collect())
}

/// Lease passes at most: a pass after the first runs only when another leaser locked some of
/// what this one picked.
const LEASE_PASSES: usize = 3;

/// The lease a lease transaction gives what it picks, and until when it holds.
#[derive(Clone, Copy)]
struct Held {
    lease: DbUuid,
    until: OffsetDateTime,
}

/// Picks what fits `room` among the due deliveries (up to `scan` candidates in their turn, each
/// organization's oldest first, those of the `full` endpoints left out)
/// and leases it as `held` says, locked for the caller's transaction: only the picked rows are
/// locked. What another leaser locked first is left to it, and the pick is made again without
/// it, so that concurrent leasers in several processes share the work instead of one of them
/// coming back with less than it had room for.
async fn pick_and_lease(
    conn: &mut Conn,
    room: &LeaseRoom,
    now: OffsetDateTime,
    scan: i64,
    full: &[DbUuid],
    held_as: Held,
) -> QueryResult<Vec<DbUuid>> {
    // What this transaction has leased, with its endpoint and organization.
    let mut held: Vec<(DbUuid, EndpointId, OrganizationId)> = Vec::new();
    let mut lost: HashSet<DbUuid> = HashSet::new();
    let per_endpoint = i64::try_from(room.per_endpoint())
        .unwrap_or(i64::MAX)
        .min(scan);
    for _ in 0..LEASE_PASSES {
        let candidates = Sql::lease_candidates(conn, now, per_endpoint, scan, full).await?;
        // What this transaction leased in an earlier pass is no longer due, so not among the
        // candidates: the pick counts it first (it fitted with more counted before it).
        let fresh = candidates
            .into_iter()
            .filter(|(id, _, _)| !lost.contains(id))
            .map(|(id, endpoint, organization)| {
                (
                    id,
                    EndpointId::from_uuid(endpoint.0),
                    OrganizationId::from_uuid(organization.0),
                )
            });
        let picked = room.pick(
            held.iter()
                .copied()
                .chain(fresh)
                .map(|candidate| (candidate, candidate.1, candidate.2)),
        );
        let new: Vec<(DbUuid, EndpointId, OrganizationId)> = picked
            .into_iter()
            .filter(|(id, _, _)| !held.iter().any(|(h, _, _)| h == id))
            .collect();
        if new.is_empty() {
            break;
        }
        let ids: Vec<DbUuid> = new.iter().map(|(id, _, _)| *id).collect();
        let leased: HashSet<DbUuid> =
            Sql::lease_picked(conn, &ids, now, held_as.lease, held_as.until)
                .await?
                .into_iter()
                .collect();
        let complete = leased.len() == new.len();
        for candidate in new {
            if leased.contains(&candidate.0) {
                held.push(candidate);
            } else {
                lost.insert(candidate.0);
            }
        }
        if complete {
            break;
        }
    }
    Ok(held.into_iter().map(|(id, _, _)| id).collect())
}

/// The `consecutive_failures` of an endpoint whose latest attempt succeeded: its run of
/// failures ends, whatever it was (`FailureRun::after` a success), so it need not be read.
fn ended_run() -> i32 {
    failures_column(FailureRun::of(0).after(true))
}

/// Moves the endpoint's [`FailureRun`] on by one recorded attempt and writes what the domain
/// decided: the new run, and the endpoint turned off by the failure that completes the run.
async fn count_attempt(
    conn: &mut Conn,
    endpoint: DbUuid,
    record: &AttemptRecord,
) -> QueryResult<AttemptEffects> {
    let at = record.attempted_at;
    let this = webhook_endpoints::table.find(endpoint);
    // A write that changes nothing, to read the run under the row's write lock: concurrent
    // recorders at the same endpoint (in any process) take their turns here.
    let (failures, is_active): (i32, bool) = diesel::update(this)
        .set(webhook_endpoints::consecutive_failures.eq(webhook_endpoints::consecutive_failures))
        .returning((
            webhook_endpoints::consecutive_failures,
            webhook_endpoints::is_active,
        ))
        .get_result(conn)
        .await?;
    let run = FailureRun::of(u32::try_from(failures).unwrap_or(0)).after(record.succeeded());
    let endpoint_disabled = is_active && run.disables(record.disable_after_failures);
    if endpoint_disabled {
        diesel::update(this)
            .set((
                webhook_endpoints::consecutive_failures.eq(failures_column(run)),
                webhook_endpoints::last_delivery_at.eq(Some(at)),
                webhook_endpoints::is_active.eq(false),
                webhook_endpoints::updated_at.eq(at),
            ))
            .execute(conn)
            .await?;
    } else {
        diesel::update(this)
            .set((
                webhook_endpoints::consecutive_failures.eq(failures_column(run)),
                webhook_endpoints::last_delivery_at.eq(Some(at)),
            ))
            .execute(conn)
            .await?;
    }
    Ok(AttemptEffects { endpoint_disabled })
}

/// A run as the `consecutive_failures` column holds it.
fn failures_column(run: FailureRun) -> i32 {
    i32::try_from(run.failures()).unwrap_or(i32::MAX)
}

/// New deliveries inserted in one statement at most (PostgreSQL binds at most 65,535
/// parameters, ten a row).
const INSERT_CHUNK: usize = 1_000;

/// Creates the events' deliveries and marks the events dispatched, inside the caller's
/// transaction (see `dispatch_events`): four statements for the batch, whatever its size. An
/// event that is gone, or is of no organization, has nothing to deliver; a delivery goes only
/// to an endpoint of the event's organization that still exists.
async fn dispatch_all(
    conn: &mut Conn,
    events: &[(EventId, Vec<NewDelivery>)],
    at: OffsetDateTime,
) -> QueryResult<()> {
    let ids: Vec<DbUuid> = events.iter().map(|(id, _)| DbUuid(id.as_uuid())).collect();
    let found: HashMap<DbUuid, (String, DbUuid)> = events::table
        .filter(events::id.eq_any(&ids))
        .select((events::id, events::event_type, events::organization_id))
        .load::<(DbUuid, String, Option<DbUuid>)>(conn)
        .await?
        .into_iter()
        .filter_map(|(id, event_type, org)| org.map(|org| (id, (event_type, org))))
        .collect();
    let wanted: Vec<DbUuid> = events
        .iter()
        .flat_map(|(_, deliveries)| deliveries)
        .map(|delivery| DbUuid(delivery.endpoint_id.as_uuid()))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let owners: HashMap<DbUuid, DbUuid> = if wanted.is_empty() {
        HashMap::new()
    } else {
        webhook_endpoints::table
            .filter(webhook_endpoints::id.eq_any(&wanted))
            .select((webhook_endpoints::id, webhook_endpoints::organization_id))
            .load::<(DbUuid, DbUuid)>(conn)
            .await?
            .into_iter()
            .collect()
    };
    let new_state = DeliveryState::new(at);
    let mut rows: Vec<NewDeliveryRow<'_>> = Vec::new();
    for (event_id, deliveries) in events {
        let event = DbUuid(event_id.as_uuid());
        let Some((event_type, org)) = found.get(&event) else {
            continue;
        };
        for delivery in deliveries {
            let endpoint = DbUuid(delivery.endpoint_id.as_uuid());
            if owners.get(&endpoint) != Some(org) {
                continue;
            }
            rows.push(NewDeliveryRow {
                id: DbUuid(delivery.id.as_uuid()),
                endpoint_id: endpoint,
                organization_id: *org,
                event_id: event,
                event_type,
                payload: &delivery.payload,
                status: new_state.status().as_str(),
                attempt: i32::try_from(new_state.attempt()).unwrap_or(i32::MAX),
                next_attempt_at: new_state.next_attempt_at(),
                created_at: at,
            });
        }
    }
    while !rows.is_empty() {
        let rest = rows.split_off(rows.len().min(INSERT_CHUNK));
        Sql::insert_deliveries(conn, rows).await?;
        rows = rest;
    }
    diesel::update(events::table.filter(events::id.eq_any(&ids)))
        .filter(events::dispatched_at.is_null())
        .set(events::dispatched_at.eq(Some(at)))
        .execute(conn)
        .await?;
    Ok(())
}
