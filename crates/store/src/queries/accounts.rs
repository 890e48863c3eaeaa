use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{AuditRecord, Email, NewEvent, PasswordHash, SessionId, User, UserCredentials, UserId},
    ports::{AccountStore, NewAccount, Reclaim, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{
            account_tokens, api_keys, mfa_factors, mfa_logins, oauth_authorization_codes,
            oauth_consents, password_history, recovery_codes, sessions, users,
            webauthn_registrations,
        },
        Conn, DbStore,
    },
    events::record_events,
    organizations::{insert_organization, stamp_slug, SLUG_RACE_RETRIES},
    rows::{NewUserRow, UserRow, NO_PASSWORD},
};
use crate::{db_error, kept::kept, types::DbUuid, violates};

/// Previous passwords kept per user: the most a password policy can ask to remember.
const PASSWORD_HISTORY_KEPT: i64 = 24;

/// Why creating an account failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum CreateError {
    #[error("the email is taken")]
    EmailTaken,
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

/// Reclaims an account for the owner of its address, in the caller's transaction (an identity
/// provider's or a directory's link: see [`Reclaim`]): while the address is still unverified,
/// the password goes (and the ones it replaced), every session ends, and the API keys, mailed
/// links, second factors (with recovery codes and half-done ceremonies), consents and
/// unexchanged authorization codes are deleted; the address is verified and the record
/// written. Whether it was reclaimed: an address verified meanwhile is left as it is.
pub(super) async fn reclaim(
    conn: &mut Conn,
    reclaim: &Reclaim,
    at: OffsetDateTime,
) -> Result<bool, diesel::result::Error> {
    let user = DbUuid(reclaim.user_id.as_uuid());
    // The compare-and-set: the first link of an unverified account reclaims it, once.
    let unverified = diesel::update(
        users::table
            .find(user)
            .filter(users::email_verified.eq(false)),
    )
    .set((
        users::email_verified.eq(true),
        users::password_hash.eq(NO_PASSWORD),
        users::password_changed_at.eq(at),
        users::updated_at.eq(at),
    ))
    .execute(conn)
    .await?;
    if unverified == 0 {
        return Ok(false);
    }
    diesel::update(
        sessions::table
            .filter(sessions::user_id.eq(user))
            .filter(sessions::revoked_at.is_null()),
    )
    .set(sessions::revoked_at.eq(at))
    .execute(conn)
    .await?;
    // What it held: every row of these tables that is the user's.
    macro_rules! delete_the_users {
        ($($table:ident),+) => {
            $(
                diesel::delete($table::table.filter($table::user_id.eq(user)))
                    .execute(conn)
                    .await?;
            )+
        };
    }
    delete_the_users!(
        password_history,
        api_keys,
        account_tokens,
        recovery_codes,
        mfa_logins,
        webauthn_registrations,
        mfa_factors,
        oauth_consents,
        oauth_authorization_codes
    );
    insert_audit(conn, reclaim.audit.clone()).await?;
    Ok(true)
}

/// Inserts the user, their personal workspace (and owner membership) and the account's events.
async fn insert_account(conn: &mut Conn, account: &NewAccount) -> Result<(), CreateError> {
    let events = insert_account_rows(conn, account).await?;
    record_events(conn, events).await?;
    Ok(())
}

/// Inserts the user and their personal workspace (and owner membership), and returns the
/// account's events as they must be recorded (the workspace's slug as it was stored), for the
/// caller to record once everything the user belongs to is in place.
pub(super) async fn insert_account_rows(
    conn: &mut Conn,
    account: &NewAccount,
) -> Result<Vec<NewEvent>, CreateError> {
    let user = &account.user;
    let email_taken: i64 = users::table
        .filter(users::email.eq(user.email.as_ref()))
        .count()
        .get_result(conn)
        .await?;
    if email_taken > 0 {
        return Err(CreateError::EmailTaken);
    }
    diesel::insert_into(users::table)
        .values(NewUserRow {
            id: DbUuid(user.id.as_uuid()),
            email: user.email.as_ref(),
            full_name: user.full_name.as_ref(),
            password_hash: user
                .password_hash
                .as_ref()
                .map_or(NO_PASSWORD, PasswordHash::as_phc),
            password_changed_at: user.created_at,
            created_at: user.created_at,
            updated_at: user.created_at,
            email_verified: user.email_verified,
        })
        .execute(conn)
        .await?;
    let org = &account.workspace;
    let slug = insert_organization(conn, org, DbUuid(user.id.as_uuid())).await?;
    let mut events = account.events.clone();
    // The event shows the slug the workspace actually got.
    stamp_slug(&mut events, org.id, &slug);
    Ok(events)
}

/// How a user is looked up.
enum UserKey<'a> {
    Email(&'a str),
    Id(DbUuid),
}

async fn credentials(
    conn: &mut Conn,
    key: UserKey<'_>,
) -> Result<Option<UserCredentials>, StoreError> {
    let query = users::table.select(UserRow::as_select()).into_boxed();
    let query = match key {
        UserKey::Email(email) => query.filter(users::email.eq(email)),
        UserKey::Id(id) => query.filter(users::id.eq(id)),
    };
    query
        .get_result(conn)
        .await
        .optional()
        .map_err(db_error)?
        .map(UserRow::into_credentials)
        .transpose()
}

#[async_trait]
impl AccountStore for DbStore {
    async fn create_account(
        &self,
        account: NewAccount,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let result = write_tx!(&mut *conn, async |conn: &mut Conn| {
                        insert_account(conn, &account).await?;
                        insert_audit(conn, audit.clone()).await?;
                        Ok::<_, CreateError>(())
                    })
                    .await;
                    match result {
                        Ok(()) => return Ok(()),
                        Err(CreateError::EmailTaken) => return Err(StoreError::Conflict),
                        Err(CreateError::Db(e))
                            if violates(&e, "organizations_slug_key")
                                && attempt < SLUG_RACE_RETRIES =>
                        {
                            continue
                        }
                        Err(CreateError::Db(e)) => return Err(db_error(e)),
                    }
                }
            })
            .await
    }

    async fn credentials_by_email(
        &self,
        email: &Email,
    ) -> Result<Option<UserCredentials>, StoreError> {
        let email = email.clone();
        in_read!(self, async |conn: &mut Conn| {
            credentials(conn, UserKey::Email(email.as_ref())).await
        })
    }

    async fn credentials_by_id(&self, id: UserId) -> Result<Option<UserCredentials>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            credentials(conn, UserKey::Id(DbUuid(id.as_uuid()))).await
        })
    }

    async fn set_email_verified(
        &self,
        user_id: UserId,
        email: &Email,
        at: OffsetDateTime,
        audit: Option<AuditRecord>,
    ) -> Result<bool, StoreError> {
        let email = email.as_ref().to_owned();
        in_write_tx!(self, async |conn: &mut Conn| {
            let updated = diesel::update(
                users::table
                    .find(DbUuid(user_id.as_uuid()))
                    .filter(users::email.eq(email)),
            )
            .set((users::email_verified.eq(true), users::updated_at.eq(at)))
            .execute(conn)
            .await?;
            if updated == 1 {
                if let Some(audit) = audit {
                    insert_audit(conn, audit).await?;
                }
            }
            Ok::<_, diesel::result::Error>(updated == 1)
        })
    }

    async fn update_user(
        &self,
        user: User,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let written = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    // The user's row is locked last: concurrent changes of one user then wait
                    // only for each other's update and commit, not for the events and the audit
                    // record too (on PostgreSQL that wait was the whole of a busy user's change).
                    record_events(conn, vec![event]).await?;
                    insert_audit(conn, audit).await?;
                    // Kept prepared (one text), and loaded so that SQLite keeps it too.
                    let updated: Vec<DbUuid> = kept(
                        diesel::update(users::table.find(DbUuid(user.id.as_uuid())))
                            .set((
                                users::full_name.eq(user.full_name.as_ref()),
                                users::updated_at.eq(user.updated_at),
                            ))
                            .returning(users::id),
                    )
                    .load(conn)
                    .await?;
                    if updated.is_empty() {
                        // The user is gone: nothing of the change may stay.
                        return Err(diesel::result::Error::RollbackTransaction);
                    }
                    Ok(())
                })
                .await;
                match written {
                    Ok(()) => Ok(true),
                    Err(diesel::result::Error::RollbackTransaction) => Ok(false),
                    Err(error) => Err(db_error(error)),
                }
            })
            .await
    }

    async fn previous_password_hashes(
        &self,
        user_id: UserId,
        limit: u32,
    ) -> Result<Vec<PasswordHash>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let hashes: Vec<String> = password_history::table
                .filter(password_history::user_id.eq(DbUuid(user_id.as_uuid())))
                .order((
                    password_history::retired_at.desc(),
                    password_history::id.desc(),
                ))
                .limit(i64::from(limit))
                .select(password_history::password_hash)
                .load(conn)
                .await
                .map_err(db_error)?;
            Ok(hashes.into_iter().map(PasswordHash::from_phc).collect())
        })
    }

    async fn change_password(
        &self,
        user_id: UserId,
        hash: PasswordHash,
        keep: Option<SessionId>,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            let retired: Option<String> = users::table
                .find(user)
                .select(users::password_hash)
                .get_result(conn)
                .await
                .optional()?;
            // An account without a password has none to remember.
            if let Some(retired) = retired.filter(|hash| hash != NO_PASSWORD) {
                diesel::insert_into(password_history::table)
                    .values((
                        password_history::user_id.eq(user),
                        password_history::password_hash.eq(retired),
                        password_history::retired_at.eq(at),
                    ))
                    .execute(conn)
                    .await?;
                let forgotten: Vec<i64> = password_history::table
                    .filter(password_history::user_id.eq(user))
                    .order((
                        password_history::retired_at.desc(),
                        password_history::id.desc(),
                    ))
                    .offset(PASSWORD_HISTORY_KEPT)
                    .limit(i64::MAX)
                    .select(password_history::id)
                    .load(conn)
                    .await?;
                if !forgotten.is_empty() {
                    diesel::delete(
                        password_history::table.filter(password_history::id.eq_any(forgotten)),
                    )
                    .execute(conn)
                    .await?;
                }
            }
            diesel::update(users::table.find(user))
                .set((
                    users::password_hash.eq(hash.as_phc()),
                    users::password_changed_at.eq(at),
                    users::updated_at.eq(at),
                ))
                .execute(conn)
                .await?;
            // No session to keep: the nil id matches none.
            let keep = DbUuid(keep.map_or(uuid::Uuid::nil(), |id| id.as_uuid()));
            let others = sessions::table
                .filter(sessions::user_id.eq(user))
                .filter(sessions::revoked_at.is_null())
                .filter(sessions::id.ne(keep));
            diesel::update(others)
                .set(sessions::revoked_at.eq(at))
                .execute(conn)
                .await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await
        })
    }
}
