use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{AuditRecord, Email, NewEvent, OrganizationId, OrganizationPolicies, Plan, UserId},
    ports::{PlanPolicies, PolicyStore, SavedPolicies, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{invitations, memberships, organization_policies, organizations},
        Conn, DbStore,
    },
    events::record_events,
};
use crate::{corrupt, db_error, types::DbUuid};

/// An organization's one JSON document in `$table` (`organization_policies`,
/// `organization_branding`): read as `Option<(document, updated_at)>`.
macro_rules! read_document {
    ($store:expr, $table:ident, $id:expr) => {{
        in_read!($store, async |conn: &mut Conn| {
            $table::table
                .find(DbUuid($id.as_uuid()))
                .select(($table::document, $table::updated_at))
                .get_result::<(serde_json::Value, OffsetDateTime)>(conn)
                .await
                .optional()
                .map_err(db_error)
        })
    }};
}

/// Replaces the document of a live organization and records the event, in one transaction:
/// `Ok(false)` when the organization is not live.
macro_rules! save_document {
    ($store:expr, $table:ident, $id:expr, $value:expr, $at:expr, $event:expr, $audit:expr) => {{
        let doc = serde_json::to_value(&$value).map_err(|e| StoreError::Failed(Box::new(e)))?;
        let (id, at, event, audit) = (DbUuid($id.as_uuid()), $at, $event, $audit);
        in_write_tx!($store, async |conn: &mut Conn| {
            if !is_live(conn, id).await? {
                return Ok(false);
            }
            diesel::insert_into($table::table)
                .values((
                    $table::organization_id.eq(id),
                    $table::document.eq(&doc),
                    $table::updated_at.eq(at),
                ))
                .on_conflict($table::organization_id)
                .do_update()
                .set(($table::document.eq(&doc), $table::updated_at.eq(at)))
                .execute(conn)
                .await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }};
}
pub(super) use {read_document, save_document};

/// A stored document back into the domain type, through its parsers.
pub(super) fn document<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
    what: &'static str,
) -> Result<T, StoreError> {
    serde_json::from_value(value).map_err(|_| corrupt(what))
}

/// A row of `organization_policies`: the document, when it was saved, since when MFA has
/// been required.
pub(super) type PoliciesRow = (serde_json::Value, OffsetDateTime, Option<OffsetDateTime>);

/// The saved policies of a row.
pub(super) fn saved_policies(
    (doc, updated_at, mfa_required_since): PoliciesRow,
) -> Result<SavedPolicies, StoreError> {
    Ok(SavedPolicies {
        policies: document(doc, "organization_policies.document")?,
        updated_at,
        mfa_required_since,
    })
}

/// Whether the organization is live: configuration is saved only for live organizations.
pub(super) async fn is_live(conn: &mut Conn, id: DbUuid) -> QueryResult<bool> {
    let live: i64 = organizations::table
        .filter(organizations::id.eq(id))
        .filter(organizations::is_active.eq(true))
        .count()
        .get_result(conn)
        .await?;
    Ok(live > 0)
}

/// The plans and saved policies of the live organizations among `$organization_ids` (a
/// subquery of ids).
macro_rules! plan_policies_of {
    ($store:expr, $organization_ids:expr) => {{
        in_read!($store, async |conn: &mut Conn| {
            let rows: Vec<(String, Option<serde_json::Value>)> = organizations::table
                .left_join(organization_policies::table)
                .filter(organizations::id.eq_any($organization_ids))
                .filter(organizations::is_active.eq(true))
                .select((
                    organizations::plan,
                    organization_policies::document.nullable(),
                ))
                .load(conn)
                .await
                .map_err(db_error)?;
            rows.into_iter()
                .map(|(plan, policies)| plan_policies(plan, policies))
                .collect()
        })
    }};
}

/// An organization's plan and policies as `organizations.plan` and
/// `organization_policies.document` hold them.
pub(super) fn plan_policies(
    plan: String,
    policies: Option<serde_json::Value>,
) -> Result<PlanPolicies, StoreError> {
    let plan = plan
        .parse::<Plan>()
        .map_err(|_| corrupt("organizations.plan"))?;
    let policies = policies
        .map(|doc| document::<OrganizationPolicies>(doc, "organization_policies.document"))
        .transpose()?;
    Ok((plan, policies))
}

#[async_trait]
impl PolicyStore for DbStore {
    async fn policies(&self, id: OrganizationId) -> Result<Option<SavedPolicies>, StoreError> {
        let row: Option<PoliciesRow> = in_read!(self, async |conn: &mut Conn| {
            organization_policies::table
                .find(DbUuid(id.as_uuid()))
                .select((
                    organization_policies::document,
                    organization_policies::updated_at,
                    organization_policies::mfa_required_since,
                ))
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)
        })?;
        row.map(saved_policies).transpose()
    }

    async fn save_policies(
        &self,
        id: OrganizationId,
        policies: OrganizationPolicies,
        mfa_required_since: Option<OffsetDateTime>,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let doc = serde_json::to_value(&policies).map_err(|e| StoreError::Failed(Box::new(e)))?;
        let id = DbUuid(id.as_uuid());
        in_write_tx!(self, async |conn: &mut Conn| {
            if !is_live(conn, id).await? {
                return Ok(false);
            }
            let values = (
                organization_policies::document.eq(&doc),
                organization_policies::updated_at.eq(at),
                organization_policies::mfa_required_since.eq(mfa_required_since),
            );
            diesel::insert_into(organization_policies::table)
                .values((organization_policies::organization_id.eq(id), values))
                .on_conflict(organization_policies::organization_id)
                .do_update()
                .set(values)
                .execute(conn)
                .await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn policies_of_member(&self, user_id: UserId) -> Result<Vec<PlanPolicies>, StoreError> {
        plan_policies_of!(
            self,
            memberships::table
                .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
                .select(memberships::organization_id)
        )
    }

    async fn policies_of_invitee(
        &self,
        email: &Email,
        now: OffsetDateTime,
    ) -> Result<Vec<PlanPolicies>, StoreError> {
        let email = email.clone();
        plan_policies_of!(
            self,
            invitations::table
                .filter(invitations::email.eq(email.as_ref()))
                .filter(invitations::accepted_at.is_null())
                .filter(invitations::revoked_at.is_null())
                .filter(invitations::expires_at.gt(now))
                .select(invitations::organization_id)
        )
    }
}
