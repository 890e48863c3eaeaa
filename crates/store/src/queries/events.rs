//! The outbox, written inside the caller's transaction: each change's events, fanned out to
//! the organizations they concern.

use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::model::{NewEvent, OrganizationId};
use time::OffsetDateTime;

use super::backend::{
    schema::{events, memberships, organizations},
    Conn, Sql,
};
use crate::{dialect::Dialect, types::DbUuid};

/// Records events in the outbox, inside the caller's transaction: the rows the domain's
/// fan-out rule (`NewEvent::fan_out`) makes of each, given the live organizations its user
/// belongs to as this transaction sees them.
pub(super) async fn record_events(conn: &mut Conn, events: Vec<NewEvent>) -> QueryResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    crate::outbox::mark_recorded();
    Sql::announce_outbox(conn).await?;
    let mut rows = Vec::with_capacity(events.len());
    for event in events {
        let member_of = match (event.organization_id, event.user_id) {
            (None, Some(user)) => organizations_of_user(conn, DbUuid(user.as_uuid()))
                .await?
                .into_iter()
                .map(|id| OrganizationId::from_uuid(id.0))
                .collect(),
            _ => Vec::new(),
        };
        rows.extend(event.fan_out(&member_of).into_iter().map(NewEventRow::from));
    }
    Sql::insert_events(conn, rows).await
}

/// The live organizations the user is a member of, oldest membership first.
async fn organizations_of_user(conn: &mut Conn, user: DbUuid) -> QueryResult<Vec<DbUuid>> {
    memberships::table
        .inner_join(organizations::table)
        .filter(memberships::user_id.eq(user))
        .filter(organizations::is_active.eq(true))
        .select(memberships::organization_id)
        .order((
            memberships::created_at.asc(),
            memberships::organization_id.asc(),
        ))
        .load(conn)
        .await
}

/// An outbox row as written.
#[derive(Insertable)]
#[diesel(table_name = events, treat_none_as_default_value = false)]
pub(crate) struct NewEventRow {
    pub id: DbUuid,
    pub event_type: &'static str,
    pub organization_id: Option<DbUuid>,
    pub user_id: Option<DbUuid>,
    pub data: serde_json::Value,
    pub occurred_at: OffsetDateTime,
}

impl From<NewEvent> for NewEventRow {
    fn from(event: NewEvent) -> Self {
        Self {
            id: DbUuid(event.id.as_uuid()),
            event_type: event.event_type.as_str(),
            organization_id: event.organization_id.map(|id| DbUuid(id.as_uuid())),
            user_id: event.user_id.map(|id| DbUuid(id.as_uuid())),
            data: event.data,
            occurred_at: event.occurred_at,
        }
    }
}
