//! Verified domains: an organization's claims, pending until verified. The partial unique
//! index `organization_domains_verified_domain_key` keeps a domain verified by one
//! organization at most.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{AuditRecord, DomainId, EmailDomain, NewEvent, OrganizationDomain, OrganizationId},
    ports::{DomainStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{organization_domains, organizations},
        Conn, Db, DbStore,
    },
    events::record_events,
    policies::is_live,
};
use crate::{corrupt, db_error, types::DbUuid};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = organization_domains, check_for_backend(Db), treat_none_as_default_value = false)]
struct DomainRow {
    id: DbUuid,
    organization_id: DbUuid,
    domain: String,
    verification_value: String,
    verified_at: Option<OffsetDateTime>,
    created_at: OffsetDateTime,
}

impl DomainRow {
    fn of(domain: &OrganizationDomain) -> Self {
        Self {
            id: DbUuid(domain.id.as_uuid()),
            organization_id: DbUuid(domain.organization_id.as_uuid()),
            domain: domain.domain.as_str().to_owned(),
            verification_value: domain.verification_value.clone(),
            verified_at: domain.verified_at,
            created_at: domain.created_at,
        }
    }

    fn into_domain(self) -> Result<OrganizationDomain, StoreError> {
        Ok(OrganizationDomain {
            id: DomainId::from_uuid(self.id.0),
            organization_id: OrganizationId::from_uuid(self.organization_id.0),
            domain: EmailDomain::parse(&self.domain)
                .map_err(|_| corrupt("organization_domains.domain"))?,
            verification_value: self.verification_value,
            verified_at: self.verified_at,
            created_at: self.created_at,
        })
    }
}

/// The organization's domain `id`.
fn theirs(
    org: OrganizationId,
    id: DomainId,
) -> diesel::dsl::Filter<
    diesel::dsl::Filter<
        organization_domains::table,
        diesel::dsl::Eq<organization_domains::id, DbUuid>,
    >,
    diesel::dsl::Eq<organization_domains::organization_id, DbUuid>,
> {
    organization_domains::table
        .filter(organization_domains::id.eq(DbUuid(id.as_uuid())))
        .filter(organization_domains::organization_id.eq(DbUuid(org.as_uuid())))
}

#[async_trait]
impl DomainStore for DbStore {
    async fn domains(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<OrganizationDomain>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            organization_domains::table
                .filter(organization_domains::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .order((
                    organization_domains::created_at.asc(),
                    organization_domains::id.asc(),
                ))
                .select(DomainRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?
                .into_iter()
                .map(DomainRow::into_domain)
                .collect()
        })
    }

    async fn domain(
        &self,
        organization_id: OrganizationId,
        id: DomainId,
    ) -> Result<Option<OrganizationDomain>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            theirs(organization_id, id)
                .select(DomainRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(DomainRow::into_domain)
                .transpose()
        })
    }

    async fn add_domain(
        &self,
        domain: OrganizationDomain,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let row = DomainRow::of(&domain);
        in_write_tx!(self, async |conn: &mut Conn| {
            if !is_live(conn, row.organization_id).await? {
                return Ok(false);
            }
            diesel::insert_into(organization_domains::table)
                .values(&row)
                .execute(conn)
                .await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn verify_domain(
        &self,
        organization_id: OrganizationId,
        id: DomainId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let verified = diesel::update(
                theirs(organization_id, id).filter(organization_domains::verified_at.is_null()),
            )
            .set(organization_domains::verified_at.eq(at))
            .execute(conn)
            .await?;
            if verified == 1 {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(verified == 1)
        })
    }

    async fn remove_domain(
        &self,
        organization_id: OrganizationId,
        id: DomainId,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let removed = diesel::delete(theirs(organization_id, id))
                .execute(conn)
                .await?;
            if removed == 1 {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(removed == 1)
        })
    }

    async fn verifying_organization(
        &self,
        domain: &EmailDomain,
    ) -> Result<Option<OrganizationId>, StoreError> {
        let domain = domain.as_str().to_owned();
        in_read!(self, async |conn: &mut Conn| {
            organization_domains::table
                .inner_join(organizations::table)
                .filter(organization_domains::domain.eq(domain))
                .filter(organization_domains::verified_at.is_not_null())
                .filter(organizations::is_active.eq(true))
                .select(organization_domains::organization_id)
                .get_result::<DbUuid>(conn)
                .await
                .optional()
                .map_err(db_error)
                .map(|id| id.map(|id| OrganizationId::from_uuid(id.0)))
        })
    }
}
