use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{Membership, OrganizationId, UserId},
    ports::{MembershipStore, StoreError},
};

use super::{
    super::{
        schema::{memberships, organizations},
        DbStore,
    },
    rows::MembershipRow,
};
use crate::{db_error, types::DbUuid};

#[async_trait]
impl MembershipStore for DbStore {
    async fn membership(
        &self,
        user_id: UserId,
        organization_id: OrganizationId,
    ) -> Result<Option<Membership>, StoreError> {
        let mut conn = self.conn().await?;
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
            ))
            .first::<MembershipRow>(&mut *conn)
            .await
            .optional()
            .map_err(db_error)?
            .map(MembershipRow::into_domain)
            .transpose()
    }
}
