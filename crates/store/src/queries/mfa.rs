use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        Amr, AuditRecord, MfaFactor, MfaFactorId, MfaLogin, MfaMethod, NewEvent, NewSession,
        PasswordHash, TokenHash, UserId, WebauthnRegistration, MFA_MAX_FAILURES,
    },
    ports::{MfaStore, SecondFactorUse, StoreError, StoredPasskey, StoredTotp, StoredWebauthn},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{mfa_factors, mfa_logins, recovery_codes, webauthn_registrations},
        Conn, Db, DbStore,
    },
    events::record_events,
    sessions::open_session,
};
use crate::{corrupt, db_error, types::DbUuid};

#[derive(Queryable, Selectable)]
#[diesel(table_name = mfa_factors, check_for_backend(Db))]
struct FactorRow {
    id: DbUuid,
    user_id: DbUuid,
    kind: String,
    totp_secret_sealed: Option<Vec<u8>>,
    last_step: Option<i64>,
    credential_id: Option<String>,
    passkey: Option<String>,
    created_at: OffsetDateTime,
    confirmed_at: Option<OffsetDateTime>,
    last_used_at: Option<OffsetDateTime>,
}

impl FactorRow {
    fn factor(&self) -> Result<MfaFactor, StoreError> {
        Ok(MfaFactor {
            id: MfaFactorId::from_uuid(self.id.0),
            user_id: UserId::from_uuid(self.user_id.0),
            kind: MfaMethod::parse(&self.kind).map_err(|_| corrupt("mfa_factors.kind"))?,
            created_at: self.created_at,
            confirmed_at: self.confirmed_at,
            last_used_at: self.last_used_at,
        })
    }

    fn totp(self) -> Result<StoredTotp, StoreError> {
        let factor = self.factor()?;
        Ok(StoredTotp {
            factor,
            sealed_secret: self
                .totp_secret_sealed
                .ok_or_else(|| corrupt("mfa_factors.totp_secret_sealed"))?,
            last_step: self
                .last_step
                .map(u64::try_from)
                .transpose()
                .map_err(|_| corrupt("mfa_factors.last_step"))?,
        })
    }

    fn webauthn(self) -> Result<StoredWebauthn, StoreError> {
        let factor = self.factor()?;
        Ok(StoredWebauthn {
            factor,
            passkey: StoredPasskey {
                credential_id: self
                    .credential_id
                    .ok_or_else(|| corrupt("mfa_factors.credential_id"))?,
                passkey: self.passkey.ok_or_else(|| corrupt("mfa_factors.passkey"))?,
            },
        })
    }
}

#[derive(Queryable, Selectable)]
#[diesel(table_name = mfa_logins, check_for_backend(Db))]
struct LoginRow {
    user_id: DbUuid,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    failures: i32,
    webauthn_state: Option<String>,
    first_factor: String,
    password_checked: Option<String>,
}

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = webauthn_registrations, check_for_backend(Db), treat_none_as_default_value = false)]
struct RegistrationRow {
    id: DbUuid,
    user_id: DbUuid,
    state: String,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
}

fn step_column(step: u64) -> Result<i64, diesel::result::Error> {
    i64::try_from(step).map_err(|_| diesel::result::Error::RollbackTransaction)
}

fn max_failures() -> i32 {
    i32::try_from(MFA_MAX_FAILURES).unwrap_or(i32::MAX)
}

/// Replaces the user's recovery codes with these hashes.
async fn write_recovery_codes(
    conn: &mut Conn,
    user: DbUuid,
    codes: &[TokenHash],
    at: OffsetDateTime,
) -> QueryResult<()> {
    diesel::delete(recovery_codes::table.filter(recovery_codes::user_id.eq(user)))
        .execute(conn)
        .await?;
    for code in codes {
        diesel::insert_into(recovery_codes::table)
            .values((
                recovery_codes::user_id.eq(user),
                recovery_codes::code_hash.eq(code.as_hex()),
                recovery_codes::created_at.eq(at),
            ))
            .execute(conn)
            .await?;
    }
    Ok(())
}

/// The user's factors of a kind, confirmed ones only when asked, oldest first.
async fn factors_of(
    conn: &mut Conn,
    user: DbUuid,
    kind: Option<MfaMethod>,
    confirmed_only: bool,
) -> QueryResult<Vec<FactorRow>> {
    let mut query = mfa_factors::table
        .filter(mfa_factors::user_id.eq(user))
        .select(FactorRow::as_select())
        .order((mfa_factors::created_at.asc(), mfa_factors::id.asc()))
        .into_boxed();
    if let Some(kind) = kind {
        query = query.filter(mfa_factors::kind.eq(kind.as_str()));
    }
    if confirmed_only {
        query = query.filter(mfa_factors::confirmed_at.is_not_null());
    }
    query.load(conn).await
}

/// Why completing a second step rolled back.
#[derive(Debug, thiserror::Error)]
enum Spent {
    #[error("the token or the factor was spent")]
    Already,
    #[error(transparent)]
    Db(#[from] diesel::result::Error),
}

#[async_trait]
impl MfaStore for DbStore {
    async fn mfa_factors(&self, user_id: UserId) -> Result<Vec<MfaFactor>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            factors_of(conn, DbUuid(user_id.as_uuid()), None, false)
                .await
                .map_err(db_error)?
                .iter()
                .map(FactorRow::factor)
                .collect()
        })
    }

    async fn recovery_codes_left(&self, user_id: UserId) -> Result<u32, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let left: i64 = recovery_codes::table
                .filter(recovery_codes::user_id.eq(DbUuid(user_id.as_uuid())))
                .filter(recovery_codes::used_at.is_null())
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            u32::try_from(left).map_err(|_| corrupt("recovery_codes"))
        })
    }

    async fn add_totp_factor(
        &self,
        factor: MfaFactor,
        sealed_secret: Vec<u8>,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            diesel::insert_into(mfa_factors::table)
                .values((
                    mfa_factors::id.eq(DbUuid(factor.id.as_uuid())),
                    mfa_factors::user_id.eq(DbUuid(factor.user_id.as_uuid())),
                    mfa_factors::kind.eq(MfaMethod::Totp.as_str()),
                    mfa_factors::totp_secret_sealed.eq(Some(sealed_secret)),
                    mfa_factors::created_at.eq(factor.created_at),
                ))
                .execute(conn)
                .await
                .map(drop)
        })
    }

    async fn totp_factor(
        &self,
        user_id: UserId,
        id: MfaFactorId,
    ) -> Result<Option<StoredTotp>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            mfa_factors::table
                .filter(mfa_factors::id.eq(DbUuid(id.as_uuid())))
                .filter(mfa_factors::user_id.eq(DbUuid(user_id.as_uuid())))
                .filter(mfa_factors::kind.eq(MfaMethod::Totp.as_str()))
                .select(FactorRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(FactorRow::totp)
                .transpose()
        })
    }

    async fn confirmed_totp_factors(&self, user_id: UserId) -> Result<Vec<StoredTotp>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            factors_of(conn, DbUuid(user_id.as_uuid()), Some(MfaMethod::Totp), true)
                .await
                .map_err(db_error)?
                .into_iter()
                .map(FactorRow::totp)
                .collect()
        })
    }

    async fn confirm_totp_factor(
        &self,
        user_id: UserId,
        id: MfaFactorId,
        step: u64,
        at: OffsetDateTime,
        recovery_codes: Vec<TokenHash>,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            let confirmed = diesel::update(
                mfa_factors::table
                    .filter(mfa_factors::id.eq(DbUuid(id.as_uuid())))
                    .filter(mfa_factors::user_id.eq(user))
                    .filter(mfa_factors::confirmed_at.is_null()),
            )
            .set((
                mfa_factors::confirmed_at.eq(Some(at)),
                mfa_factors::last_step.eq(Some(step_column(step)?)),
            ))
            .execute(conn)
            .await?;
            if confirmed == 0 {
                return Ok(false);
            }
            if !recovery_codes.is_empty() {
                write_recovery_codes(conn, user, &recovery_codes, at).await?;
            }
            record_events(conn, events).await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn save_webauthn_registration(
        &self,
        registration: WebauthnRegistration,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            // Registrations nobody finished are forgotten once expired.
            diesel::delete(
                webauthn_registrations::table
                    .filter(webauthn_registrations::expires_at.le(registration.created_at)),
            )
            .execute(conn)
            .await?;
            diesel::insert_into(webauthn_registrations::table)
                .values(RegistrationRow {
                    id: DbUuid(registration.id.as_uuid()),
                    user_id: DbUuid(registration.user_id.as_uuid()),
                    state: registration.state.clone(),
                    created_at: registration.created_at,
                    expires_at: registration.expires_at,
                })
                .execute(conn)
                .await
                .map(drop)
        })
    }

    async fn take_webauthn_registration(
        &self,
        user_id: UserId,
        id: MfaFactorId,
        now: OffsetDateTime,
    ) -> Result<Option<WebauthnRegistration>, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let taken: Option<RegistrationRow> = diesel::delete(
                webauthn_registrations::table
                    .filter(webauthn_registrations::id.eq(DbUuid(id.as_uuid())))
                    .filter(webauthn_registrations::user_id.eq(DbUuid(user_id.as_uuid()))),
            )
            .returning(RegistrationRow::as_returning())
            .get_result(conn)
            .await
            .optional()?;
            Ok::<_, diesel::result::Error>(taken.filter(|row| row.expires_at > now).map(|row| {
                WebauthnRegistration {
                    id: MfaFactorId::from_uuid(row.id.0),
                    user_id: UserId::from_uuid(row.user_id.0),
                    state: row.state,
                    created_at: row.created_at,
                    expires_at: row.expires_at,
                }
            }))
        })
    }

    async fn add_webauthn_factor(
        &self,
        factor: MfaFactor,
        passkey: StoredPasskey,
        recovery_codes: Vec<TokenHash>,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let user = DbUuid(factor.user_id.as_uuid());
            diesel::insert_into(mfa_factors::table)
                .values((
                    mfa_factors::id.eq(DbUuid(factor.id.as_uuid())),
                    mfa_factors::user_id.eq(user),
                    mfa_factors::kind.eq(MfaMethod::Webauthn.as_str()),
                    mfa_factors::credential_id.eq(Some(&passkey.credential_id)),
                    mfa_factors::passkey.eq(Some(&passkey.passkey)),
                    mfa_factors::created_at.eq(factor.created_at),
                    mfa_factors::confirmed_at.eq(factor.confirmed_at),
                ))
                .execute(conn)
                .await?;
            if !recovery_codes.is_empty() {
                write_recovery_codes(conn, user, &recovery_codes, factor.created_at).await?;
            }
            record_events(conn, events).await?;
            insert_audit(conn, audit).await
        })
    }

    async fn webauthn_factors(&self, user_id: UserId) -> Result<Vec<StoredWebauthn>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            factors_of(
                conn,
                DbUuid(user_id.as_uuid()),
                Some(MfaMethod::Webauthn),
                true,
            )
            .await
            .map_err(db_error)?
            .into_iter()
            .map(FactorRow::webauthn)
            .collect()
        })
    }

    async fn remove_factor(
        &self,
        user_id: UserId,
        id: MfaFactorId,
        audit: Option<AuditRecord>,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            let removed = diesel::delete(
                mfa_factors::table
                    .filter(mfa_factors::id.eq(DbUuid(id.as_uuid())))
                    .filter(mfa_factors::user_id.eq(user)),
            )
            .execute(conn)
            .await?;
            let confirmed_left: i64 = mfa_factors::table
                .filter(mfa_factors::user_id.eq(user))
                .filter(mfa_factors::confirmed_at.is_not_null())
                .count()
                .get_result(conn)
                .await?;
            if removed == 1 && confirmed_left == 0 {
                // No second factor left: the recovery codes of it go too.
                diesel::delete(recovery_codes::table.filter(recovery_codes::user_id.eq(user)))
                    .execute(conn)
                    .await?;
            }
            if removed == 1 {
                if let Some(audit) = audit {
                    insert_audit(conn, audit).await?;
                }
            }
            Ok::<_, diesel::result::Error>(removed == 1)
        })
    }

    async fn replace_recovery_codes(
        &self,
        user_id: UserId,
        codes: Vec<TokenHash>,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            write_recovery_codes(conn, DbUuid(user_id.as_uuid()), &codes, at).await?;
            insert_audit(conn, audit).await
        })
    }

    async fn create_mfa_login(
        &self,
        token: TokenHash,
        login: MfaLogin,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            // Second steps that can no longer complete are forgotten.
            diesel::delete(mfa_logins::table.filter(mfa_logins::expires_at.le(login.created_at)))
                .execute(conn)
                .await?;
            diesel::insert_into(mfa_logins::table)
                .values((
                    mfa_logins::token_hash.eq(token.as_hex()),
                    mfa_logins::user_id.eq(DbUuid(login.user_id.as_uuid())),
                    mfa_logins::created_at.eq(login.created_at),
                    mfa_logins::expires_at.eq(login.expires_at),
                    mfa_logins::failures.eq(0),
                    mfa_logins::webauthn_state.eq(login.webauthn_state.clone()),
                    mfa_logins::first_factor.eq(login.first_factor.stored()),
                    mfa_logins::password_checked
                        .eq(login.password_checked.as_ref().map(|hash| hash.as_phc())),
                ))
                .execute(conn)
                .await?;
            insert_audit(conn, audit).await
        })
    }

    async fn mfa_login(
        &self,
        token: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<MfaLogin>, StoreError> {
        let token = token.as_hex().to_owned();
        in_read!(self, async |conn: &mut Conn| {
            let row: Option<LoginRow> = mfa_logins::table
                .filter(mfa_logins::token_hash.eq(token))
                .filter(mfa_logins::used_at.is_null())
                .filter(mfa_logins::expires_at.gt(now))
                .filter(mfa_logins::failures.lt(max_failures()))
                .select(LoginRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            row.map(|row| {
                Ok(MfaLogin {
                    user_id: UserId::from_uuid(row.user_id.0),
                    first_factor: Amr::from_stored(&row.first_factor)
                        .ok_or_else(|| corrupt("mfa_logins.first_factor"))?,
                    created_at: row.created_at,
                    expires_at: row.expires_at,
                    failures: u32::try_from(row.failures)
                        .map_err(|_| corrupt("mfa_logins.failures"))?,
                    webauthn_state: row.webauthn_state,
                    password_checked: row.password_checked.map(PasswordHash::from_phc),
                })
            })
            .transpose()
        })
    }

    async fn fail_mfa_login(&self, token: &TokenHash) -> Result<u32, StoreError> {
        let token = token.as_hex().to_owned();
        let failures: Option<i32> = in_write_tx!(self, async |conn: &mut Conn| {
            diesel::update(mfa_logins::table.filter(mfa_logins::token_hash.eq(token)))
                .set(mfa_logins::failures.eq(mfa_logins::failures + 1))
                .returning(mfa_logins::failures)
                .get_result(conn)
                .await
                .optional()
        })?;
        Ok(failures.map_or(MFA_MAX_FAILURES, |n| u32::try_from(n).unwrap_or(u32::MAX)))
    }

    async fn complete_mfa_login(
        &self,
        token: &TokenHash,
        used: SecondFactorUse,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
        now: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let token = token.as_hex().to_owned();
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let result = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    complete(conn, &token, &used, &session, &event, keep_at_most, now).await?;
                    insert_audit(conn, audit.clone()).await?;
                    Ok(())
                })
                .await;
                match result {
                    Ok(()) => Ok(true),
                    Err(Spent::Already) => Ok(false),
                    Err(Spent::Db(e)) => Err(db_error(e)),
                }
            })
            .await
    }
}

/// The second step's writes, in the caller's transaction.
async fn complete(
    conn: &mut Conn,
    token: &str,
    used: &SecondFactorUse,
    session: &NewSession,
    event: &NewEvent,
    keep_at_most: Option<u32>,
    now: OffsetDateTime,
) -> Result<(), Spent> {
    let user = DbUuid(session.user_id.as_uuid());
    let taken = diesel::update(
        mfa_logins::table
            .filter(mfa_logins::token_hash.eq(token))
            .filter(mfa_logins::user_id.eq(user))
            .filter(mfa_logins::used_at.is_null())
            .filter(mfa_logins::expires_at.gt(now))
            .filter(mfa_logins::failures.lt(max_failures())),
    )
    .set(mfa_logins::used_at.eq(Some(now)))
    .execute(conn)
    .await?;
    if taken == 0 {
        return Err(Spent::Already);
    }
    let spent = match used {
        SecondFactorUse::Totp { factor_id, step } => {
            let step = step_column(*step)?;
            // The step must come after the last one taken: a code works once.
            diesel::update(
                mfa_factors::table
                    .filter(mfa_factors::id.eq(DbUuid(factor_id.as_uuid())))
                    .filter(mfa_factors::user_id.eq(user))
                    .filter(
                        mfa_factors::last_step
                            .is_null()
                            .or(mfa_factors::last_step.lt(step)),
                    ),
            )
            .set((
                mfa_factors::last_step.eq(Some(step)),
                mfa_factors::last_used_at.eq(Some(now)),
            ))
            .execute(conn)
            .await?
        }
        SecondFactorUse::RecoveryCode { hash } => {
            diesel::update(
                recovery_codes::table
                    .filter(recovery_codes::user_id.eq(user))
                    .filter(recovery_codes::code_hash.eq(hash.as_hex()))
                    .filter(recovery_codes::used_at.is_null()),
            )
            .set(recovery_codes::used_at.eq(Some(now)))
            .execute(conn)
            .await?
        }
        SecondFactorUse::Webauthn { factor_id, passkey } => {
            diesel::update(
                mfa_factors::table
                    .filter(mfa_factors::id.eq(DbUuid(factor_id.as_uuid())))
                    .filter(mfa_factors::user_id.eq(user)),
            )
            .set((
                mfa_factors::passkey.eq(Some(&passkey.passkey)),
                mfa_factors::last_used_at.eq(Some(now)),
            ))
            .execute(conn)
            .await?
        }
    };
    if spent == 0 {
        return Err(Spent::Already);
    }
    record_events(conn, vec![event.clone()]).await?;
    open_session(conn, session, keep_at_most).await?;
    Ok(())
}
