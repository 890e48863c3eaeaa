use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{NewEvent, NewSession, Session, SessionId, TokenHash},
    ports::{SessionStore, StoreError},
};

use super::{
    super::{schema::sessions, Conn, DbStore},
    rows::{record_events, NewSessionRow, SessionRow},
};
use crate::{db_error, types::DbUuid};

#[async_trait]
impl SessionStore for DbStore {
    async fn create_session(&self, session: NewSession, event: NewEvent) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            diesel::insert_into(sessions::table)
                .values(NewSessionRow {
                    id: DbUuid(session.id.as_uuid()),
                    user_id: DbUuid(session.user_id.as_uuid()),
                    refresh_token_hash: session.refresh_token_hash.as_hex(),
                    created_at: session.created_at,
                    expires_at: session.expires_at,
                    last_used_at: session.created_at,
                })
                .execute(conn)
                .await?;
            record_events(conn, vec![event]).await
        })
    }

    async fn use_refresh_token(
        &self,
        hash: &TokenHash,
        now: DateTime<Utc>,
    ) -> Result<Option<Session>, StoreError> {
        let hash = hash.as_hex().to_owned();
        in_write_tx!(self, async |conn: &mut Conn| {
            let live = sessions::table
                .filter(sessions::refresh_token_hash.eq(&hash))
                .filter(sessions::revoked_at.is_null())
                .filter(sessions::expires_at.gt(now));
            diesel::update(live)
                .set(sessions::last_used_at.eq(now))
                .returning(SessionRow::as_returning())
                .get_result(conn)
                .await
                .optional()
        })
        .map(|row| row.map(Session::from))
    }

    async fn is_live(&self, id: SessionId, now: DateTime<Utc>) -> Result<bool, StoreError> {
        let mut conn = self.conn().await?;
        let live: i64 = sessions::table
            .filter(sessions::id.eq(DbUuid(id.as_uuid())))
            .filter(sessions::revoked_at.is_null())
            .filter(sessions::expires_at.gt(now))
            .count()
            .get_result(&mut *conn)
            .await
            .map_err(db_error)?;
        Ok(live > 0)
    }

    async fn end_session(
        &self,
        id: SessionId,
        at: DateTime<Utc>,
        event: NewEvent,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let live = sessions::table
                .filter(sessions::id.eq(DbUuid(id.as_uuid())))
                .filter(sessions::revoked_at.is_null());
            let ended = diesel::update(live)
                .set(sessions::revoked_at.eq(at))
                .execute(conn)
                .await?;
            if ended == 1 {
                record_events(conn, vec![event]).await?;
            }
            Ok::<_, diesel::result::Error>(ended == 1)
        })
    }
}
