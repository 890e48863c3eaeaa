use std::collections::HashMap;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        AuditRecord, NewEvent, NewOrganization, Organization, OrganizationChange,
        OrganizationFilter, OrganizationId, Page, PageRequest, Plan, Role, Slug, UserId,
    },
    ports::{OrganizationStore, PurgedOrganizations, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{
            applications, memberships, organizations, scim_groups, scim_users, webhook_deliveries,
            webhook_endpoints,
        },
        Conn, Db, DbStore,
    },
    contains_pattern,
    events::record_events,
    lower,
    rows::{NewMembershipRow, NewOrganizationRow, OrganizationRow},
};
use crate::{db_error, types::DbUuid, violates};

/// While `$left` is above zero, deletes at most `$left` rows of `$table` that belong to the
/// organization `$org` (`organization_id`), chosen by their `$key`, and counts them off `$left`
/// and onto `$rows`: one slice of a purge, from the index that starts with the organization.
macro_rules! delete_some {
    ($conn:expr, $table:ident, $key:ident, $org:expr, $left:ident, $rows:ident) => {
        if $left > 0 {
            let keys: Vec<DbUuid> = $table::table
                .filter($table::organization_id.eq($org))
                .select($table::$key)
                .limit($left)
                .load($conn)
                .await?;
            let n = diesel::delete(
                $table::table
                    .filter($table::organization_id.eq($org))
                    .filter($table::$key.eq_any(keys)),
            )
            .execute($conn)
            .await?;
            ($left, $rows) = ($left - n as i64, $rows + n as u64);
        }
    };
}

/// How many times creating an organization retries when a concurrent one took the same
/// generated slug.
pub(super) const SLUG_RACE_RETRIES: usize = 3;

/// The first free slug among the candidates of `base` (`base`, `base-2`, ...).
pub(super) async fn free_slug(conn: &mut Conn, base: &Slug) -> QueryResult<Slug> {
    // Slugs hold only `a-z`, `0-9` and `-`: nothing to escape in the pattern.
    let pattern = format!("{}-%", base.as_ref());
    let taken: Vec<String> = organizations::table
        .select(organizations::slug)
        .filter(
            organizations::slug
                .eq(base.as_ref())
                .or(organizations::slug.like(pattern)),
        )
        .load(conn)
        .await?;
    let mut n = 1;
    loop {
        let candidate = base.candidate(n);
        if !taken.iter().any(|t| t == candidate.as_ref()) {
            return Ok(candidate);
        }
        n += 1;
    }
}

/// Inserts the organization (with the first free candidate of its slug when the slug was
/// generated) and `owner`'s owner membership, inside the caller's transaction. Returns the slug
/// the organization got.
pub(super) async fn insert_organization(
    conn: &mut Conn,
    org: &NewOrganization,
    owner: DbUuid,
) -> QueryResult<Slug> {
    fn row<'a>(org: &'a NewOrganization, slug: &'a Slug) -> NewOrganizationRow<'a> {
        NewOrganizationRow {
            id: DbUuid(org.id.as_uuid()),
            name: org.name.as_ref(),
            slug: slug.as_ref(),
            kind: org.kind.as_str(),
            plan: org.plan.as_str(),
            created_at: org.created_at,
            updated_at: org.created_at,
        }
    }
    let slug = if org.slug_generated {
        // A concurrent transaction can take the free candidate between the read and the insert.
        // The insert then does nothing (on PostgreSQL, once that transaction has committed) and
        // the next free candidate is tried: every turn of the loop means another organization
        // took a candidate, so it ends, and no number of concurrent twins exhausts a retry budget.
        loop {
            let slug = free_slug(conn, &org.slug).await?;
            let inserted = diesel::insert_into(organizations::table)
                .values(row(org, &slug))
                .on_conflict(organizations::slug)
                .do_nothing()
                .execute(conn)
                .await?;
            if inserted == 1 {
                break slug;
            }
        }
    } else {
        diesel::insert_into(organizations::table)
            .values(row(org, &org.slug))
            .execute(conn)
            .await?;
        org.slug.clone()
    };
    diesel::insert_into(memberships::table)
        .values(NewMembershipRow {
            organization_id: DbUuid(org.id.as_uuid()),
            user_id: owner,
            role: Role::Owner.as_str(),
            created_at: org.created_at,
            updated_at: org.created_at,
            invited_by: None,
            invited_at: None,
        })
        .execute(conn)
        .await?;
    Ok(slug)
}

/// Writes the slug the organization actually got into its events' data.
pub(super) fn stamp_slug(events: &mut [NewEvent], org: OrganizationId, slug: &Slug) {
    for event in events {
        if event.organization_id == Some(org) {
            if let Some(data) = event.data.as_object_mut() {
                data.insert("slug".into(), slug.as_ref().into());
            }
        }
    }
}

/// The live organizations `user` is a member of, filtered.
fn organizations_of_query(
    user: DbUuid,
    filter: &OrganizationFilter,
) -> organizations::BoxedQuery<'static, Db> {
    let mine = memberships::table
        .filter(memberships::user_id.eq(user))
        .select(memberships::organization_id);
    let mut query = organizations::table
        .filter(organizations::is_active.eq(true))
        .filter(organizations::id.eq_any(mine))
        .into_boxed();
    if let Some(kind) = filter.kind {
        query = query.filter(organizations::kind.eq(kind.as_str()));
    }
    if let Some(search) = &filter.search {
        query = query.filter(
            lower(organizations::name)
                .like(lower(contains_pattern(search.as_str())))
                .escape('\\'),
        );
    }
    query
}

/// Adds the counts to the organizations: one grouped query per count, whatever their number.
async fn with_counts(
    conn: &mut Conn,
    rows: Vec<OrganizationRow>,
) -> Result<Vec<Organization>, StoreError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<DbUuid> = rows.iter().map(|row| row.id).collect();
    let members: HashMap<DbUuid, i64> = memberships::table
        .filter(memberships::organization_id.eq_any(&ids))
        .group_by(memberships::organization_id)
        .select((memberships::organization_id, diesel::dsl::count_star()))
        .load::<(DbUuid, i64)>(conn)
        .await
        .map_err(db_error)?
        .into_iter()
        .collect();
    let apps: HashMap<DbUuid, i64> = applications::table
        .filter(applications::organization_id.eq_any(&ids))
        .group_by(applications::organization_id)
        .select((applications::organization_id, diesel::dsl::count_star()))
        .load::<(DbUuid, i64)>(conn)
        .await
        .map_err(db_error)?
        .into_iter()
        .collect();
    let counted = |counts: &HashMap<DbUuid, i64>, id| count(counts.get(&id).copied());
    rows.into_iter()
        .map(|row| {
            let (member_count, application_count) =
                (counted(&members, row.id), counted(&apps, row.id));
            row.into_domain(member_count, application_count)
        })
        .collect()
}

/// A `COUNT(*)` read back (none counted when absent).
fn count(counted: Option<i64>) -> u64 {
    counted.map_or(0, i64::unsigned_abs)
}

/// The columns an organization change may touch; `None` leaves a column alone.
#[derive(AsChangeset)]
#[diesel(table_name = organizations)]
struct OrganizationChangeset<'a> {
    name: Option<&'a str>,
    slug: Option<&'a str>,
    default_role: Option<&'static str>,
    allow_member_invite: Option<bool>,
    updated_at: OffsetDateTime,
}

#[async_trait]
impl OrganizationStore for DbStore {
    async fn first_free_slug(&self, base: &Slug) -> Result<Slug, StoreError> {
        let base = base.clone();
        in_read!(self, async |conn: &mut Conn| {
            free_slug(conn, &base).await.map_err(db_error)
        })
    }

    async fn create_organization(
        &self,
        organization: NewOrganization,
        owner: UserId,
        events: Vec<NewEvent>,
        audit: AuditRecord,
    ) -> Result<Slug, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let result = write_tx!(&mut *conn, async |conn: &mut Conn| {
                        let slug =
                            insert_organization(conn, &organization, DbUuid(owner.as_uuid()))
                                .await?;
                        let mut events = events.clone();
                        if organization.slug_generated {
                            stamp_slug(&mut events, organization.id, &slug);
                        }
                        record_events(conn, events).await?;
                        insert_audit(conn, audit.clone()).await?;
                        Ok(slug)
                    })
                    .await;
                    match result {
                        Ok(slug) => return Ok(slug),
                        // A concurrent creation took the generated slug: take the next free one.
                        Err(e)
                            if organization.slug_generated
                                && violates(&e, "organizations_slug_key")
                                && attempt < SLUG_RACE_RETRIES => {}
                        Err(e) => return Err(db_error(e)),
                    }
                }
            })
            .await
    }

    async fn organizations_of(
        &self,
        user_id: UserId,
        filter: OrganizationFilter,
        page: PageRequest,
    ) -> Result<Page<Organization>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            let total: i64 = organizations_of_query(user, &filter)
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<OrganizationRow> = page_rows!(
                conn,
                page,
                total,
                organizations_of_query(user, &filter).select(OrganizationRow::as_select()),
                desc / asc(organizations::created_at, organizations::id)
            );
            let items = with_counts(conn, rows).await?;
            Ok(Page::new(items, total.unsigned_abs(), page))
        })
    }

    async fn organization(&self, id: OrganizationId) -> Result<Option<Organization>, StoreError> {
        let id = DbUuid(id.as_uuid());
        in_read!(self, async |conn: &mut Conn| {
            // One statement, whose counts are subqueries on the same id: `with_counts`' grouped
            // `IN (...)` queries are built afresh for every list, which SQLite then prepares
            // again on every call.
            let members = memberships::table
                .filter(memberships::organization_id.eq(id))
                .count()
                .single_value();
            let applications = applications::table
                .filter(applications::organization_id.eq(id))
                .count()
                .single_value();
            organizations::table
                .filter(organizations::id.eq(id))
                .filter(organizations::is_active.eq(true))
                .select((OrganizationRow::as_select(), members, applications))
                .get_result::<(OrganizationRow, Option<i64>, Option<i64>)>(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(|(row, members, applications)| {
                    row.into_domain(count(members), count(applications))
                })
                .transpose()
        })
    }

    async fn update_organization(
        &self,
        id: OrganizationId,
        change: OrganizationChange,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let live = organizations::table
                .filter(organizations::id.eq(DbUuid(id.as_uuid())))
                .filter(organizations::is_active.eq(true));
            let updated = diesel::update(live)
                .set(OrganizationChangeset {
                    name: change.name.as_ref().map(AsRef::as_ref),
                    slug: change.slug.as_ref().map(AsRef::as_ref),
                    default_role: change.default_role.map(|role| role.role().as_str()),
                    allow_member_invite: change.allow_member_invite,
                    updated_at: at,
                })
                .execute(conn)
                .await?;
            if updated == 1 {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(updated == 1)
        })
    }

    async fn delete_organization(
        &self,
        id: OrganizationId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let org = DbUuid(id.as_uuid());
            let live = organizations::table
                .filter(organizations::id.eq(org))
                .filter(organizations::is_active.eq(true));
            let deleted = diesel::update(live)
                .set((
                    organizations::is_active.eq(false),
                    organizations::deleted_at.eq(Some(at)),
                    organizations::updated_at.eq(at),
                ))
                .execute(conn)
                .await?;
            if deleted == 1 {
                let apps = applications::table
                    .filter(applications::organization_id.eq(org))
                    .filter(applications::is_active.eq(true));
                diesel::update(apps)
                    .set((
                        applications::is_active.eq(false),
                        applications::updated_at.eq(at),
                    ))
                    .execute(conn)
                    .await?;
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(deleted == 1)
        })
    }

    async fn purge_organizations(
        &self,
        deleted_before: OffsetDateTime,
        limit: u32,
    ) -> Result<PurgedOrganizations, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let Some(org) = organizations::table
                .filter(organizations::is_active.eq(false))
                .filter(organizations::deleted_at.lt(deleted_before))
                .order((organizations::deleted_at.asc(), organizations::id.asc()))
                .select(organizations::id)
                .limit(1)
                .load::<DbUuid>(conn)
                .await?
                .pop()
            else {
                return Ok(PurgedOrganizations::default());
            };
            let mut left = i64::from(limit);
            let mut rows = 0;
            // What grows with the organization's use, a slice at a time, each from an index
            // that starts with its owner: its deliveries (by endpoint), its directory's users
            // (their emails and group memberships go with them) and groups, its memberships.
            let endpoints = webhook_endpoints::table
                .filter(webhook_endpoints::organization_id.eq(org))
                .select(webhook_endpoints::id);
            let deliveries: Vec<DbUuid> = webhook_deliveries::table
                .filter(webhook_deliveries::endpoint_id.eq_any(endpoints))
                .select(webhook_deliveries::id)
                .limit(left)
                .load(conn)
                .await?;
            let n = diesel::delete(
                webhook_deliveries::table.filter(webhook_deliveries::id.eq_any(deliveries)),
            )
            .execute(conn)
            .await?;
            (left, rows) = (left - n as i64, rows + n as u64);
            delete_some!(conn, scim_users, id, org, left, rows);
            delete_some!(conn, scim_groups, id, org, left, rows);
            delete_some!(conn, memberships, user_id, org, left, rows);
            // None of those left: the organization goes, and the rest (invitations, keys,
            // applications, settings, endpoints) with it by cascade.
            let organizations = if left > 0 {
                diesel::delete(organizations::table.find(org))
                    .execute(conn)
                    .await? as u64
            } else {
                0
            };
            Ok::<_, diesel::result::Error>(PurgedOrganizations {
                organizations,
                rows,
            })
        })
    }

    async fn set_plan(
        &self,
        id: OrganizationId,
        plan: Plan,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let live = organizations::table
                .filter(organizations::id.eq(DbUuid(id.as_uuid())))
                .filter(organizations::is_active.eq(true));
            let updated = diesel::update(live)
                .set((
                    organizations::plan.eq(plan.as_str()),
                    organizations::updated_at.eq(at),
                ))
                .execute(conn)
                .await?;
            if updated == 1 {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(updated == 1)
        })
    }
}
