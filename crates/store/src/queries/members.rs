use async_trait::async_trait;
use diesel::{
    dsl::{InnerJoin, IntoBoxed},
    prelude::*,
    result::DatabaseErrorKind,
    sql_types::{Bool, Text},
};
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        AssignedRole, AuditRecord, Email, Invitation, InvitationId, InvitationRecord, Member,
        MemberFilter, NewEvent, NewInvitation, OpenInvitation, OrganizationId, OrganizationType,
        Page, PageRequest, Role, RoleRef, TokenHash, UserId,
    },
    ports::{MemberStore, ScimTokenRevocation, SealedMail, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{api_keys, invitations, memberships, organizations, users},
        Conn, Db, DbStore, Sql,
    },
    contains_pattern,
    custom_roles::CustomRoles,
    events::record_events,
    grants::{give_role, revoke_scim_tokens},
    lower,
    mail::queue_mail,
    rows::{InvitationRow, InvitedMemberRow, MemberRow, NewInvitationRow, NewMembershipRow},
};
use crate::{
    corrupt, db_error,
    dialect::{search_phrase, Dialect},
    listing::{in_key_order, split_page, window},
    refused,
    types::DbUuid,
};

/// What a [`MemberRow`] is read from.
const MEMBER_COLUMNS: (
    memberships::organization_id,
    memberships::user_id,
    users::email,
    users::full_name,
    memberships::role,
    memberships::invited_by,
    memberships::invited_at,
    memberships::created_at,
) = (
    memberships::organization_id,
    memberships::user_id,
    users::email,
    users::full_name,
    memberships::role,
    memberships::invited_by,
    memberships::invited_at,
    memberships::created_at,
);

/// What an [`InvitedMemberRow`] is read from.
const INVITED_MEMBER_COLUMNS: (
    invitations::id,
    invitations::organization_id,
    invitations::email,
    invitations::role,
    invitations::invited_by,
    invitations::invited_at,
) = (
    invitations::id,
    invitations::organization_id,
    invitations::email,
    invitations::role,
    invitations::invited_by,
    invitations::invited_at,
);

/// What an [`InvitationRow`] is read from.
const INVITATION_COLUMNS: (
    invitations::id,
    invitations::organization_id,
    organizations::name,
    organizations::slug,
    invitations::email,
    invitations::role,
    invitations::invited_by,
    invitations::invited_at,
    invitations::expires_at,
) = (
    invitations::id,
    invitations::organization_id,
    organizations::name,
    organizations::slug,
    invitations::email,
    invitations::role,
    invitations::invited_by,
    invitations::invited_at,
    invitations::expires_at,
);

type MembersQuery = IntoBoxed<'static, InnerJoin<memberships::table, users::table>, Db>;
type InvitationsQuery = IntoBoxed<'static, InnerJoin<invitations::table, organizations::table>, Db>;

/// The organization's active members, filtered.
fn active_members(org: DbUuid, filter: &MemberFilter) -> MembersQuery {
    let mut query = memberships::table
        .inner_join(users::table)
        .filter(memberships::organization_id.eq(org))
        .into_boxed();
    if let Some(role) = &filter.role {
        query = query.filter(memberships::role.eq(role.name().to_owned()));
    }
    if let Some(search) = &filter.search {
        // The index first, where the backend keeps one beside `users`; the `LIKE` conditions
        // then decide, exactly as they would alone.
        if let (Some((before, after)), Some(phrase)) =
            (Sql::USER_SEARCH, search_phrase(search.as_str()))
        {
            query = query.filter(
                diesel::dsl::sql::<Bool>(before)
                    .bind::<Text, _>(phrase)
                    .sql(after),
            );
        }
        let pattern = contains_pattern(search.as_str());
        query = query.filter(
            lower(users::email)
                .like(lower(pattern.clone()))
                .escape('\\')
                .or(lower(users::full_name).like(lower(pattern)).escape('\\')),
        );
    }
    query
}

/// The organization's memberships, of one role when asked: the active members, when no search
/// needs their users.
fn memberships_of(org: DbUuid, role: Option<&RoleRef>) -> memberships::BoxedQuery<'static, Db> {
    let mut query = memberships::table
        .filter(memberships::organization_id.eq(org))
        .into_boxed();
    if let Some(role) = role {
        query = query.filter(memberships::role.eq(role.name().to_owned()));
    }
    query
}

/// The organization's pending invitations that have not expired at `now`, filtered.
fn invited_members(
    org: DbUuid,
    filter: &MemberFilter,
    now: OffsetDateTime,
) -> invitations::BoxedQuery<'static, Db> {
    let mut query = invitations::table
        .filter(invitations::organization_id.eq(org))
        .filter(invitations::accepted_at.is_null())
        .filter(invitations::revoked_at.is_null())
        .filter(invitations::expires_at.gt(now))
        .into_boxed();
    if let Some(role) = &filter.role {
        query = query.filter(invitations::role.eq(role.name().to_owned()));
    }
    if let Some(search) = &filter.search {
        query = query.filter(
            lower(invitations::email)
                .like(lower(contains_pattern(search.as_str())))
                .escape('\\'),
        );
    }
    query
}

/// Pending (neither accepted nor revoked, maybe expired) invitations of live organizations.
fn pending_invitations() -> InvitationsQuery {
    invitations::table
        .inner_join(organizations::table)
        .filter(invitations::accepted_at.is_null())
        .filter(invitations::revoked_at.is_null())
        .filter(organizations::is_active.eq(true))
        .into_boxed()
}

async fn load_invitation(
    conn: &mut Conn,
    query: InvitationsQuery,
) -> Result<Option<Invitation>, StoreError> {
    let Some(row) = query
        .select(INVITATION_COLUMNS)
        .get_result::<InvitationRow>(conn)
        .await
        .optional()
        .map_err(db_error)?
    else {
        return Ok(None);
    };
    let roles = CustomRoles::of(conn, [(row.organization_id, row.role.as_str())]).await?;
    row.into_domain(&roles).map(Some)
}

/// The organizations the user owns.
#[diesel::dsl::auto_type]
fn owned_by(user: DbUuid) -> _ {
    let owner: &'static str = Role::Owner.as_str();
    memberships::table
        .filter(memberships::user_id.eq(user))
        .filter(memberships::role.eq(owner))
        .select(memberships::organization_id)
}

/// The organizations someone other than the user belongs to.
#[diesel::dsl::auto_type]
fn with_members_besides(user: DbUuid) -> _ {
    memberships::table
        .filter(memberships::user_id.ne(user))
        .select(memberships::organization_id)
}

#[async_trait]
impl MemberStore for DbStore {
    async fn members(
        &self,
        organization_id: OrganizationId,
        filter: MemberFilter,
        page: PageRequest,
        now: OffsetDateTime,
    ) -> Result<Page<Member>, StoreError> {
        let searched = filter.search.is_some();
        let list = async move |conn: &mut Conn| {
            let org = DbUuid(organization_id.as_uuid());
            // Without a search, the memberships alone answer (every one has its user: a
            // foreign key): the count and the page's keys read only an index of the
            // organization's memberships in the listing's order, and the users are joined
            // for the page's rows alone. A search reads the users' names and emails.
            let active_total: i64 = if filter.search.is_none() {
                memberships_of(org, filter.role.as_ref())
                    .count()
                    .get_result(conn)
                    .await
                    .map_err(db_error)?
            } else {
                active_members(org, &filter)
                    .count()
                    .get_result(conn)
                    .await
                    .map_err(db_error)?
            };
            let invited_total: i64 = if filter.active_only {
                0
            } else {
                invited_members(org, &filter, now)
                    .count()
                    .get_result(conn)
                    .await
                    .map_err(db_error)?
            };
            let (active, invited) = split_page(page.offset(), page.limit(), active_total);
            let mut items = Vec::new();
            if let Some(slice) = active {
                let window = window(slice.offset, slice.limit, active_total);
                let rows: Vec<MemberRow> = if filter.search.is_none() {
                    // The page's members first, from the index of the organization's
                    // memberships alone, then their rows (users joined) by key.
                    let keys =
                        memberships_of(org, filter.role.as_ref()).select(memberships::user_id);
                    let keys = if window.reversed {
                        keys.order((memberships::created_at.desc(), memberships::user_id.desc()))
                    } else {
                        keys.order((memberships::created_at.asc(), memberships::user_id.asc()))
                    };
                    let keys: Vec<DbUuid> = keys
                        .offset(window.offset)
                        .limit(window.limit)
                        .load(conn)
                        .await
                        .map_err(db_error)?;
                    let keys = window.in_order(keys);
                    let rows: Vec<MemberRow> = active_members(org, &MemberFilter::default())
                        .filter(memberships::user_id.eq_any(keys.clone()))
                        .select(MEMBER_COLUMNS)
                        .load(conn)
                        .await
                        .map_err(db_error)?;
                    in_key_order(&keys, rows, |row| &row.user_id)
                } else {
                    let query = active_members(org, &filter).select(MEMBER_COLUMNS);
                    let query = if window.reversed {
                        query.order((memberships::created_at.desc(), memberships::user_id.desc()))
                    } else {
                        query.order((memberships::created_at.asc(), memberships::user_id.asc()))
                    };
                    let rows = query
                        .offset(window.offset)
                        .limit(window.limit)
                        .load(conn)
                        .await
                        .map_err(db_error)?;
                    window.in_order(rows)
                };
                let roles = CustomRoles::of(
                    conn,
                    rows.iter().map(|r| (r.organization_id, r.role.as_str())),
                )
                .await?;
                for row in rows {
                    items.push(row.into_domain(&roles)?);
                }
            }
            if let Some(slice) = invited.filter(|slice| slice.offset < invited_total) {
                let window = window(slice.offset, slice.limit, invited_total);
                let query = invited_members(org, &filter, now).select(INVITED_MEMBER_COLUMNS);
                let query = if window.reversed {
                    query.order((invitations::invited_at.desc(), invitations::id.desc()))
                } else {
                    query.order((invitations::invited_at.asc(), invitations::id.asc()))
                };
                let rows: Vec<InvitedMemberRow> = query
                    .offset(window.offset)
                    .limit(window.limit)
                    .load(conn)
                    .await
                    .map_err(db_error)?;
                let roles = CustomRoles::of(
                    conn,
                    rows.iter().map(|r| (r.organization_id, r.role.as_str())),
                )
                .await?;
                for row in window.in_order(rows) {
                    items.push(row.into_domain(&roles)?);
                }
            }
            let total = active_total.unsigned_abs() + invited_total.unsigned_abs();
            Ok(Page::new(items, total, page))
        };
        // A search's cost grows with the matches it counts: off the caller's thread.
        if searched {
            in_read!(self, long, list)
        } else {
            in_read!(self, list)
        }
    }

    async fn member(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
    ) -> Result<Option<Member>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let Some(row) =
                active_members(DbUuid(organization_id.as_uuid()), &MemberFilter::default())
                    .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
                    .select(MEMBER_COLUMNS)
                    .get_result::<MemberRow>(conn)
                    .await
                    .optional()
                    .map_err(db_error)?
            else {
                return Ok(None);
            };
            let roles = CustomRoles::of(conn, [(row.organization_id, row.role.as_str())]).await?;
            row.into_domain(&roles).map(Some)
        })
    }

    async fn is_member_email(
        &self,
        organization_id: OrganizationId,
        email: &Email,
    ) -> Result<bool, StoreError> {
        let email = email.clone();
        in_read!(self, async |conn: &mut Conn| {
            let members: i64 = memberships::table
                .inner_join(users::table)
                .filter(memberships::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(users::email.eq(email.as_ref()))
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            Ok(members > 0)
        })
    }

    async fn create_invitation(
        &self,
        invitation: NewInvitation,
        event: NewEvent,
        audit: AuditRecord,
        mail: SealedMail,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let org = DbUuid(invitation.organization_id.as_uuid());
            give_role(conn, org, invitation.role.role().name()).await?;
            insert_invitation(conn, &invitation).await?;
            record_events(conn, vec![event]).await?;
            queue_mail(conn, &[mail], invitation.invited_at).await?;
            insert_audit(conn, audit).await
        })
    }

    async fn invitation(&self, id: InvitationId) -> Result<Option<Invitation>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let query = pending_invitations().filter(invitations::id.eq(DbUuid(id.as_uuid())));
            load_invitation(conn, query).await
        })
    }

    async fn invitation_by_token(
        &self,
        hash: &TokenHash,
    ) -> Result<Option<Invitation>, StoreError> {
        let hash = hash.clone();
        in_read!(self, async |conn: &mut Conn| {
            let query =
                pending_invitations().filter(invitations::token_hash.eq(hash.as_hex().to_owned()));
            load_invitation(conn, query).await
        })
    }

    async fn invitation_record(
        &self,
        hash: &TokenHash,
    ) -> Result<Option<InvitationRecord>, StoreError> {
        let hash = hash.clone();
        in_read!(self, async |conn: &mut Conn| {
            let found: Option<(
                InvitationRow,
                Option<OffsetDateTime>,
                Option<OffsetDateTime>,
                String,
            )> = invitations::table
                .inner_join(organizations::table)
                .filter(invitations::token_hash.eq(hash.as_hex().to_owned()))
                .filter(organizations::is_active.eq(true))
                .select((
                    INVITATION_COLUMNS,
                    invitations::accepted_at,
                    invitations::revoked_at,
                    organizations::plan,
                ))
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            let Some((row, accepted_at, revoked_at, plan)) = found else {
                return Ok(None);
            };
            let roles = CustomRoles::of(conn, [(row.organization_id, row.role.as_str())]).await?;
            Some((row, accepted_at, revoked_at, plan))
                .map(|(row, accepted_at, revoked_at, plan)| {
                    Ok(InvitationRecord {
                        invitation: row.into_domain(&roles)?,
                        accepted_at,
                        revoked_at,
                        plan: plan.parse().map_err(|_| corrupt("organizations.plan"))?,
                    })
                })
                .transpose()
        })
    }

    async fn invitations_for(
        &self,
        email: &Email,
        now: OffsetDateTime,
        page: PageRequest,
    ) -> Result<Page<Invitation>, StoreError> {
        let email = email.as_ref().to_owned();
        in_read!(self, async |conn: &mut Conn| {
            let open = || {
                pending_invitations()
                    .filter(invitations::email.eq(email.clone()))
                    .filter(invitations::expires_at.gt(now))
            };
            let total: i64 = open().count().get_result(conn).await.map_err(db_error)?;
            let rows: Vec<InvitationRow> = page_rows!(
                conn,
                page,
                total,
                open().select(INVITATION_COLUMNS),
                desc / asc(invitations::invited_at, invitations::id)
            );
            let roles = CustomRoles::of(
                conn,
                rows.iter().map(|r| (r.organization_id, r.role.as_str())),
            )
            .await?;
            let invitations = rows
                .into_iter()
                .map(|row| row.into_domain(&roles))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Page::new(
                invitations,
                u64::try_from(total).unwrap_or(0),
                page,
            ))
        })
    }

    async fn accept_invitation(
        &self,
        id: InvitationId,
        user_id: UserId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let invitation = DbUuid(id.as_uuid());
            // The organization's row first, locked for this transaction (PostgreSQL; a SQLite
            // write transaction holds the whole database): an owner deleting their account
            // meanwhile either waits and then sees this member (and is refused), or deleted
            // the organization first, and then there is nothing to accept.
            let of_invitation = invitations::table
                .filter(invitations::id.eq(invitation))
                .select(invitations::organization_id);
            let live = diesel::update(
                organizations::table
                    .filter(organizations::id.eq_any(of_invitation))
                    .filter(organizations::is_active.eq(true)),
            )
            .set(organizations::id.eq(organizations::id))
            .execute(conn)
            .await?;
            if live != 1 {
                return Ok(false);
            }
            let live = organizations::table
                .filter(organizations::is_active.eq(true))
                .select(organizations::id);
            let pending = invitations::table
                .filter(invitations::id.eq(invitation))
                .filter(invitations::accepted_at.is_null())
                .filter(invitations::revoked_at.is_null())
                .filter(invitations::organization_id.eq_any(live));
            let accepted: Option<(DbUuid, String, DbUuid, OffsetDateTime)> =
                diesel::update(pending)
                    .set(invitations::accepted_at.eq(Some(at)))
                    .returning((
                        invitations::organization_id,
                        invitations::role,
                        invitations::invited_by,
                        invitations::invited_at,
                    ))
                    .get_result(conn)
                    .await
                    .optional()?;
            let Some((org, role, invited_by, invited_at)) = accepted else {
                return Ok(false);
            };
            give_role(conn, org, &role).await?;
            // Already a member: the primary key refuses, and the acceptance rolls back.
            add_membership(
                conn,
                org,
                user_id,
                &role,
                at,
                Some((invited_by, invited_at)),
            )
            .await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn revoke_invitation(
        &self,
        organization_id: OrganizationId,
        id: InvitationId,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let pending = invitations::table
                .filter(invitations::id.eq(DbUuid(id.as_uuid())))
                .filter(invitations::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(invitations::accepted_at.is_null())
                .filter(invitations::revoked_at.is_null());
            let revoked = diesel::update(pending)
                .set(invitations::revoked_at.eq(Some(at)))
                .execute(conn)
                .await?
                == 1;
            if revoked {
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(revoked)
        })
    }

    async fn change_role(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
        role: AssignedRole,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let org = DbUuid(organization_id.as_uuid());
            give_role(conn, org, role.name()).await?;
            if !set_role(conn, org, user_id, &role, at).await? {
                return refuse_the_owner(conn, org, DbUuid(user_id.as_uuid())).await;
            }
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            revoke_scim_tokens(conn, &revoked).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn transfer_ownership(
        &self,
        organization_id: OrganizationId,
        from: UserId,
        to: UserId,
        at: OffsetDateTime,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let written = write_tx!(&mut *conn, async |conn: &mut Conn| {
                    let org = DbUuid(organization_id.as_uuid());
                    let of = |user: UserId| {
                        memberships::table
                            .filter(memberships::organization_id.eq(org))
                            .filter(memberships::user_id.eq(DbUuid(user.as_uuid())))
                    };
                    let set_role = |role: Role| {
                        (
                            memberships::role.eq(role.as_str()),
                            memberships::updated_at.eq(at),
                        )
                    };
                    // Demote first: the one-owner index never sees two owners.
                    let owner = of(from).filter(memberships::role.eq(Role::Owner.as_str()));
                    let demoted = diesel::update(owner)
                        .set(set_role(Role::Admin))
                        .execute(conn)
                        .await?;
                    let promoted = match demoted {
                        1 => {
                            diesel::update(of(to))
                                .set(set_role(Role::Owner))
                                .execute(conn)
                                .await?
                        }
                        _ => 0,
                    };
                    if promoted != 1 {
                        // The owner or the new owner changed meanwhile: nothing may stay.
                        return Err(diesel::result::Error::RollbackTransaction);
                    }
                    record_events(conn, events).await?;
                    insert_audit(conn, audit).await
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

    async fn remove_member(
        &self,
        organization_id: OrganizationId,
        user_id: UserId,
        event: NewEvent,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            if !end_membership(conn, organization_id, user_id).await? {
                let (org, user) = (DbUuid(organization_id.as_uuid()), DbUuid(user_id.as_uuid()));
                return refuse_the_owner(conn, org, user).await;
            }
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            revoke_scim_tokens(conn, &revoked).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn owned_teams_with_members(
        &self,
        user_id: UserId,
    ) -> Result<Vec<OrganizationId>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            let ids: Vec<DbUuid> = organizations::table
                .filter(organizations::is_active.eq(true))
                .filter(organizations::kind.eq(OrganizationType::Team.as_str()))
                .filter(organizations::id.eq_any(owned_by(user)))
                .filter(organizations::id.eq_any(with_members_besides(user)))
                .select(organizations::id)
                .order((organizations::created_at.asc(), organizations::id.asc()))
                .load(conn)
                .await
                .map_err(db_error)?;
            Ok(ids.into_iter().map(|id| id.0.into()).collect())
        })
    }

    async fn delete_user(
        &self,
        user_id: UserId,
        events: Vec<NewEvent>,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            // The organizations they own, locked for this transaction (PostgreSQL; a SQLite
            // write transaction holds the whole database), then checked again: an invitation
            // accepted meanwhile (which locks its organization first) is seen here, and
            // refuses the deletion as the use case's own check does.
            diesel::update(organizations::table.filter(organizations::id.eq_any(owned_by(user))))
                .set(organizations::id.eq(organizations::id))
                .execute(conn)
                .await?;
            let teams: i64 = organizations::table
                .filter(organizations::is_active.eq(true))
                .filter(organizations::kind.eq(OrganizationType::Team.as_str()))
                .filter(organizations::id.eq_any(owned_by(user)))
                .filter(organizations::id.eq_any(with_members_besides(user)))
                .count()
                .get_result(conn)
                .await?;
            if teams > 0 {
                return Err(refused(
                    DatabaseErrorKind::UniqueViolation,
                    "the user owns a team with other members",
                ));
            }
            // First, while the memberships still say where the events should go.
            record_events(conn, events).await?;
            insert_audit(conn, audit).await?;
            revoke_scim_tokens(conn, &revoked).await?;
            // Their personal workspaces, and the teams nobody else belongs to.
            let going: Vec<DbUuid> = organizations::table
                .filter(organizations::id.eq_any(owned_by(user)))
                .filter(
                    organizations::kind
                        .eq(OrganizationType::Personal.as_str())
                        .or(organizations::id.ne_all(with_members_besides(user))),
                )
                .select(organizations::id)
                .load(conn)
                .await?;
            // Memberships, invitations, API keys and applications go by cascade.
            diesel::delete(organizations::table.filter(organizations::id.eq_any(&going)))
                .execute(conn)
                .await?;
            // Their memberships elsewhere, never an owner's: a transfer that made them an
            // owner meanwhile is waited for (PostgreSQL), and then the membership is left and
            // the deletion refused below, rather than a live team left without its owner (a
            // deleted organization's go with the user, by cascade, as before).
            diesel::delete(
                memberships::table
                    .filter(memberships::user_id.eq(user))
                    .filter(memberships::role.ne(OWNER)),
            )
            .execute(conn)
            .await?;
            let live = organizations::table
                .filter(organizations::is_active.eq(true))
                .select(organizations::id);
            let owning: i64 = memberships::table
                .filter(memberships::user_id.eq(user))
                .filter(memberships::organization_id.eq_any(live))
                .count()
                .get_result(conn)
                .await?;
            if owning > 0 {
                return Err(refused(
                    DatabaseErrorKind::UniqueViolation,
                    "the user became the owner of a team meanwhile",
                ));
            }
            // And with the user, their other memberships, sessions and API keys.
            diesel::delete(users::table.find(user))
                .execute(conn)
                .await?;
            Ok::<_, diesel::result::Error>(())
        })
    }
}

/// The open invitations of the address in the organization.
macro_rules! open_invitations {
    ($organization:expr, $email:expr) => {
        invitations::table
            .filter(invitations::organization_id.eq($organization))
            .filter(invitations::email.eq($email))
            .filter(invitations::accepted_at.is_null())
            .filter(invitations::revoked_at.is_null())
    };
}
pub(super) use open_invitations;

/// Stores a new invitation, in the caller's transaction, by the one rule for open invitations
/// ([`OpenInvitation`]): an open one of the same address is closed when it has expired, or
/// when the new one replaces it; one left open makes `invitations_one_open_idx` refuse the
/// new one (a conflict).
pub(super) async fn insert_invitation(
    conn: &mut Conn,
    invitation: &NewInvitation,
) -> QueryResult<()> {
    let organization = DbUuid(invitation.organization_id.as_uuid());
    let open = open_invitations!(organization, invitation.email.as_ref());
    let closing = match invitation.open {
        OpenInvitation::Kept => {
            diesel::update(open.filter(invitations::expires_at.le(invitation.invited_at)))
                .set(invitations::revoked_at.eq(Some(invitation.invited_at)))
                .execute(conn)
                .await
        }
        OpenInvitation::Replaced => {
            diesel::update(open)
                .set(invitations::revoked_at.eq(Some(invitation.invited_at)))
                .execute(conn)
                .await
        }
    };
    closing?;
    diesel::insert_into(invitations::table)
        .values(NewInvitationRow {
            id: DbUuid(invitation.id.as_uuid()),
            organization_id: DbUuid(invitation.organization_id.as_uuid()),
            email: invitation.email.as_ref(),
            role: invitation.role.role().name(),
            token_hash: invitation.token_hash.as_hex(),
            invited_by: DbUuid(invitation.invited_by.as_uuid()),
            invited_at: invitation.invited_at,
            expires_at: invitation.expires_at,
        })
        .execute(conn)
        .await
        .map(|_| ())
}

/// The owner's role, as stored.
const OWNER: &str = Role::Owner.as_str();

/// After a write to a membership changed nothing: `false` when there is no such membership,
/// else (it is the owner's, maybe since a transfer committed meanwhile) the transaction is
/// refused as a [`StoreError::Conflict`].
async fn refuse_the_owner(conn: &mut Conn, org: DbUuid, user: DbUuid) -> QueryResult<bool> {
    let found: i64 = memberships::table
        .filter(memberships::organization_id.eq(org))
        .filter(memberships::user_id.eq(user))
        .count()
        .get_result(conn)
        .await?;
    if found == 0 {
        Ok(false)
    } else {
        Err(refused(
            DatabaseErrorKind::UniqueViolation,
            "the membership is the owner's",
        ))
    }
}

/// Gives the user of the organization `role`, never the owner's role (on PostgreSQL the filter
/// is checked again after waiting on a transfer that makes them the owner), in the caller's
/// transaction: whether a membership changed.
pub(super) async fn set_role(
    conn: &mut Conn,
    organization: DbUuid,
    user_id: UserId,
    role: &AssignedRole,
    at: OffsetDateTime,
) -> QueryResult<bool> {
    let membership = memberships::table
        .filter(memberships::organization_id.eq(organization))
        .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
        .filter(memberships::role.ne(OWNER));
    let updated = diesel::update(membership)
        .set((
            memberships::role.eq(role.name()),
            memberships::updated_at.eq(at),
        ))
        .execute(conn)
        .await?;
    Ok(updated == 1)
}

/// Makes the user a member of the organization with `role` (its custom role checked by the
/// caller), invited by whom and when if they were, in the caller's transaction. A membership
/// that appeared meanwhile makes the primary key refuse it, and the transaction roll back.
pub(super) async fn add_membership(
    conn: &mut Conn,
    organization: DbUuid,
    user_id: UserId,
    role: &str,
    at: OffsetDateTime,
    invited: Option<(DbUuid, OffsetDateTime)>,
) -> QueryResult<()> {
    diesel::insert_into(memberships::table)
        .values(NewMembershipRow {
            organization_id: organization,
            user_id: DbUuid(user_id.as_uuid()),
            role,
            created_at: at,
            updated_at: at,
            invited_by: invited.map(|(by, _)| by),
            invited_at: invited.map(|(_, at)| at),
        })
        .execute(conn)
        .await
        .map(|_| ())
}

/// Ends an active membership (never the owner's) and, with it, the user's API keys for the
/// organization, in the caller's transaction; `false` when they were not a member, or are the
/// owner.
pub(super) async fn end_membership(
    conn: &mut Conn,
    organization_id: OrganizationId,
    user_id: UserId,
) -> QueryResult<bool> {
    let (org, user) = (DbUuid(organization_id.as_uuid()), DbUuid(user_id.as_uuid()));
    // Never the owner's: on PostgreSQL the filter is checked again after waiting on a transfer
    // that makes them the owner, so the organization keeps its one owner.
    let membership = memberships::table
        .filter(memberships::organization_id.eq(org))
        .filter(memberships::user_id.eq(user))
        .filter(memberships::role.ne(OWNER));
    let removed = diesel::delete(membership).execute(conn).await?;
    if removed == 1 {
        let keys = api_keys::table
            .filter(api_keys::organization_id.eq(org))
            .filter(api_keys::user_id.eq(user));
        diesel::delete(keys).execute(conn).await?;
    }
    Ok(removed == 1)
}
