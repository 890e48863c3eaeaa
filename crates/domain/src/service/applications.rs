//! Applications: the OAuth clients of an organization. Reading needs `applications.read`
//! (every role); registering, changing, rotating the secret and deleting need
//! `applications.manage` (owner and admin). Every change records its `application.*` event in
//! the same transaction.

use super::payloads::Payload;
use time::OffsetDateTime;

use super::{payloads, Actor, Forbidden};
use crate::{
    model::{
        Application, ApplicationChange, ApplicationId, ApplicationName, AuditAction, AuditRecord,
        ClientId, NewApplication, NewEvent, Origin, Page, PageRequest, Permission, RedirectUris,
        SecretToken, TargetKind, TokenHash, TokenKind,
    },
    ports::{service_ports, StoreError},
};

/// Why an application use case failed.
#[derive(Debug, thiserror::Error)]
pub enum ApplicationError {
    /// The caller's role lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// No such application in the organization.
    #[error("application not found")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An application with its client secret, shown this once (on create and on rotation).
#[derive(Clone, Debug, PartialEq)]
pub struct ApplicationWithSecret {
    /// The application as stored.
    pub application: Application,
    /// Its client secret: shown in this response only, stored as its SHA-256.
    pub client_secret: SecretToken,
}

service_ports! {
    /// The ports [`ApplicationService`] uses.
    pub struct ApplicationPorts { applications: ApplicationStore, clock: Clock, random: Random }
}

/// Registers and manages an organization's OAuth applications (clients).
#[derive(Clone)]
pub struct ApplicationService {
    ports: ApplicationPorts,
}

impl ApplicationService {
    /// A service on these ports.
    pub fn new(ports: ApplicationPorts) -> Self {
        Self { ports }
    }

    fn event(&self, actor: &Actor, payload: impl Payload, at: OffsetDateTime) -> NewEvent {
        actor.event(self.ports.random.as_ref(), at, payload)
    }

    /// The audit record of a change to an application, by the actor.
    fn record(
        &self,
        actor: &Actor,
        action: AuditAction,
        id: ApplicationId,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> AuditRecord {
        actor
            .audit(self.ports.random.as_ref(), now, action, origin)
            .on(TargetKind::Application, id)
    }

    /// Registers an application (requiring PKCE of its authorization requests when
    /// `require_pkce`); the answer holds its client secret, shown once.
    pub async fn create(
        &self,
        actor: &Actor,
        name: ApplicationName,
        redirect_uris: RedirectUris,
        require_pkce: bool,
        origin: &Origin,
    ) -> Result<ApplicationWithSecret, ApplicationError> {
        actor.require(Permission::ApplicationsManage)?;
        let now = self.ports.clock.now();
        let application = Application {
            id: ApplicationId::from_uuid(self.ports.random.uuid()),
            organization_id: actor.organization_id(),
            name,
            client_id: ClientId::generate(self.ports.random.uuid()),
            redirect_uris,
            is_active: true,
            require_pkce,
            created_at: now,
            updated_at: now,
        };
        let client_secret = self.ports.random.secret(TokenKind::ClientSecret);
        let event = self.event(
            actor,
            payloads::ApplicationCreated(payloads::application(&application)),
            now,
        );
        let new = NewApplication {
            application: application.clone(),
            secret_hash: client_secret.hash(),
        };
        if !self
            .ports
            .applications
            .create_application(
                new,
                event,
                self.record(
                    actor,
                    AuditAction::ApplicationCreated,
                    application.id,
                    origin,
                    now,
                ),
            )
            .await?
        {
            // The organization was deleted under the request.
            return Err(ApplicationError::NotFound);
        }
        Ok(ApplicationWithSecret {
            application,
            client_secret,
        })
    }

    /// The organization's applications, newest first.
    pub async fn list(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> Result<Page<Application>, ApplicationError> {
        actor.require(Permission::ApplicationsRead)?;
        Ok(self
            .ports
            .applications
            .applications(actor.organization_id(), page)
            .await?)
    }

    /// One application of the organization.
    pub async fn get(
        &self,
        actor: &Actor,
        id: ApplicationId,
    ) -> Result<Application, ApplicationError> {
        actor.require(Permission::ApplicationsRead)?;
        self.ports
            .applications
            .application(actor.organization_id(), id)
            .await?
            .ok_or(ApplicationError::NotFound)
    }

    /// Applies the change; a change that changes nothing records no event.
    pub async fn update(
        &self,
        actor: &Actor,
        id: ApplicationId,
        change: ApplicationChange,
        origin: &Origin,
    ) -> Result<Application, ApplicationError> {
        actor.require(Permission::ApplicationsManage)?;
        let mut application = self.get(actor, id).await?;
        let changed = application.apply(change);
        if changed.is_empty() {
            return Ok(application);
        }
        let now = self.ports.clock.now();
        application.updated_at = now;
        let event = self.event(
            actor,
            payloads::ApplicationUpdated {
                application: payloads::application(&application),
                changed: &changed,
            },
            now,
        );
        let record = self.record(actor, AuditAction::ApplicationUpdated, id, origin, now);
        self.save(application, None, event, record).await
    }

    /// Replaces the client secret; the old one stops working at once.
    pub async fn rotate_secret(
        &self,
        actor: &Actor,
        id: ApplicationId,
        origin: &Origin,
    ) -> Result<ApplicationWithSecret, ApplicationError> {
        actor.require(Permission::ApplicationsManage)?;
        let mut application = self.get(actor, id).await?;
        let now = self.ports.clock.now();
        application.updated_at = now;
        let client_secret = self.ports.random.secret(TokenKind::ClientSecret);
        let event = self.event(
            actor,
            payloads::ApplicationUpdated {
                application: payloads::application(&application),
                changed: &["client_secret"],
            },
            now,
        );
        let record = self.record(
            actor,
            AuditAction::ApplicationSecretRotated,
            id,
            origin,
            now,
        );
        let application = self
            .save(application, Some(client_secret.hash()), event, record)
            .await?;
        Ok(ApplicationWithSecret {
            application,
            client_secret,
        })
    }

    async fn save(
        &self,
        application: Application,
        secret_hash: Option<TokenHash>,
        event: NewEvent,
        record: AuditRecord,
    ) -> Result<Application, ApplicationError> {
        if self
            .ports
            .applications
            .update_application(application.clone(), secret_hash, event, record)
            .await?
        {
            Ok(application)
        } else {
            Err(ApplicationError::NotFound)
        }
    }

    /// Deletes an application of the organization and records `application.deleted`.
    pub async fn delete(
        &self,
        actor: &Actor,
        id: ApplicationId,
        origin: &Origin,
    ) -> Result<(), ApplicationError> {
        actor.require(Permission::ApplicationsManage)?;
        let application = self.get(actor, id).await?;
        let now = self.ports.clock.now();
        let event = self.event(
            actor,
            payloads::ApplicationDeleted(payloads::application(&application)),
            now,
        );
        if self
            .ports
            .applications
            .delete_application(
                actor.organization_id(),
                id,
                event,
                self.record(actor, AuditAction::ApplicationDeleted, id, origin, now),
            )
            .await?
        {
            Ok(())
        } else {
            Err(ApplicationError::NotFound)
        }
    }
}
