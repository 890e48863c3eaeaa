//! Applications (OAuth clients): stored with their secret's hash and redirect URIs, every write
//! with its event in one transaction.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        Application, ApplicationId, ApplicationName, AuditRecord, ClientId, NewApplication,
        NewEvent, OrganizationId, Page, PageRequest, RedirectUri, RedirectUris, TokenHash,
    },
    ports::{ApplicationStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{schema::applications, Conn, Db, DbStore},
    events::record_events,
    policies::is_live,
};
use crate::{
    corrupt, db_error,
    types::{DbStrings, DbUuid},
};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = applications, check_for_backend(Db), treat_none_as_default_value = false)]
struct ApplicationRow {
    id: DbUuid,
    organization_id: DbUuid,
    name: String,
    client_id: String,
    client_secret_hash: String,
    redirect_uris: DbStrings,
    is_active: bool,
    require_pkce: bool,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl ApplicationRow {
    fn of(new: &NewApplication) -> Self {
        let app = &new.application;
        Self {
            id: DbUuid(app.id.as_uuid()),
            organization_id: DbUuid(app.organization_id.as_uuid()),
            name: app.name.as_str().to_owned(),
            client_id: app.client_id.as_str().to_owned(),
            client_secret_hash: new.secret_hash.as_hex().to_owned(),
            redirect_uris: uri_strings(&app.redirect_uris),
            is_active: app.is_active,
            require_pkce: app.require_pkce,
            created_at: app.created_at,
            updated_at: app.updated_at,
        }
    }

    fn into_domain(self) -> Result<(Application, TokenHash), StoreError> {
        let uris = self
            .redirect_uris
            .0
            .iter()
            .map(|uri| RedirectUri::parse(uri))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| corrupt("applications.redirect_uris"))?;
        let app = Application {
            id: ApplicationId::from_uuid(self.id.0),
            organization_id: OrganizationId::from_uuid(self.organization_id.0),
            name: ApplicationName::parse(&self.name).map_err(|_| corrupt("applications.name"))?,
            client_id: ClientId::parse(&self.client_id)
                .ok_or_else(|| corrupt("applications.client_id"))?,
            redirect_uris: RedirectUris::new(uris)
                .map_err(|_| corrupt("applications.redirect_uris"))?,
            is_active: self.is_active,
            require_pkce: self.require_pkce,
            created_at: self.created_at,
            updated_at: self.updated_at,
        };
        Ok((app, TokenHash::from_stored(self.client_secret_hash)))
    }
}

fn uri_strings(uris: &RedirectUris) -> DbStrings {
    DbStrings(uris.iter().map(|uri| uri.as_str().to_owned()).collect())
}

/// The organization's application `id`.
fn theirs(
    org: OrganizationId,
    id: ApplicationId,
) -> diesel::dsl::Filter<
    diesel::dsl::Filter<applications::table, diesel::dsl::Eq<applications::id, DbUuid>>,
    diesel::dsl::Eq<applications::organization_id, DbUuid>,
> {
    applications::table
        .filter(applications::id.eq(DbUuid(id.as_uuid())))
        .filter(applications::organization_id.eq(DbUuid(org.as_uuid())))
}

#[async_trait]
impl ApplicationStore for DbStore {
    async fn create_application(
        &self,
        new: NewApplication,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let row = ApplicationRow::of(&new);
            if !is_live(conn, row.organization_id).await? {
                return Ok(false);
            }
            diesel::insert_into(applications::table)
                .values(row)
                .execute(conn)
                .await?;
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn applications(
        &self,
        organization_id: OrganizationId,
        page: PageRequest,
    ) -> Result<Page<Application>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let org = DbUuid(organization_id.as_uuid());
            let total: i64 = applications::table
                .filter(applications::organization_id.eq(org))
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<ApplicationRow> = page_rows!(
                conn,
                page,
                total,
                applications::table
                    .filter(applications::organization_id.eq(org))
                    .into_boxed()
                    .select(ApplicationRow::as_select()),
                desc / asc(applications::created_at, applications::id)
            );
            let items = rows
                .into_iter()
                .map(|row| row.into_domain().map(|(app, _)| app))
                .collect::<Result<_, _>>()?;
            Ok(Page::new(items, total.unsigned_abs(), page))
        })
    }

    async fn application(
        &self,
        organization_id: OrganizationId,
        id: ApplicationId,
    ) -> Result<Option<Application>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            theirs(organization_id, id)
                .select(ApplicationRow::as_select())
                .get_result::<ApplicationRow>(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(|row| row.into_domain().map(|(app, _)| app))
                .transpose()
        })
    }

    async fn update_application(
        &self,
        application: Application,
        secret_hash: Option<TokenHash>,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let this = theirs(application.organization_id, application.id);
            let updated = diesel::update(this)
                .set((
                    applications::name.eq(application.name.as_str()),
                    applications::redirect_uris.eq(uri_strings(&application.redirect_uris)),
                    applications::is_active.eq(application.is_active),
                    applications::require_pkce.eq(application.require_pkce),
                    applications::updated_at.eq(application.updated_at),
                ))
                .execute(conn)
                .await?;
            if updated == 0 {
                return Ok(false);
            }
            if let Some(hash) = &secret_hash {
                diesel::update(theirs(application.organization_id, application.id))
                    .set(applications::client_secret_hash.eq(hash.as_hex()))
                    .execute(conn)
                    .await?;
            }
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn delete_application(
        &self,
        organization_id: OrganizationId,
        id: ApplicationId,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let deleted = diesel::delete(theirs(organization_id, id))
                .execute(conn)
                .await?;
            if deleted == 1 {
                record_events(conn, vec![event]).await?;
                insert_audit(conn, audit).await?;
            }
            Ok::<_, diesel::result::Error>(deleted == 1)
        })
    }

    async fn application_by_client_id(
        &self,
        client_id: &ClientId,
    ) -> Result<Option<(Application, TokenHash)>, StoreError> {
        let client_id = client_id.clone();
        in_read!(self, async |conn: &mut Conn| {
            applications::table
                .filter(applications::client_id.eq(client_id.as_str()))
                .select(ApplicationRow::as_select())
                .get_result::<ApplicationRow>(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(ApplicationRow::into_domain)
                .transpose()
        })
    }
}
