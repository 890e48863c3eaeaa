//! Who owns an account an identity provider links: the owner of its address. An account whose
//! address was never verified may have been registered by someone else in advance (the
//! "classic-federated merge" pre-account takeover), so when an identity provider (SAML, any
//! later connection) or a directory (SCIM) that speaks for the address links it, the account
//! is reclaimed for the address's owner in the transaction of the link
//! ([`Reclaim`](crate::ports::Reclaim)). A verified account is linked as it is.

use crate::{
    model::{AuditRecord, User},
    ports::Reclaim,
};

/// The reclaim that linking `user` makes, with its `user.reclaimed` record: `None` when the
/// address was verified. The user is marked verified, as the link leaves them.
pub(crate) fn reclaiming(
    user: &mut User,
    audit: impl FnOnce(&User) -> AuditRecord,
) -> Option<Reclaim> {
    if user.email_verified {
        return None;
    }
    user.email_verified = true;
    Some(Reclaim {
        user_id: user.id,
        audit: audit(user),
    })
}
