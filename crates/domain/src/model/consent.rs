//! Consents: the API scopes a user let an application use, given on the hosted consent page
//! and remembered until the user takes them back.

use time::OffsetDateTime;

use super::{ApiScopes, ApplicationId, ApplicationName, ClientId, UserId};

/// A user's consent to the API scopes an application asked for, given on the hosted consent
/// page and remembered until the user takes it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Consent {
    /// Who consented.
    pub user_id: UserId,
    /// To which application.
    pub application_id: ApplicationId,
    /// The API scopes consented to (`org:read members:read`); other scopes need no consent.
    pub scopes: ApiScopes,
    /// When the consent was (last) given.
    pub granted_at: OffsetDateTime,
}

/// A consent as its user sees it in their account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantedConsent {
    /// The application's client id.
    pub client_id: ClientId,
    /// The application's name.
    pub application_name: ApplicationName,
    /// The API scopes consented to.
    pub scopes: ApiScopes,
    /// When the consent was (last) given.
    pub granted_at: OffsetDateTime,
}
