//! Authorization codes of the OAuth flow, kept as their SHA-256; redeeming one opens its
//! session in the same transaction. Users' consents to applications' API scopes.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{
        Amr, ApiScopes, ApplicationId, ApplicationName, AuditRecord, AuthorizationCode, ClientId,
        CodeChallenge, Consent, GrantedConsent, NewAuthorizationCode, NewEvent, NewSession, Nonce,
        Page, PageRequest, RedirectUri, Scope, StoredCode, TokenHash, UserId,
    },
    ports::{AuthorizationCodeStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{
        schema::{
            applications, oauth_authorization_codes as codes, oauth_consents,
            sessions as session_rows,
        },
        Conn, Db, DbStore,
    },
    events::record_events,
    sessions::open_session,
};
use crate::{corrupt, db_error, kept::kept, types::DbUuid};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = codes, check_for_backend(Db), treat_none_as_default_value = false)]
struct CodeRow {
    code_hash: String,
    application_id: DbUuid,
    user_id: DbUuid,
    redirect_uri: String,
    /// The S256 challenge; empty for a code issued without one (no challenge parses as empty).
    code_challenge: String,
    scope: String,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
    used_at: Option<OffsetDateTime>,
    session_id: Option<DbUuid>,
    amr: String,
    nonce: Option<String>,
    authenticated_at: Option<OffsetDateTime>,
}

impl CodeRow {
    fn into_domain(self) -> Result<StoredCode, StoreError> {
        Ok(StoredCode {
            code: AuthorizationCode {
                application_id: ApplicationId::from_uuid(self.application_id.0),
                user_id: UserId::from_uuid(self.user_id.0),
                redirect_uri: RedirectUri::parse(&self.redirect_uri)
                    .map_err(|_| corrupt("oauth_authorization_codes.redirect_uri"))?,
                challenge: (!self.code_challenge.is_empty())
                    .then(|| CodeChallenge::from_stored(self.code_challenge)),
                scope: Scope::parse(&self.scope)
                    .map_err(|_| corrupt("oauth_authorization_codes.scope"))?,
                amr: Amr::from_stored(&self.amr)
                    .ok_or_else(|| corrupt("oauth_authorization_codes.amr"))?,
                authenticated_at: self.authenticated_at.unwrap_or(self.created_at),
                nonce: self
                    .nonce
                    .map(|nonce| Nonce::parse(&nonce))
                    .transpose()
                    .map_err(|_| corrupt("oauth_authorization_codes.nonce"))?,
                created_at: self.created_at,
                expires_at: self.expires_at,
            },
            used_at: self.used_at,
            session_id: self.session_id.map(|id| id.0.into()),
        })
    }
}

#[async_trait]
impl AuthorizationCodeStore for DbStore {
    async fn save_authorization_code(
        &self,
        new: NewAuthorizationCode,
        audit: AuditRecord,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let code = &new.code;
            diesel::insert_into(codes::table)
                .values(CodeRow {
                    code_hash: new.hash.as_hex().to_owned(),
                    application_id: DbUuid(code.application_id.as_uuid()),
                    user_id: DbUuid(code.user_id.as_uuid()),
                    redirect_uri: code.redirect_uri.as_str().to_owned(),
                    code_challenge: code
                        .challenge
                        .as_ref()
                        .map(|challenge| challenge.as_str().to_owned())
                        .unwrap_or_default(),
                    scope: code.scope.to_string(),
                    created_at: code.created_at,
                    expires_at: code.expires_at,
                    used_at: None,
                    session_id: None,
                    amr: code.amr.stored(),
                    nonce: code.nonce.as_ref().map(|nonce| nonce.as_str().to_owned()),
                    authenticated_at: Some(code.authenticated_at),
                })
                .execute(conn)
                .await?;
            insert_audit(conn, audit).await
        })
    }

    async fn authorization_code(&self, hash: &TokenHash) -> Result<Option<StoredCode>, StoreError> {
        let hash = hash.clone();
        in_read!(self, async |conn: &mut Conn| {
            codes::table
                .find(hash.as_hex())
                .select(CodeRow::as_select())
                .get_result::<CodeRow>(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(CodeRow::into_domain)
                .transpose()
        })
    }

    async fn redeem_authorization_code(
        &self,
        hash: &TokenHash,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let hash = hash.as_hex().to_owned();
        in_write_tx!(self, async |conn: &mut Conn| {
            // Only an unused code is taken; a concurrent exchange of the same code takes nothing.
            // Kept prepared (one text), and loaded so that SQLite keeps it too.
            let taken: Vec<String> = kept(
                diesel::update(codes::table.find(&hash).filter(codes::used_at.is_null()))
                    .set((
                        codes::used_at.eq(Some(at)),
                        codes::session_id.eq(Some(DbUuid(session.id.as_uuid()))),
                    ))
                    .returning(codes::code_hash),
            )
            .load(conn)
            .await?;
            if taken.is_empty() {
                return Ok(false);
            }
            record_events(conn, vec![event]).await?;
            insert_audit(conn, audit).await?;
            open_session(conn, &session, keep_at_most).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }

    async fn consented_scopes(
        &self,
        user_id: UserId,
        application_id: ApplicationId,
    ) -> Result<ApiScopes, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let scope: Option<String> = oauth_consents::table
                .find((DbUuid(user_id.as_uuid()), DbUuid(application_id.as_uuid())))
                .select(oauth_consents::scope)
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?;
            scope.map_or(Ok(ApiScopes::default()), |scope| api_scopes(&scope))
        })
    }

    async fn save_consent(&self, consent: Consent, audit: AuditRecord) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            let row = ConsentRow {
                user_id: DbUuid(consent.user_id.as_uuid()),
                application_id: DbUuid(consent.application_id.as_uuid()),
                scope: consent.scopes.to_string(),
                granted_at: consent.granted_at,
            };
            diesel::insert_into(oauth_consents::table)
                .values(&row)
                .on_conflict((oauth_consents::user_id, oauth_consents::application_id))
                .do_update()
                .set((
                    oauth_consents::scope.eq(&row.scope),
                    oauth_consents::granted_at.eq(row.granted_at),
                ))
                .execute(conn)
                .await?;
            insert_audit(conn, audit).await
        })
    }

    async fn consents_of(
        &self,
        user_id: UserId,
        page: PageRequest,
    ) -> Result<Page<GrantedConsent>, StoreError> {
        in_read!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            let total: i64 = oauth_consents::table
                .filter(oauth_consents::user_id.eq(user))
                .count()
                .get_result(conn)
                .await
                .map_err(db_error)?;
            let rows: Vec<(String, String, String, OffsetDateTime)> = page_rows!(
                conn,
                page,
                total,
                oauth_consents::table
                    .inner_join(applications::table)
                    .filter(oauth_consents::user_id.eq(user))
                    .select((
                        applications::client_id,
                        applications::name,
                        oauth_consents::scope,
                        oauth_consents::granted_at,
                    ))
                    .into_boxed(),
                desc / asc(oauth_consents::granted_at, oauth_consents::application_id)
            );
            let consents = rows
                .into_iter()
                .map(|(client_id, name, scope, granted_at)| {
                    Ok(GrantedConsent {
                        client_id: ClientId::parse(&client_id)
                            .ok_or_else(|| corrupt("applications.client_id"))?,
                        application_name: ApplicationName::parse(&name)
                            .map_err(|_| corrupt("applications.name"))?,
                        scopes: api_scopes(&scope)?,
                        granted_at,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(Page::new(consents, u64::try_from(total).unwrap_or(0), page))
        })
    }

    async fn revoke_consent(
        &self,
        user_id: UserId,
        client_id: &ClientId,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError> {
        let client_id = client_id.as_str().to_owned();
        in_write_tx!(self, async |conn: &mut Conn| {
            let user = DbUuid(user_id.as_uuid());
            let application: Option<DbUuid> = applications::table
                .filter(applications::client_id.eq(&client_id))
                .select(applications::id)
                .get_result(conn)
                .await
                .optional()?;
            let Some(application) = application else {
                return Ok(false);
            };
            let forgotten = diesel::delete(oauth_consents::table.find((user, application)))
                .execute(conn)
                .await?;
            if forgotten == 0 {
                return Ok(false);
            }
            diesel::update(
                session_rows::table
                    .filter(session_rows::user_id.eq(user))
                    .filter(session_rows::application_id.eq(application))
                    .filter(session_rows::revoked_at.is_null()),
            )
            .set(session_rows::revoked_at.eq(at))
            .execute(conn)
            .await?;
            insert_audit(conn, audit).await?;
            Ok::<_, diesel::result::Error>(true)
        })
    }
}

#[derive(Insertable)]
#[diesel(table_name = oauth_consents, check_for_backend(Db), treat_none_as_default_value = false)]
struct ConsentRow {
    user_id: DbUuid,
    application_id: DbUuid,
    scope: String,
    granted_at: OffsetDateTime,
}

/// The API scopes a consent keeps, as written (space-separated API scopes only).
fn api_scopes(stored: &str) -> Result<ApiScopes, StoreError> {
    let scope = Scope::parse(stored).map_err(|_| corrupt("oauth_consents.scope"))?;
    Ok(ApiScopes::of(&scope))
}
