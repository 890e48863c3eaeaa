use async_trait::async_trait;
use diesel::prelude::*;
use diesel_async::RunQueryDsl;
use gatehouse_domain::{
    model::{AccountToken, AccountTokenPurpose, AuditRecord, Email, TokenHash, UserId},
    ports::{AccountTokenStore, SealedMail, StoreError},
};
use time::OffsetDateTime;

use super::{
    audit::insert_audit,
    backend::{schema::account_tokens, Conn, Db, DbStore},
    mail::queue_mail,
};
use crate::{corrupt, db_error, types::DbUuid};

#[derive(Queryable, Selectable)]
#[diesel(table_name = account_tokens, check_for_backend(Db))]
struct TokenRow {
    purpose: String,
    user_id: DbUuid,
    email: String,
    created_at: OffsetDateTime,
    expires_at: OffsetDateTime,
}

impl TokenRow {
    fn into_domain(self) -> Result<AccountToken, StoreError> {
        Ok(AccountToken {
            purpose: AccountTokenPurpose::parse(&self.purpose)
                .ok_or_else(|| corrupt("account_tokens.purpose"))?,
            user_id: UserId::from_uuid(self.user_id.0),
            email: Email::parse(&self.email).map_err(|_| corrupt("account_tokens.email"))?,
            created_at: self.created_at,
            expires_at: self.expires_at,
        })
    }
}

/// The token with this hash, when it is of the purpose, unused and unexpired at `now`.
macro_rules! usable {
    ($hash:expr, $purpose:expr, $now:expr) => {
        account_tokens::table
            .filter(account_tokens::token_hash.eq($hash))
            .filter(account_tokens::purpose.eq($purpose.as_str()))
            .filter(account_tokens::used_at.is_null())
            .filter(account_tokens::expires_at.gt($now))
    };
}

#[async_trait]
impl AccountTokenStore for DbStore {
    async fn save_account_token(
        &self,
        hash: TokenHash,
        token: AccountToken,
        audit: AuditRecord,
        mail: SealedMail,
    ) -> Result<(), StoreError> {
        in_write_tx!(self, async |conn: &mut Conn| {
            // Tokens that can no longer work are forgotten.
            diesel::delete(
                account_tokens::table.filter(account_tokens::expires_at.le(token.created_at)),
            )
            .execute(conn)
            .await?;
            diesel::insert_into(account_tokens::table)
                .values((
                    account_tokens::token_hash.eq(hash.as_hex()),
                    account_tokens::purpose.eq(token.purpose.as_str()),
                    account_tokens::user_id.eq(DbUuid(token.user_id.as_uuid())),
                    account_tokens::email.eq(token.email.as_ref()),
                    account_tokens::created_at.eq(token.created_at),
                    account_tokens::expires_at.eq(token.expires_at),
                ))
                .execute(conn)
                .await?;
            queue_mail(conn, &[mail], token.created_at).await?;
            insert_audit(conn, audit).await
        })
    }

    async fn account_token(
        &self,
        hash: &TokenHash,
        purpose: AccountTokenPurpose,
        now: OffsetDateTime,
    ) -> Result<Option<AccountToken>, StoreError> {
        let hash = hash.as_hex().to_owned();
        let row: Option<TokenRow> = in_read!(self, async |conn: &mut Conn| {
            usable!(hash, purpose, now)
                .select(TokenRow::as_select())
                .get_result(conn)
                .await
                .optional()
                .map_err(db_error)
        })?;
        row.map(TokenRow::into_domain).transpose()
    }

    async fn take_account_token(
        &self,
        hash: &TokenHash,
        purpose: AccountTokenPurpose,
        now: OffsetDateTime,
    ) -> Result<Option<AccountToken>, StoreError> {
        let hash = hash.as_hex().to_owned();
        let row: Option<TokenRow> = in_write_tx!(self, async |conn: &mut Conn| {
            diesel::update(usable!(hash, purpose, now))
                .set(account_tokens::used_at.eq(Some(now)))
                .returning(TokenRow::as_returning())
                .get_result(conn)
                .await
                .optional()
        })?;
        row.map(TokenRow::into_domain).transpose()
    }
}
