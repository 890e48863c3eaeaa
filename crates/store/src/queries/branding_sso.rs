use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        AuditRecord, Branding, DomainWhitelist, EmailDomain, IdpCertificate, IdpEntityId,
        IdpSsoUrl, NewEvent, OrganizationId, SsoConfiguration,
    },
    ports::{BrandingStore, SavedBranding, SsoStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{organization_branding, organizations, sso_configurations, sso_domains},
        Conn, Db, DbStore,
    },
    events::record_events,
    policies::{document, is_live, read_document, save_document},
};
use crate::{
    corrupt, db_error,
    types::{DbStrings, DbUuid},
};

#[async_trait]
impl BrandingStore for DbStore {
    async fn branding(&self, id: OrganizationId) -> Result<Option<SavedBranding>, StoreError> {
        read_document!(self, organization_branding, id)?
            .map(|(doc, updated_at)| {
                Ok(SavedBranding {
                    branding: document(doc, "organization_branding.document")?,
                    updated_at,
                })
            })
            .transpose()
    }

    async fn save_branding(
        &self,
        id: OrganizationId,
        branding: Branding,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        save_document!(self, organization_branding, id, branding, at, event, audit)
    }
}

#[derive(Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = sso_configurations, check_for_backend(Db), treat_none_as_default_value = false)]
struct SsoRow {
    organization_id: DbUuid,
    provider: String,
    idp_entity_id: String,
    idp_sso_url: String,
    idp_certificate: String,
    domain_whitelist: DbStrings,
    auto_provision: bool,
    default_role: String,
    is_active: bool,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl SsoRow {
    fn of(config: &SsoConfiguration) -> Self {
        Self {
            organization_id: DbUuid(config.organization_id.as_uuid()),
            provider: config.provider.as_str().to_owned(),
            idp_entity_id: config.idp_entity_id.as_str().to_owned(),
            idp_sso_url: config.idp_sso_url.as_str().to_owned(),
            idp_certificate: config.idp_certificate.pem().to_owned(),
            domain_whitelist: DbStrings(
                config
                    .domain_whitelist
                    .as_slice()
                    .iter()
                    .map(|d| d.as_str().to_owned())
                    .collect(),
            ),
            auto_provision: config.auto_provision,
            default_role: config.default_role.as_str().to_owned(),
            is_active: config.is_active,
            created_at: config.created_at,
            updated_at: config.updated_at,
        }
    }

    fn into_domain(self) -> Result<SsoConfiguration, StoreError> {
        Ok(SsoConfiguration {
            organization_id: self.organization_id.0.into(),
            provider: self
                .provider
                .parse()
                .map_err(|_| corrupt("sso_configurations.provider"))?,
            idp_entity_id: IdpEntityId::parse(&self.idp_entity_id)
                .map_err(|_| corrupt("sso_configurations.idp_entity_id"))?,
            idp_sso_url: IdpSsoUrl::parse(&self.idp_sso_url)
                .map_err(|_| corrupt("sso_configurations.idp_sso_url"))?,
            // An expired certificate still loads: expiry is checked when one is saved.
            idp_certificate: IdpCertificate::from_stored(&self.idp_certificate)
                .map_err(|_| corrupt("sso_configurations.idp_certificate"))?,
            domain_whitelist: DomainWhitelist::parse(self.domain_whitelist.0)
                .map_err(|_| corrupt("sso_configurations.domain_whitelist"))?,
            auto_provision: self.auto_provision,
            default_role: self
                .default_role
                .parse()
                .map_err(|_| corrupt("sso_configurations.default_role"))?,
            is_active: self.is_active,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[async_trait]
impl SsoStore for DbStore {
    async fn sso_configuration(
        &self,
        id: OrganizationId,
    ) -> Result<Option<SsoConfiguration>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            sso_configurations::table
                .find(DbUuid(id.as_uuid()))
                .select(SsoRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(SsoRow::into_domain)
                .transpose()
        })
    }

    async fn create_sso_configuration(
        &self,
        configuration: SsoConfiguration,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        self.write_sso(configuration, event, audit, Write::Create)
            .await
    }

    async fn update_sso_configuration(
        &self,
        configuration: SsoConfiguration,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        self.write_sso(configuration, event, audit, Write::Update)
            .await
    }

    async fn sso_configurations_for_domain(
        &self,
        domain: &EmailDomain,
    ) -> Result<Vec<SsoConfiguration>, StoreError> {
        let domain = domain.as_str().to_owned();
        in_read!(self, async |conn: &mut Conn| {
            let live = organizations::table
                .filter(organizations::is_active.eq(true))
                .select(organizations::id);
            sso_configurations::table
                .inner_join(sso_domains::table)
                .filter(sso_domains::domain.eq(domain))
                .filter(sso_configurations::is_active.eq(true))
                .filter(sso_configurations::organization_id.eq_any(live))
                .order((
                    sso_configurations::created_at.asc(),
                    sso_configurations::organization_id.asc(),
                ))
                .limit(10)
                .select(SsoRow::as_select())
                .load(conn)
                .await
                .map_err(db_error)?
                .into_iter()
                .map(SsoRow::into_domain)
                .collect()
        })
    }
}

/// Keeps `sso_domains` (what home realm discovery reads) equal to the configuration's
/// whitelist.
async fn write_domains(conn: &mut Conn, row: &SsoRow) -> QueryResult<()> {
    diesel::delete(sso_domains::table.filter(sso_domains::organization_id.eq(row.organization_id)))
        .execute(conn)
        .await?;
    let mut domains: Vec<&str> = row.domain_whitelist.0.iter().map(String::as_str).collect();
    domains.sort_unstable();
    domains.dedup();
    // At most 100 (the whitelist's bound), one statement each: SQLite takes no batch insert
    // of these.
    for domain in domains {
        diesel::insert_into(sso_domains::table)
            .values((
                sso_domains::organization_id.eq(row.organization_id),
                sso_domains::domain.eq(domain),
            ))
            .execute(conn)
            .await?;
    }
    Ok(())
}

enum Write {
    Create,
    Update,
}

impl DbStore {
    /// Inserts or replaces the configuration of a live organization with its event, in one
    /// transaction. False when the organization is not live, or (update) has none.
    async fn write_sso(
        &self,
        configuration: SsoConfiguration,
        event: NewEvent,
        audit: AuditRecord,
        write: Write,
    ) -> Result<bool, StoreError> {
        let row = SsoRow::of(&configuration);
        in_write_tx!(self, async |conn: &mut Conn| {
            if !is_live(conn, row.organization_id).await? {
                return Ok(false);
            }
            let written = match write {
                Write::Create => {
                    diesel::insert_into(sso_configurations::table)
                        .values(&row)
                        .execute(conn)
                        .await?
                }
                Write::Update => {
                    diesel::update(sso_configurations::table.find(row.organization_id))
                        .set(&row)
                        .execute(conn)
                        .await?
                }
            };
            if written == 1 {
                write_domains(conn, &row).await?;
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(written == 1)
        })
    }
}
