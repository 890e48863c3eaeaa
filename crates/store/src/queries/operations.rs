//! The control plane's queries: every organization's events and dead letters, replays, and the
//! delivery backlog. A dead letter is a delivery `failed` with no attempt due (the partial
//! indexes `webhook_deliveries_dead_*_idx` hold just those); a replay writes the state the
//! domain's `DeliveryState::retried` returns, as a manual retry does.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{AuditRecord, Delivery, DeliveryStatus, EventType, NewEvent, Page, PageRequest},
    ports::{
        DeadLetterFilter, EventFilter, OperationsStore, PeriodicTask, PurgedHistory,
        ReplaySelection, StoreError, StoredEvent,
    },
};
use time::{Duration, OffsetDateTime};

use super::{
    audit::insert_audit,
    backend::{
        schema::{events, mail_outbox, organizations, periodic_runs, webhook_deliveries},
        Conn, Db, DbStore, Sql,
    },
    events::record_events,
    rows::{stored_state, DeliveryRow},
};
use crate::{corrupt, db_error, dialect::Dialect, types::DbUuid};

#[derive(Queryable, Selectable)]
#[diesel(table_name = events, check_for_backend(Db))]
struct StoredEventRow {
    id: DbUuid,
    event_type: String,
    organization_id: Option<DbUuid>,
    user_id: Option<DbUuid>,
    data: serde_json::Value,
    occurred_at: OffsetDateTime,
    dispatched_at: Option<OffsetDateTime>,
}

impl StoredEventRow {
    fn into_domain(self) -> Result<StoredEvent, StoreError> {
        Ok(StoredEvent {
            id: self.id.0.into(),
            event_type: self
                .event_type
                .parse()
                .map_err(|()| corrupt("events.event_type"))?,
            organization_id: self.organization_id.map(|id| id.0.into()),
            user_id: self.user_id.map(|id| id.0.into()),
            data: self.data,
            occurred_at: self.occurred_at,
            dispatched_at: self.dispatched_at,
        })
    }
}

fn events_matching(filter: &EventFilter) -> events::BoxedQuery<'static, Db> {
    let mut query = events::table.into_boxed();
    if let Some(org) = filter.organization_id {
        query = query.filter(events::organization_id.eq(DbUuid(org.as_uuid())));
    }
    if let Some(event) = filter.event_type {
        query = query.filter(events::event_type.eq(event.as_str()));
    }
    if let Some(since) = filter.since {
        query = query.filter(events::occurred_at.ge(since));
    }
    query
}

/// The names of the event types whose deliveries are never sent again.
fn not_retryable() -> Vec<&'static str> {
    EventType::ALL
        .iter()
        .filter(|event| !event.retryable())
        .map(|event| event.as_str())
        .collect()
}

/// Every dead letter: failed, with no attempt due, of an event type that is sent again.
fn dead_letters() -> webhook_deliveries::BoxedQuery<'static, Db> {
    webhook_deliveries::table
        .filter(webhook_deliveries::status.eq(DeliveryStatus::Failed.as_str()))
        .filter(webhook_deliveries::next_attempt_at.is_null())
        .filter(webhook_deliveries::event_type.ne_all(not_retryable()))
        .into_boxed()
}

fn dead_letters_matching(filter: &DeadLetterFilter) -> webhook_deliveries::BoxedQuery<'static, Db> {
    let mut query = dead_letters();
    if let Some(org) = filter.organization_id {
        query = query.filter(webhook_deliveries::organization_id.eq(DbUuid(org.as_uuid())));
    }
    if let Some(endpoint) = filter.endpoint_id {
        query = query.filter(webhook_deliveries::endpoint_id.eq(DbUuid(endpoint.as_uuid())));
    }
    query
}

/// Re-queues the selected dead letters inside the caller's transaction; see
/// [`OperationsStore::replay`].
async fn replay_in(
    conn: &mut Conn,
    selection: &ReplaySelection,
    at: OffsetDateTime,
    limit: u32,
) -> QueryResult<Result<u64, StoreError>> {
    let mut query = dead_letters();
    match selection {
        ReplaySelection::Deliveries(ids) => {
            let ids: Vec<DbUuid> = ids.iter().map(|id| DbUuid(id.as_uuid())).collect();
            query = query.filter(webhook_deliveries::id.eq_any(ids));
        }
        ReplaySelection::Endpoint { endpoint_id, since } => {
            query = query.filter(webhook_deliveries::endpoint_id.eq(DbUuid(endpoint_id.as_uuid())));
            if let Some(since) = since {
                query = query.filter(webhook_deliveries::created_at.ge(*since));
            }
        }
    }
    let found: Vec<(DbUuid, String, i32, Option<OffsetDateTime>)> = query
        .select((
            webhook_deliveries::id,
            webhook_deliveries::status,
            webhook_deliveries::attempt,
            webhook_deliveries::next_attempt_at,
        ))
        .order((
            webhook_deliveries::created_at.asc(),
            webhook_deliveries::id.asc(),
        ))
        .limit(i64::from(limit))
        .load(conn)
        .await?;
    let mut replayed = 0u64;
    for (position, (id, status, attempt, next)) in found.into_iter().enumerate() {
        let Ok(state) = stored_state(&status, attempt, next) else {
            return Ok(Err(corrupt("webhook_deliveries.status")));
        };
        // In creation order: the lease takes the earliest due first.
        let due = at + Duration::microseconds(i64::try_from(position).unwrap_or(i64::MAX));
        let Ok(queued) = state.retried(due) else {
            continue;
        };
        // Only over the state it was read as: a concurrent retry or replay wins once.
        let changed = diesel::update(
            webhook_deliveries::table
                .filter(webhook_deliveries::id.eq(id))
                .filter(webhook_deliveries::status.eq(&status))
                .filter(webhook_deliveries::attempt.eq(attempt))
                .filter(webhook_deliveries::next_attempt_at.is_null()),
        )
        .set((
            webhook_deliveries::status.eq(queued.status().as_str()),
            webhook_deliveries::attempt.eq(i32::try_from(queued.attempt()).unwrap_or(i32::MAX)),
            webhook_deliveries::next_attempt_at.eq(queued.next_attempt_at()),
            webhook_deliveries::lease.eq(None::<DbUuid>),
            webhook_deliveries::leased_until.eq(None::<OffsetDateTime>),
        ))
        .execute(conn)
        .await?;
        replayed += changed as u64;
    }
    Ok(Ok(replayed))
}

#[async_trait]
impl OperationsStore for DbStore {
    async fn record_billing_event(
        &self,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let Some(organization_id) = event.organization_id else {
            return Ok(false);
        };
        in_write_tx!(self, async |conn: &mut Conn| {
            let live: i64 = organizations::table
                .filter(organizations::id.eq(DbUuid(organization_id.as_uuid())))
                .filter(organizations::is_active.eq(true))
                .count()
                .get_result(conn)
                .await?;
            if live == 1 {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(live == 1)
        })
    }

    async fn events(
        &self,
        filter: EventFilter,
        page: PageRequest,
    ) -> Result<Page<StoredEvent>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let total: i64 = events_matching(&filter)
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<StoredEventRow> = page_rows!(
                conn,
                page,
                total,
                events_matching(&filter).select(StoredEventRow::as_select()),
                desc / asc(events::occurred_at, events::id)
            );
            let items = rows
                .into_iter()
                .map(StoredEventRow::into_domain)
                .collect::<Result<_, _>>()?;
            Ok(Page::new(items, total.unsigned_abs(), page))
        })
    }

    async fn dead_letters(
        &self,
        filter: DeadLetterFilter,
        page: PageRequest,
    ) -> Result<Page<Delivery>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let total: i64 = dead_letters_matching(&filter)
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<DeliveryRow> = page_rows!(
                conn,
                page,
                total,
                dead_letters_matching(&filter).select(DeliveryRow::as_select()),
                desc / asc(webhook_deliveries::created_at, webhook_deliveries::id)
            );
            let items = rows
                .into_iter()
                .map(DeliveryRow::into_domain)
                .collect::<Result<_, _>>()?;
            Ok(Page::new(items, total.unsigned_abs(), page))
        })
    }

    async fn replay(
        &self,
        selection: ReplaySelection,
        at: OffsetDateTime,
        limit: u32,
        audit: AuditRecord,
    ) -> Result<u64, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            insert_audit(conn, audit).await?;
            replay_in(conn, &selection, at, limit).await
        })?
    }

    async fn pending_deliveries(&self) -> Result<u64, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let pending: i64 = webhook_deliveries::table
                .filter(webhook_deliveries::next_attempt_at.is_not_null())
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            Ok(pending.unsigned_abs())
        })
    }

    async fn queued_mail(&self) -> Result<u64, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let queued: i64 = mail_outbox::table
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            Ok(queued.unsigned_abs())
        })
    }

    async fn purge_webhook_history(
        &self,
        before: OffsetDateTime,
        limit: u32,
    ) -> Result<PurgedHistory, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            Sql::by_index(conn).await?;
            // Finished: no attempt to come (delivered, failed for good, a test ping), whatever
            // a stale lease says. A delivery with an attempt due or awaited keeps its row. The
            // oldest first, from the index of finished deliveries in time
            // (`webhook_deliveries_finished_idx`).
            let finished = webhook_deliveries::table
                .filter(webhook_deliveries::next_attempt_at.is_null())
                .filter(webhook_deliveries::created_at.lt(before))
                .filter(webhook_deliveries::status.ne(DeliveryStatus::Pending.as_str()))
                .order(webhook_deliveries::created_at.asc())
                .select(webhook_deliveries::id)
                .limit(i64::from(limit))
                .load::<DbUuid>(conn)
                .await?;
            let deliveries = diesel::delete(
                webhook_deliveries::table.filter(webhook_deliveries::id.eq_any(finished)),
            )
            .execute(conn)
            .await?;
            // Events only once no finished delivery is left to purge, with what is left of the
            // slice: an old event waits for its deliveries, and while they are there, finding
            // the events that have none read past every one that has (200,000 of them, at
            // every slice).
            let left = i64::from(limit) - deliveries as i64;
            if left <= 0 {
                return Ok(PurgedHistory {
                    events: 0,
                    deliveries: deliveries as u64,
                });
            }
            // An event goes once dispatched and none of its deliveries is left; the oldest
            // first, from the index of events in time (`events_time_idx`).
            let done = events::table
                .filter(events::occurred_at.lt(before))
                .filter(events::dispatched_at.is_not_null())
                .filter(diesel::dsl::not(diesel::dsl::exists(
                    webhook_deliveries::table.filter(webhook_deliveries::event_id.eq(events::id)),
                )))
                .order((events::occurred_at.asc(), events::id.asc()))
                .select(events::id)
                .limit(left)
                .load::<DbUuid>(conn)
                .await?;
            let events = diesel::delete(events::table.filter(events::id.eq_any(done)))
                .execute(conn)
                .await?;
            Ok::<_, diesel::result::Error>(PurgedHistory {
                events: events as u64,
                deliveries: deliveries as u64,
            })
        })
    }

    async fn claim_periodic(
        &self,
        task: PeriodicTask,
        due_before: OffsetDateTime,
        at: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            // The first run ever: the row is made, by one process only.
            let made = diesel::insert_into(periodic_runs::table)
                .values((
                    periodic_runs::task.eq(task.as_str()),
                    periodic_runs::last_run_at.eq(at),
                ))
                .on_conflict(periodic_runs::task)
                .do_nothing()
                .execute(conn)
                .await?;
            if made == 1 {
                return Ok(true);
            }
            // Later runs: the row moves forward only if its last run is old enough. Two
            // processes that try at once both wait on the row; the second sees the first's
            // write and moves nothing.
            let moved = diesel::update(
                periodic_runs::table
                    .filter(periodic_runs::task.eq(task.as_str()))
                    .filter(periodic_runs::last_run_at.le(due_before)),
            )
            .set(periodic_runs::last_run_at.eq(at))
            .execute(conn)
            .await?;
            Ok::<_, diesel::result::Error>(moved == 1)
        })
    }
}
