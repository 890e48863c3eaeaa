//! What a write hands on in its transaction: a custom role held while it is given, and the SCIM
//! tokens that end with their maker's right. Kept apart from the modules that use them, which
//! use one another.

use diesel::{prelude::*, result::DatabaseErrorKind};
use diesel_async::RunQueryDsl;
use gatehouse_domain::{model::Role, ports::ScimTokenRevocation};

use super::{
    audit::insert_audit,
    backend::{
        schema::{organization_roles, scim_tokens},
        Conn,
    },
};
use crate::{refused, types::DbUuid};

/// Holds the role a stored name gives, for the caller's transaction, before it is given: a
/// custom role's row is locked (PostgreSQL; a SQLite write transaction holds the whole
/// database), so that a concurrent deletion waits and then counts the new holder, or, when the
/// deletion came first, the grant finds the role gone. `false` when the organization has no
/// such custom role (any more); a built-in role has no row and is always there.
pub(super) async fn hold_role(
    conn: &mut Conn,
    organization: DbUuid,
    name: &str,
) -> QueryResult<bool> {
    if name.parse::<Role>().is_ok() {
        return Ok(true);
    }
    let held = diesel::update(
        organization_roles::table
            .filter(organization_roles::organization_id.eq(organization))
            .filter(organization_roles::key.eq(name)),
    )
    .set(organization_roles::key.eq(organization_roles::key))
    .execute(conn)
    .await?;
    Ok(held == 1)
}

/// [`hold_role`], refusing the transaction (`StoreError::Gone` to the caller) when the role is gone.
pub(super) async fn give_role(
    conn: &mut Conn,
    organization: DbUuid,
    name: &str,
) -> QueryResult<()> {
    if hold_role(conn, organization, name).await? {
        Ok(())
    } else {
        Err(refused(
            DatabaseErrorKind::ForeignKeyViolation,
            "the custom role given was deleted meanwhile",
        ))
    }
}

/// Revokes (deletes) the SCIM tokens, each with its `scim_token.revoked` record, in the caller's
/// transaction; one revoked meanwhile is skipped with its record.
pub(super) async fn revoke_scim_tokens(
    conn: &mut Conn,
    revoked: &[ScimTokenRevocation],
) -> QueryResult<()> {
    for revocation in revoked {
        let deleted =
            diesel::delete(scim_tokens::table.find(DbUuid(revocation.token_id.as_uuid())))
                .execute(conn)
                .await?;
        if deleted == 1 {
            insert_audit(conn, revocation.audit.clone()).await?;
        }
    }
    Ok(())
}
