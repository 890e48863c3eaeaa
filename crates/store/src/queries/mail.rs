//! The mail outbox: mails written with the changes that made them (`queue_mail`, inside the
//! change's transaction), leased, retried and forgotten by the worker's courier.
//!
//! A lease moves a mail's `next_attempt_at` to the lease's end, so a worker that dies leaves
//! it due again then. The due mails are found on a read connection (nothing due, the common
//! case, costs no write); two leasers may then pick the same mail, and the update takes it only
//! while it is still due, so whichever updates second (after waiting for the first's row lock,
//! PostgreSQL checks the condition again; SQLite writes one transaction at a time) gets nothing
//! for it.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::ports::{MailQueue, QueuedMail, SealedMail, StoreError};
use time::OffsetDateTime;
use uuid::Uuid;

use super::backend::{schema::mail_outbox, Conn, Db, DbStore};
use crate::{corrupt, db_error, types::DbUuid};

/// Writes `mails` in the transaction under way, due at `at`; the worker's courier is told when
/// it commits.
pub(super) async fn queue_mail(
    conn: &mut Conn,
    mails: &[SealedMail],
    at: OffsetDateTime,
) -> QueryResult<()> {
    for mail in mails {
        diesel::insert_into(mail_outbox::table)
            .values((
                mail_outbox::id.eq(DbUuid(mail.id)),
                mail_outbox::sealed.eq(&mail.sealed),
                mail_outbox::attempts.eq(0),
                mail_outbox::next_attempt_at.eq(at),
                mail_outbox::created_at.eq(at),
            ))
            .execute(conn)
            .await?;
    }
    if !mails.is_empty() {
        crate::outbox::mark_mailed();
    }
    Ok(())
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = mail_outbox, check_for_backend(Db))]
struct QueuedRow {
    id: DbUuid,
    sealed: Vec<u8>,
    attempts: i32,
}

#[async_trait]
impl MailQueue for DbStore {
    async fn queue_mail(&self, mail: SealedMail, at: OffsetDateTime) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            queue_mail(conn, std::slice::from_ref(&mail), at).await
        })
    }

    async fn lease_mail(
        &self,
        now: OffsetDateTime,
        until: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<QueuedMail>, StoreError> {
        // Looked for on a read connection first: an idle worker asks every second, and on
        // SQLite a write transaction would take the one writer from the requests each time.
        let due: Vec<DbUuid> = in_read!(self, async |conn: &mut Conn| {
            mail_outbox::table
                .filter(mail_outbox::next_attempt_at.le(now))
                .order((mail_outbox::next_attempt_at, mail_outbox::id))
                .limit(i64::from(limit))
                .select(mail_outbox::id)
                .load(conn)
                .await
                .map_err(db_error)
        })?;
        if due.is_empty() {
            return Ok(Vec::new());
        }
        let rows = in_write_tx!(self, async |conn: &mut Conn| {
            diesel::update(
                mail_outbox::table
                    .filter(mail_outbox::id.eq_any(due))
                    .filter(mail_outbox::next_attempt_at.le(now)),
            )
            .set(mail_outbox::next_attempt_at.eq(until))
            .returning(QueuedRow::as_returning())
            .get_results::<QueuedRow>(conn)
            .await
        })?;
        rows.into_iter()
            .map(|row| {
                Ok(QueuedMail {
                    mail: SealedMail {
                        id: row.id.0,
                        sealed: row.sealed,
                    },
                    attempts: u32::try_from(row.attempts)
                        .map_err(|_| corrupt("mail_outbox.attempts"))?,
                })
            })
            .collect()
    }

    async fn forget_mail(&self, id: Uuid) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            diesel::delete(mail_outbox::table.find(DbUuid(id)))
                .execute(conn)
                .await
                .map(drop)
        })
    }

    async fn retry_mail(
        &self,
        id: Uuid,
        attempts: u32,
        at: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let attempts = i32::try_from(attempts).unwrap_or(i32::MAX);
        in_write_tx!(self, async |conn: &mut Conn| {
            diesel::update(mail_outbox::table.find(DbUuid(id)))
                .set((
                    mail_outbox::attempts.eq(attempts),
                    mail_outbox::next_attempt_at.eq(at),
                ))
                .execute(conn)
                .await
                .map(drop)
        })
    }
}
