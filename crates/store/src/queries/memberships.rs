use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{Membership, OrganizationId, Plan, UserId},
    ports::{MembershipStore, StoreError},
};

use super::{
    super::{
        schema::{memberships, organizations},
        Conn, DbStore,
    },
    rows::MembershipRow,
};
use crate::{corrupt, db_error, types::DbUuid};

#[async_trait]
impl MembershipStore for DbStore {
    async fn membership(
        &self,
        user_id: UserId,
        organization_id: OrganizationId,
    ) -> Result<Option<Membership>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            memberships::table
                .inner_join(organizations::table)
                .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
                .filter(memberships::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(organizations::is_active.eq(true))
                .select((
                    memberships::organization_id,
                    memberships::user_id,
                    memberships::role,
                    organizations::plan,
                    memberships::created_at,
                ))
                .first::<MembershipRow>(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(MembershipRow::into_domain)
                .transpose()
        })
    }

    async fn highest_plan(&self, user_id: UserId) -> Result<Option<Plan>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let plans: Vec<String> = memberships::table
                .inner_join(organizations::table)
                .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
                .filter(organizations::is_active.eq(true))
                .select(organizations::plan)
                .distinct()
                .load(conn)
                .await
                .map_err(db_error)?;
            plans
                .iter()
                .map(|plan| {
                    plan.parse::<Plan>()
                        .map_err(|_| corrupt("organizations.plan"))
                })
                .try_fold(None, |best: Option<Plan>, plan| Ok(best.max(Some(plan?))))
        })
    }
}
