use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{AuditRecord, NewEvent, NewSession, OrganizationId, Session, SessionId, TokenHash},
    ports::{MemberAccess, RefreshContext, SessionStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{memberships, organization_policies, organizations, sessions, users},
        Conn, DbStore,
    },
    custom_roles::CustomRoles,
    events::record_events,
    memberships::MEMBERSHIP_COLUMNS,
    policies::{saved_policies, PoliciesRow},
    rows::{MembershipRow, NewSessionRow, SessionRow, UserRow},
};
use crate::{db_error, kept::kept, types::DbUuid};

/// The session while it is live at `now`: neither revoked nor expired.
#[diesel::dsl::auto_type]
fn live_session(id: DbUuid, now: OffsetDateTime) -> _ {
    sessions::table
        .filter(sessions::id.eq(id))
        .filter(sessions::revoked_at.is_null())
        .filter(sessions::expires_at.gt(now))
}

#[async_trait]
impl SessionStore for DbStore {
    async fn create_session(
        &self,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            open_session(conn, &session, keep_at_most).await
        })
    }

    async fn session_by_refresh_token(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<Session>, StoreError> {
        let hash = hash.clone();
        in_read!(self, async |conn: &mut Conn| {
            sessions::table
                .filter(sessions::refresh_token_hash.eq(hash.as_hex()))
                .filter(sessions::revoked_at.is_null())
                .filter(sessions::expires_at.gt(now))
                .select(SessionRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(SessionRow::into_domain)
                .transpose()
        })
    }

    async fn refresh_context(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<RefreshContext>, StoreError> {
        let hash = hash.clone();
        in_read!(self, async |conn: &mut Conn| {
            // One row per membership (without one where the organization is not active), or
            // one without a membership for a user with none; each with the session and its
            // user, and the membership with its organization's plan and saved policies.
            let rows: Vec<(
                SessionRow,
                UserRow,
                Option<MembershipRow>,
                Option<PoliciesRow>,
            )> = sessions::table
                .inner_join(users::table)
                .left_join(memberships::table.on(memberships::user_id.eq(sessions::user_id)))
                .left_join(
                    organizations::table.on(organizations::id
                        .eq(memberships::organization_id)
                        .and(organizations::is_active.eq(true))),
                )
                .left_join(
                    organization_policies::table
                        .on(organization_policies::organization_id.eq(organizations::id)),
                )
                .filter(sessions::refresh_token_hash.eq(hash.as_hex()))
                .filter(sessions::revoked_at.is_null())
                .filter(sessions::expires_at.gt(now))
                .select((
                    SessionRow::as_select(),
                    UserRow::as_select(),
                    // `None` where the organization is not active: its plan is NULL.
                    MEMBERSHIP_COLUMNS.nullable(),
                    (
                        organization_policies::document,
                        organization_policies::updated_at,
                        organization_policies::mfa_required_since,
                    )
                        .nullable(),
                ))
                .load(conn)
                .await
                .map_err(db_error)?;
            let roles = CustomRoles::of(
                conn,
                rows.iter()
                    .filter_map(|(_, _, membership, _)| membership.as_ref())
                    .map(|membership| (membership.organization_id, membership.role.as_str())),
            )
            .await?;
            let mut memberships = Vec::with_capacity(rows.len());
            let mut found = None;
            for (session, user, membership, policies) in rows {
                if let Some(membership) = membership {
                    memberships.push(MemberAccess {
                        membership: membership.into_domain(&roles)?,
                        policies: policies.map(saved_policies).transpose()?,
                    });
                }
                if found.is_none() {
                    found = Some((session, user));
                }
            }
            let Some((session, user)) = found else {
                return Ok(None);
            };
            Ok(Some(RefreshContext {
                session: session.into_domain()?,
                credentials: user.into_credentials()?,
                memberships,
            }))
        })
    }

    async fn touch_session(&self, id: SessionId, now: OffsetDateTime) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let live = live_session(DbUuid(id.as_uuid()), now);
            // Every refresh: kept prepared, and loaded so that SQLite keeps it too.
            kept(
                diesel::update(live)
                    .set(sessions::last_used_at.eq(now))
                    .returning(sessions::id),
            )
            .load::<DbUuid>(conn)
            .await
            .map(|touched| touched.len() == 1)
        })
    }

    async fn scope_session(
        &self,
        id: SessionId,
        organization: Option<OrganizationId>,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let live = live_session(DbUuid(id.as_uuid()), now);
            kept(
                diesel::update(live)
                    .set((
                        sessions::organization_id.eq(organization.map(|o| DbUuid(o.as_uuid()))),
                        sessions::last_used_at.eq(now),
                    ))
                    .returning(sessions::id),
            )
            .load::<DbUuid>(conn)
            .await
            .map(|scoped| scoped.len() == 1)
        })
    }

    async fn is_live(&self, id: SessionId, now: OffsetDateTime) -> Result<bool, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let live: i64 = live_session(DbUuid(id.as_uuid()), now)
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            Ok(live > 0)
        })
    }

    async fn end_session(
        &self,
        id: SessionId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let live = sessions::table
                .filter(sessions::id.eq(DbUuid(id.as_uuid())))
                .filter(sessions::revoked_at.is_null());
            let ended = kept(
                diesel::update(live)
                    .set(sessions::revoked_at.eq(at))
                    .returning(sessions::id),
            )
            .load::<DbUuid>(conn)
            .await?
            .len();
            if ended == 1 {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(ended == 1)
        })
    }
}

/// Inserts the session inside the caller's transaction; with `keep_at_most`, the user's oldest
/// live sessions beyond that many (the new one counted) end at its creation. The user's row is
/// locked first (PostgreSQL; a SQLite write transaction holds the whole database): a user's
/// sessions open one after the other, so concurrent sign-ins count each other against the
/// limit, and a password change, which locks the row before it ends the sessions, either sees
/// this one or is seen by it. A session that names the password its sign-in checked opens only
/// while that is still the account's (else a `UniqueViolation`, which the store reports as
/// `Conflict`, and the caller's transaction rolls back).
///
/// The lock is held until the commit: callers open the session last in their transaction, after
/// its events and audit record, so that a user's sign-ins wait for each other as briefly as can
/// be (with four exchanges of one user at a time, the lock's wait was 1.4 ms of each on
/// PostgreSQL while it came first: `docs/benchmarks.md`, seventh pass).
pub(super) async fn open_session(
    conn: &mut Conn,
    session: &NewSession,
    keep_at_most: Option<u32>,
) -> QueryResult<()> {
    let user = users::table.find(DbUuid(session.user_id.as_uuid()));
    // Both locks are kept prepared (one text each), and loaded so that SQLite keeps them too.
    let locked: Vec<DbUuid> = match &session.password_checked {
        Some(checked) => {
            kept(
                diesel::update(user.filter(users::password_hash.eq(checked.as_phc())))
                    .set(users::id.eq(users::id))
                    .returning(users::id),
            )
            .load(conn)
            .await?
        }
        None => {
            kept(
                diesel::update(user)
                    .set(users::id.eq(users::id))
                    .returning(users::id),
            )
            .load(conn)
            .await?
        }
    };
    if locked.len() != 1 {
        return Err(crate::refused(
            diesel::result::DatabaseErrorKind::UniqueViolation,
            "the password the sign-in checked is no longer the account's",
        ));
    }
    diesel::insert_into(sessions::table)
        .values(NewSessionRow::of(session))
        .execute(conn)
        .await?;
    if let Some(limit) = keep_at_most {
        // The oldest live sessions beyond the limit end now, the new one counted.
        let now = session.created_at;
        let ended: Vec<DbUuid> = sessions::table
            .filter(sessions::user_id.eq(DbUuid(session.user_id.as_uuid())))
            .filter(sessions::revoked_at.is_null())
            .filter(sessions::expires_at.gt(now))
            .order((sessions::created_at.desc(), sessions::id.desc()))
            .offset(i64::from(limit))
            .limit(i64::MAX)
            .select(sessions::id)
            .load(conn)
            .await?;
        if !ended.is_empty() {
            diesel::update(sessions::table.filter(sessions::id.eq_any(ended)))
                .set(sessions::revoked_at.eq(now))
                .execute(conn)
                .await?;
        }
    }
    Ok(())
}
