//! API keys: created by a user for one organization, shown once, stored hashed.

use serde::Serialize;
use time::OffsetDateTime;

use super::{audit, Authenticator, Forbidden, OrgAccessError, Principal};
use crate::{
    model::{
        ApiKey, ApiKeyId, ApiKeyName, AuditAction, KeyHolder, NewApiKey, OrganizationId, Origin,
        Page, PageRequest, Permission, SecretToken, TargetKind, TokenKind,
        MAX_API_KEYS_PER_ORGANIZATION,
    },
    ports::{service_ports, StoreError},
};

/// The create response: the only time the key itself is shown.
#[derive(Clone, PartialEq, Serialize)]
pub struct CreatedApiKey {
    /// The key's id.
    pub id: ApiKeyId,
    /// The name its creator gave it.
    pub name: ApiKeyName,
    /// The key itself (`ghk_…`): shown in this response only, stored as its SHA-256.
    pub key: String,
    /// The key's first characters, shown in lists to recognize it.
    pub prefix: String,
    /// The one organization the key acts in.
    pub organization_id: OrganizationId,
    /// When it was created.
    #[serde(with = "crate::model::timestamp")]
    pub created_at: OffsetDateTime,
}

debug_showing!(CreatedApiKey { id, prefix });

impl CreatedApiKey {
    /// The key as stored, with its secret for this one response.
    pub(crate) fn shown_once(key: ApiKey, secret: &SecretToken) -> Self {
        Self {
            id: key.id,
            name: key.name,
            key: secret.expose().to_owned(),
            prefix: key.prefix,
            organization_id: key.organization_id,
            created_at: key.created_at,
        }
    }
}

/// Why an API key could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateApiKeyError {
    /// The caller is an API key: keys are managed with a user's access token only.
    #[error("API keys cannot manage API keys: use a user's access token")]
    NotAUser,
    /// The caller is not admitted into the organization: not a member, or its IP allowlist or
    /// MFA policy refuses them.
    #[error(transparent)]
    Organization(#[from] OrgAccessError),
    /// The caller's role may not create keys for the organization (a viewer only reads).
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The caller already holds [`MAX_API_KEYS_PER_ORGANIZATION`] keys in the organization.
    #[error("you already hold {MAX_API_KEYS_PER_ORGANIZATION} API keys in this organization, the most one user may; delete one first")]
    TooMany,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why an API key could not be deleted.
#[derive(Debug, thiserror::Error)]
pub enum DeleteApiKeyError {
    /// The caller is an API key: keys are managed with a user's access token only.
    #[error("API keys cannot manage API keys: use a user's access token")]
    NotAUser,
    /// No such key of the caller's.
    #[error("API key not found")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

service_ports! {
    /// The ports [`ApiKeyService`] uses.
    pub struct ApiKeyPorts { api_keys: ApiKeyStore, clock: Clock, random: Random }
}

/// Creates, lists and revokes a user's API keys.
#[derive(Clone)]
pub struct ApiKeyService {
    ports: ApiKeyPorts,
    /// The one admission, which creating a key for an organization makes.
    authenticator: Authenticator,
}

impl ApiKeyService {
    /// A service on these ports, admitting through `authenticator`.
    pub fn new(ports: ApiKeyPorts, authenticator: Authenticator) -> Self {
        Self {
            ports,
            authenticator,
        }
    }

    /// Creates a key for an organization the caller is admitted into, as every way into it
    /// admits (membership, IP allowlist, MFA policy, single sign-on: a key must not be a way
    /// around them), with
    /// a role that may ([`Permission::ApiKeysCreate`]: not a viewer); audited in the same
    /// transaction. At most [`MAX_API_KEYS_PER_ORGANIZATION`] per user and organization.
    pub async fn create(
        &self,
        principal: &Principal,
        name: ApiKeyName,
        organization_id: OrganizationId,
        origin: &Origin,
    ) -> Result<CreatedApiKey, CreateApiKeyError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(CreateApiKeyError::NotAUser);
        }
        let now = self.ports.clock.now();
        let actor = self
            .authenticator
            .actor(principal.clone(), organization_id, origin.client())
            .await?;
        actor.require(Permission::ApiKeysCreate)?;
        let secret = self.ports.random.secret(TokenKind::ApiKey);
        let id: ApiKeyId = self.ports.random.uuid().into();
        let record = audit(
            self.ports.random.as_ref(),
            now,
            principal.audit_actor(),
            AuditAction::ApiKeyCreated,
            origin,
        )
        .in_organization(organization_id)
        .on(TargetKind::ApiKey, id);
        let key = self
            .ports
            .api_keys
            .create_api_key(
                NewApiKey {
                    id,
                    name,
                    prefix: secret.display_prefix(),
                    key_hash: secret.hash(),
                    organization_id,
                    holder: KeyHolder::User(principal.user_id()),
                    created_at: now,
                },
                record,
            )
            .await?
            .ok_or(CreateApiKeyError::TooMany)?;
        Ok(CreatedApiKey::shown_once(key, &secret))
    }

    /// The caller's keys, without secrets. Keys are managed by their user: an API key cannot
    /// list or delete keys (it would reach its creator's keys of other organizations).
    pub async fn list(
        &self,
        principal: &Principal,
        page: PageRequest,
    ) -> Result<Page<ApiKey>, CreateApiKeyError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(CreateApiKeyError::NotAUser);
        }
        Ok(self
            .ports
            .api_keys
            .api_keys_of(principal.user_id(), page)
            .await?)
    }

    /// Revokes one of the caller's keys: it stops working at once. Audited in the same
    /// transaction, in the key's organization.
    pub async fn delete(
        &self,
        principal: &Principal,
        id: ApiKeyId,
        origin: &Origin,
    ) -> Result<(), DeleteApiKeyError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(DeleteApiKeyError::NotAUser);
        }
        let user_id = principal.user_id();
        let Some(key) = self.ports.api_keys.api_key_of(user_id, id).await? else {
            return Err(DeleteApiKeyError::NotFound);
        };
        let record = audit(
            self.ports.random.as_ref(),
            self.ports.clock.now(),
            principal.audit_actor(),
            AuditAction::ApiKeyRevoked,
            origin,
        )
        .in_organization(key.organization_id)
        .on(TargetKind::ApiKey, id);
        if self
            .ports
            .api_keys
            .delete_api_key(user_id, id, record)
            .await?
        {
            Ok(())
        } else {
            Err(DeleteApiKeyError::NotFound)
        }
    }
}
