//! The audit log. [`insert_audit`] writes a record inside the caller's transaction: the store
//! methods that make an audited change call it next to the change itself.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{AuditActor, AuditFilter, AuditRecord, AuditTarget, Origin, Page, PageRequest},
    ports::{AuditStore, StoreError},
};
use time::OffsetDateTime;

use super::backend::{schema::audit_log, Conn, Db, DbStore};
use crate::{
    corrupt, db_error,
    listing::{in_key_order, past_the_end, window},
    types::DbUuid,
};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = audit_log, check_for_backend(Db), treat_none_as_default_value = false)]
struct AuditRow {
    id: DbUuid,
    occurred_at: OffsetDateTime,
    actor_type: String,
    actor_id: Option<String>,
    organization_id: Option<DbUuid>,
    action: String,
    target_type: Option<String>,
    target_id: Option<String>,
    ip: Option<String>,
    user_agent: Option<String>,
    request_id: Option<String>,
    outcome: String,
}

impl AuditRow {
    fn of(record: AuditRecord) -> Self {
        Self {
            id: DbUuid(record.id),
            occurred_at: record.occurred_at,
            actor_type: record.actor.kind().to_owned(),
            actor_id: record.actor.id(),
            organization_id: record.organization_id.map(|id| DbUuid(id.as_uuid())),
            action: record.action.as_str().to_owned(),
            target_type: record.target.as_ref().map(|t| t.kind.as_str().to_owned()),
            target_id: record.target.map(|t| t.id),
            ip: record.origin.ip.map(|ip| ip.to_string()),
            user_agent: record.origin.user_agent,
            request_id: record.origin.request_id,
            outcome: record.outcome.as_str().to_owned(),
        }
    }

    fn into_domain(self) -> Result<AuditRecord, StoreError> {
        Ok(AuditRecord {
            id: self.id.0,
            occurred_at: self.occurred_at,
            actor: AuditActor::restore(&self.actor_type, self.actor_id.as_deref())
                .ok_or(corrupt("audit_log.actor_type"))?,
            organization_id: self.organization_id.map(|id| id.0.into()),
            action: self
                .action
                .parse()
                .map_err(|()| corrupt("audit_log.action"))?,
            target: match (self.target_type, self.target_id) {
                (Some(kind), Some(id)) => Some(AuditTarget {
                    kind: kind
                        .parse()
                        .map_err(|()| corrupt("audit_log.target_type"))?,
                    id,
                }),
                _ => None,
            },
            origin: Origin {
                ip: self
                    .ip
                    .map(|ip| ip.parse())
                    .transpose()
                    .map_err(|_| corrupt("audit_log.ip"))?,
                user_agent: self.user_agent,
                request_id: self.request_id,
            },
            outcome: self
                .outcome
                .parse()
                .map_err(|()| corrupt("audit_log.outcome"))?,
        })
    }
}

/// Writes a record inside the caller's transaction.
pub(super) async fn insert_audit(conn: &mut Conn, record: AuditRecord) -> QueryResult<()> {
    diesel::insert_into(audit_log::table)
        .values(AuditRow::of(record))
        .execute(conn)
        .await?;
    Ok(())
}

fn matching(filter: &AuditFilter) -> audit_log::BoxedQuery<'static, Db> {
    let mut query = audit_log::table.into_boxed();
    if let Some(org) = filter.organization_id {
        query = query.filter(audit_log::organization_id.eq(DbUuid(org.as_uuid())));
    }
    if let Some(actor) = &filter.actor_id {
        query = query.filter(audit_log::actor_id.eq(actor.clone()));
    }
    if let Some(action) = filter.action {
        query = query.filter(audit_log::action.eq(action.as_str()));
    }
    if let Some(since) = filter.since {
        query = query.filter(audit_log::occurred_at.ge(since));
    }
    if let Some(until) = filter.until {
        query = query.filter(audit_log::occurred_at.lt(until));
    }
    query
}

#[async_trait]
impl AuditStore for DbStore {
    async fn record_audit(&self, record: AuditRecord) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| insert_audit(conn, record)
            .await)
    }

    async fn audit_log(
        &self,
        filter: AuditFilter,
        page: PageRequest,
    ) -> Result<Page<AuditRecord>, StoreError> {
        // Its exact total counts every record the filter matches: off the caller's thread.
        in_read!(self, long, async |conn: &mut Conn| {
            let total: i64 = matching(&filter)
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<AuditRow> = if past_the_end(page, total) {
                Vec::new()
            } else {
                // The page's ids first, from the filter's index alone (on PostgreSQL an
                // index-only scan: the rows skipped are never read), then its records by id.
                let window = window(page.offset(), page.limit(), total);
                let ids = matching(&filter).select(audit_log::id);
                let ids = if window.reversed {
                    ids.order((audit_log::occurred_at.asc(), audit_log::id.asc()))
                } else {
                    ids.order((audit_log::occurred_at.desc(), audit_log::id.desc()))
                };
                let ids: Vec<DbUuid> = ids
                    .limit(window.limit)
                    .offset(window.offset)
                    .load(conn)
                    .await
                    .map_err(db_error)?;
                let ids = window.in_order(ids);
                let rows: Vec<AuditRow> = audit_log::table
                    .filter(audit_log::id.eq_any(ids.clone()))
                    .select(AuditRow::as_select())
                    .load(conn)
                    .await
                    .map_err(db_error)?;
                in_key_order(&ids, rows, |row| &row.id)
            };
            let items = rows
                .into_iter()
                .map(AuditRow::into_domain)
                .collect::<Result<_, _>>()?;
            Ok(Page::new(items, total.unsigned_abs(), page))
        })
    }

    async fn purge_audit(&self, before: OffsetDateTime, limit: u32) -> Result<u64, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            // The oldest first, from the index of the log in time (`audit_log_time_idx`).
            let oldest = audit_log::table
                .filter(audit_log::occurred_at.lt(before))
                .order((audit_log::occurred_at.asc(), audit_log::id.asc()))
                .select(audit_log::id)
                .limit(i64::from(limit))
                .load::<DbUuid>(conn)
                .await?;
            let purged = diesel::delete(audit_log::table.filter(audit_log::id.eq_any(oldest)))
                .execute(conn)
                .await?;
            Ok(purged as u64)
        })
    }
}
