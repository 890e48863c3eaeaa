use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{Email, Membership, OrganizationId, Plan, SessionId, UserId},
    ports::{MembershipStore, SessionAccess, StoreError},
};
use time::OffsetDateTime;

use super::{
    backend::{
        schema::{
            memberships, organization_policies, organizations, sessions, sso_configurations, users,
        },
        Conn, DbStore,
    },
    custom_roles::CustomRoles,
    policies::{saved_policies, PoliciesRow},
    rows::MembershipRow,
};
use crate::{corrupt, db_error, types::DbUuid};

/// A [`MembershipRow`]: the membership and its organization's plan.
pub(super) const MEMBERSHIP_COLUMNS: (
    memberships::organization_id,
    memberships::user_id,
    memberships::role,
    organizations::plan,
    memberships::created_at,
) = (
    memberships::organization_id,
    memberships::user_id,
    memberships::role,
    organizations::plan,
    memberships::created_at,
);

#[async_trait]
impl MembershipStore for DbStore {
    async fn membership(
        &self,
        user_id: UserId,
        organization_id: OrganizationId,
    ) -> Result<Option<Membership>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let Some(row) = memberships::table
                .inner_join(organizations::table)
                .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
                .filter(memberships::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(organizations::is_active.eq(true))
                .select(MEMBERSHIP_COLUMNS)
                .get_result::<MembershipRow>(conn)
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

    async fn session_access(
        &self,
        session_id: SessionId,
        user_id: UserId,
        organization_id: OrganizationId,
        now: OffsetDateTime,
    ) -> Result<SessionAccess, StoreError> {
        let session = DbUuid(session_id.as_uuid());
        let live = move || {
            diesel::dsl::exists(
                sessions::table
                    .filter(sessions::id.eq(session))
                    .filter(sessions::revoked_at.is_null())
                    .filter(sessions::expires_at.gt(now)),
            )
        };
        in_read!(self, async |conn: &mut Conn| {
            // A member: the membership, the policies, the session and whether the
            // organization's single sign-on is on, in one statement.
            let member = memberships::table
                .inner_join(
                    organizations::table
                        .left_join(organization_policies::table)
                        .left_join(sso_configurations::table),
                )
                .filter(memberships::user_id.eq(DbUuid(user_id.as_uuid())))
                .filter(memberships::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(organizations::is_active.eq(true))
                .select((
                    MEMBERSHIP_COLUMNS,
                    (
                        organization_policies::document,
                        organization_policies::updated_at,
                        organization_policies::mfa_required_since,
                    )
                        .nullable(),
                    live(),
                    sessions::table
                        .filter(sessions::id.eq(session))
                        .select(sessions::sso_organization_id)
                        .single_value(),
                    sso_configurations::is_active.nullable(),
                ))
                .get_result::<(
                    MembershipRow,
                    Option<PoliciesRow>,
                    bool,
                    Option<DbUuid>,
                    Option<bool>,
                )>(conn)
                .await
                .optional()
                .map_err(db_error)?;
            match member {
                Some((membership, policies, session_live, sso_organization, sso_on)) => {
                    // The address, only where the organization's single sign-on is on: the
                    // domain then asks whether it claims the address (a second read, for
                    // those organizations alone).
                    let sso_email = match sso_on {
                        Some(true) => {
                            let email: String = users::table
                                .find(DbUuid(user_id.as_uuid()))
                                .select(users::email)
                                .get_result(conn)
                                .await
                                .map_err(db_error)?;
                            Some(Email::parse(&email).map_err(|_| corrupt("users.email"))?)
                        }
                        _ => None,
                    };
                    Ok(SessionAccess {
                        session_live,
                        membership: Some({
                            let roles = CustomRoles::of(
                                conn,
                                [(membership.organization_id, membership.role.as_str())],
                            )
                            .await?;
                            membership.into_domain(&roles)?
                        }),
                        policies: policies.map(saved_policies).transpose()?,
                        sso_organization: sso_organization
                            .map(|id| OrganizationId::from_uuid(id.0)),
                        sso_email,
                    })
                }
                // Not a member: whether the session is live still decides between 401 and 404.
                None => Ok(SessionAccess {
                    session_live: diesel::select(live())
                        .get_result(conn)
                        .await
                        .map_err(db_error)?,
                    membership: None,
                    policies: None,
                    sso_organization: None,
                    sso_email: None,
                }),
            }
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
