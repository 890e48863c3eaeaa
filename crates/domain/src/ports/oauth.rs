//! OAuth applications, their authorization codes and users' consents.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreError;
use crate::model::{
    ApiScopes, Application, ApplicationId, AuditRecord, ClientId, Consent, GrantedConsent,
    NewApplication, NewAuthorizationCode, NewEvent, NewSession, OrganizationId, Page, PageRequest,
    StoredCode, TokenHash, UserId,
};

/// Applications (OAuth clients). Every read and write of an organization's applications takes
/// the organization id: tenancy is in the query.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait ApplicationStore: Send + Sync + 'static {
    /// Stores the application of a live organization and records the event, in one
    /// transaction. Returns false when the organization is not live.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the client id is taken (a collision of 128 random bits).
    async fn create_application(
        &self,
        new: NewApplication,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The organization's applications, newest first.
    async fn applications(
        &self,
        organization_id: OrganizationId,
        page: PageRequest,
    ) -> Result<Page<Application>, StoreError>;

    /// One of the organization's applications; `None` when it has no such application.
    async fn application(
        &self,
        organization_id: OrganizationId,
        id: ApplicationId,
    ) -> Result<Option<Application>, StoreError>;

    /// Saves the application's name, redirect URIs, active flag and `updated_at` as given, and
    /// the secret's hash when one is given, with the event, in one transaction. Returns false
    /// when the organization has no such application.
    async fn update_application(
        &self,
        application: Application,
        secret_hash: Option<TokenHash>,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Deletes the application and records the event. Returns false when the organization has
    /// no such application.
    async fn delete_application(
        &self,
        organization_id: OrganizationId,
        id: ApplicationId,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The application with this client id, in whichever organization, and its secret's hash:
    /// for the OAuth flow, which the client id alone identifies.
    async fn application_by_client_id(
        &self,
        client_id: &ClientId,
    ) -> Result<Option<(Application, TokenHash)>, StoreError>;
}

/// Authorization codes of the OAuth flow, and the consents users gave applications.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait AuthorizationCodeStore: Send + Sync + 'static {
    /// Stores a freshly issued code, unused, with the audit record of its issue.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a code with the same hash is stored already (a collision
    /// of random secrets).
    async fn save_authorization_code(
        &self,
        new: NewAuthorizationCode,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;

    /// The code with this hash, whether used or expired (the caller checks both: a code used
    /// twice ends the session its first use opened); `None` when no code has it.
    async fn authorization_code(&self, hash: &TokenHash) -> Result<Option<StoredCode>, StoreError>;

    /// Marks the code used at `at` by the session, and opens the session (recording its
    /// event; `keep_at_most` as for [`SessionStore::create_session`]) with the audit record of
    /// the exchange, in one transaction.
    /// Returns false, writing nothing, when the code was used already (by a concurrent
    /// exchange) or is gone.
    ///
    /// [`SessionStore::create_session`]: crate::ports::SessionStore::create_session
    async fn redeem_authorization_code(
        &self,
        hash: &TokenHash,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The API scopes the user consented to for the application; empty when none.
    async fn consented_scopes(
        &self,
        user_id: UserId,
        application_id: ApplicationId,
    ) -> Result<ApiScopes, StoreError>;

    /// Remembers the consent (replacing the user's earlier one for the application) with its
    /// audit record, in one transaction.
    async fn save_consent(&self, consent: Consent, audit: AuditRecord) -> Result<(), StoreError>;

    /// A page of the user's consents, newest first, with their applications' client ids and
    /// names.
    async fn consents_of(
        &self,
        user_id: UserId,
        page: PageRequest,
    ) -> Result<Page<GrantedConsent>, StoreError>;

    /// Forgets the user's consent to the application with this client id and ends the user's
    /// live sessions of that application at `at` (their tokens stop working at once), with the
    /// audit record, in one transaction. Returns false, writing nothing, when the user had no
    /// consent for it.
    async fn revoke_consent(
        &self,
        user_id: UserId,
        client_id: &ClientId,
        at: OffsetDateTime,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;
}
