//! A SCIM token ends with its maker's right (issue 49): a write that ends the maker's
//! membership, or leaves them a role without `sso.manage`, revokes the tokens they made in that
//! organization in its own transaction, each with a `scim_token.revoked` record by the system.
//! The check at use (`Authenticator::authenticate_scim_token`) stays: it refuses a token made
//! while the right was being taken.

use time::OffsetDateTime;

use super::audit;
use crate::{
    model::{
        AssignedRole, AuditAction, AuditActor, OrganizationId, Origin, Permission, ScimToken,
        TargetKind, UserId,
    },
    ports::{DirectoryStore, Random, ScimTokenRevocation, StoreError},
};

/// Whether a maker left with `role` (`None`: no longer a member) keeps their SCIM tokens.
pub(crate) fn keeps_scim_tokens(role: Option<&AssignedRole>) -> bool {
    role.is_some_and(|role| role.grants(Permission::SsoManage))
}

/// The revocations of the tokens among `tokens` that `makers` made, each with its record.
pub(crate) fn revoking(
    random: &dyn Random,
    tokens: &[ScimToken],
    makers: &[UserId],
    at: OffsetDateTime,
    origin: &Origin,
) -> Vec<ScimTokenRevocation> {
    tokens
        .iter()
        .filter(|token| makers.contains(&token.created_by))
        .map(|token| ScimTokenRevocation {
            token_id: token.id,
            audit: audit(
                random,
                at,
                AuditActor::System,
                AuditAction::ScimTokenRevoked,
                origin,
            )
            .in_organization(token.organization_id)
            .on(TargetKind::ScimToken, token.id),
        })
        .collect()
}

/// The revocations a write that leaves `maker` with `role` (`None`: ends their membership)
/// makes: none while the role still grants `sso.manage`.
pub(crate) async fn ending_with(
    directory: &dyn DirectoryStore,
    random: &dyn Random,
    organization_id: OrganizationId,
    maker: UserId,
    role: Option<&AssignedRole>,
    at: OffsetDateTime,
    origin: &Origin,
) -> Result<Vec<ScimTokenRevocation>, StoreError> {
    if keeps_scim_tokens(role) {
        return Ok(Vec::new());
    }
    let tokens = directory.scim_tokens(organization_id).await?;
    Ok(revoking(random, &tokens, &[maker], at, origin))
}
