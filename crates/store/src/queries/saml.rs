use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{OrganizationId, ReturnPath, SamlRequest, SamlRequestId},
    ports::{Provision, SamlSignIn, SamlSignInOutcome, SamlStore, StoreError},
};
use time::OffsetDateTime;

use super::{
    accounts::{insert_account_rows, reclaim, CreateError},
    audit::insert_audit,
    backend::{
        schema::{memberships, saml_assertions, saml_requests},
        Conn, Db, DbStore,
    },
    events::record_events,
    organizations::SLUG_RACE_RETRIES,
    rows::NewMembershipRow,
    sessions::open_session,
};
use crate::{corrupt, db_error, types::DbUuid, violates};

#[derive(Queryable, Selectable, Insertable)]
#[diesel(table_name = saml_requests, check_for_backend(Db), treat_none_as_default_value = false)]
struct RequestRow {
    id: String,
    organization_id: DbUuid,
    return_to: String,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
}

impl RequestRow {
    fn into_domain(self) -> Result<SamlRequest, StoreError> {
        Ok(SamlRequest {
            id: SamlRequestId::parse(&self.id).ok_or_else(|| corrupt("saml_requests.id"))?,
            organization_id: OrganizationId::from_uuid(self.organization_id.0),
            return_to: ReturnPath::parse(&self.return_to)
                .map_err(|_| corrupt("saml_requests.return_to"))?,
            created_at: self.created_at,
            expires_at: self.expires_at,
        })
    }
}

/// Why a sign-in's transaction rolled back.
#[derive(Debug, thiserror::Error)]
enum SignInError {
    #[error("the request is gone")]
    RequestGone,
    #[error("the assertion was seen before")]
    Replayed,
    #[error(transparent)]
    Account(#[from] CreateError),
}

impl From<diesel::result::Error> for SignInError {
    fn from(error: diesel::result::Error) -> Self {
        Self::Account(CreateError::Db(error))
    }
}

/// The sign-in's writes, in the caller's transaction.
async fn sign_in(conn: &mut Conn, sign_in: &SamlSignIn) -> Result<(), SignInError> {
    let organization = DbUuid(sign_in.organization_id.as_uuid());
    // The request answers once: whoever deletes it signs in.
    let taken = diesel::delete(
        saml_requests::table
            .filter(saml_requests::id.eq(sign_in.request_id.as_str()))
            .filter(saml_requests::organization_id.eq(organization))
            .filter(saml_requests::expires_at.gt(sign_in.at)),
    )
    .execute(conn)
    .await?;
    if taken == 0 {
        return Err(SignInError::RequestGone);
    }
    let remembered = diesel::insert_into(saml_assertions::table)
        .values((
            saml_assertions::organization_id.eq(organization),
            saml_assertions::assertion_id.eq(&sign_in.assertion_id),
            saml_assertions::expires_at.eq(sign_in.assertion_valid_until),
        ))
        .on_conflict_do_nothing()
        .execute(conn)
        .await?;
    if remembered == 0 {
        return Err(SignInError::Replayed);
    }
    if let Some(reclaiming) = &sign_in.reclaim {
        reclaim(conn, reclaiming, sign_in.at).await?;
    }
    let mut events = Vec::new();
    let role = match &sign_in.provision {
        Provision::Nothing => None,
        Provision::Member { role } => Some(*role),
        Provision::Account { account, role } => {
            events = insert_account_rows(conn, account).await?;
            Some(*role)
        }
    };
    if let Some(role) = role {
        // A membership that appeared meanwhile: the primary key refuses, and all rolls back.
        diesel::insert_into(memberships::table)
            .values(NewMembershipRow {
                organization_id: organization,
                user_id: DbUuid(sign_in.session.user_id.as_uuid()),
                role: role.as_str(),
                created_at: sign_in.at,
                updated_at: sign_in.at,
                invited_by: None,
                invited_at: None,
            })
            .execute(conn)
            .await?;
    }
    // Recorded once the user is a member, so that their user.* and auth.* events reach the
    // organization too.
    events.extend(sign_in.events.iter().cloned());
    record_events(conn, events).await?;
    for record in &sign_in.audit {
        insert_audit(conn, record.clone()).await?;
    }
    open_session(conn, &sign_in.session, sign_in.keep_at_most).await?;
    Ok(())
}

#[async_trait]
impl SamlStore for DbStore {
    async fn save_saml_request(&self, request: SamlRequest) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            // What expired before this request can never be used again.
            diesel::delete(
                saml_requests::table.filter(saml_requests::expires_at.le(request.created_at)),
            )
            .execute(conn)
            .await?;
            diesel::delete(
                saml_assertions::table.filter(saml_assertions::expires_at.le(request.created_at)),
            )
            .execute(conn)
            .await?;
            diesel::insert_into(saml_requests::table)
                .values(RequestRow {
                    id: request.id.as_str().to_owned(),
                    organization_id: DbUuid(request.organization_id.as_uuid()),
                    return_to: request.return_to.as_str().to_owned(),
                    created_at: request.created_at,
                    expires_at: request.expires_at,
                })
                .execute(conn)
                .await
                .map(drop)
        })
    }

    async fn saml_request(
        &self,
        organization_id: OrganizationId,
        id: &SamlRequestId,
        now: OffsetDateTime,
    ) -> Result<Option<SamlRequest>, StoreError> {
        let id = id.as_str().to_owned();
        in_read!(self, async |conn: &mut Conn| {
            saml_requests::table
                .filter(saml_requests::id.eq(id))
                .filter(saml_requests::organization_id.eq(DbUuid(organization_id.as_uuid())))
                .filter(saml_requests::expires_at.gt(now))
                .select(RequestRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)?
                .map(RequestRow::into_domain)
                .transpose()
        })
    }

    async fn saml_sign_in(&self, request: SamlSignIn) -> Result<SamlSignInOutcome, StoreError> {
        let pool = self.writer.clone();
        self.runtime
            .run(async move {
                let mut conn = pool.get().await.map_err(crate::pool_error)?;
                let mut attempt = 0;
                loop {
                    attempt += 1;
                    let result = write_tx!(&mut *conn, async |conn: &mut Conn| {
                        sign_in(conn, &request).await
                    })
                    .await;
                    return match result {
                        Ok(()) => Ok(SamlSignInOutcome::SignedIn),
                        Err(SignInError::RequestGone) => Ok(SamlSignInOutcome::RequestGone),
                        Err(SignInError::Replayed) => Ok(SamlSignInOutcome::Replayed),
                        Err(SignInError::Account(CreateError::EmailTaken)) => {
                            Err(StoreError::Conflict)
                        }
                        Err(SignInError::Account(CreateError::Db(e)))
                            if violates(&e, "organizations_slug_key")
                                && attempt < SLUG_RACE_RETRIES =>
                        {
                            continue
                        }
                        Err(SignInError::Account(CreateError::Db(e))) => Err(db_error(e)),
                    };
                }
            })
            .await
    }
}
