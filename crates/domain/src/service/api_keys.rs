//! API keys: created by a user for one organization, shown once, stored hashed.

use serde::Serialize;
use time::OffsetDateTime;

use super::{principal::membership_of, OrgAccessError, Principal};
use crate::{
    model::{ApiKey, ApiKeyId, ApiKeyName, NewApiKey, OrganizationId, TokenKind},
    ports::{service_ports, StoreError},
};

/// The create response: the only time the key itself is shown.
#[derive(Clone, PartialEq, Serialize)]
pub struct CreatedApiKey {
    pub id: ApiKeyId,
    pub name: ApiKeyName,
    pub key: String,
    pub prefix: String,
    pub organization_id: OrganizationId,
    #[serde(with = "crate::model::timestamp")]
    pub created_at: OffsetDateTime,
}

impl std::fmt::Debug for CreatedApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreatedApiKey")
            .field("id", &self.id)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CreateApiKeyError {
    #[error("API keys cannot manage API keys: use a user's access token")]
    NotAUser,
    #[error(transparent)]
    Organization(#[from] OrgAccessError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Debug, thiserror::Error)]
pub enum DeleteApiKeyError {
    #[error("API keys cannot manage API keys: use a user's access token")]
    NotAUser,
    #[error("API key not found")]
    NotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

service_ports! {
    /// The ports [`ApiKeyService`] uses.
    pub struct ApiKeyPorts { api_keys: ApiKeyStore, memberships: MembershipStore, clock: Clock, random: Random }
}

#[derive(Clone)]
pub struct ApiKeyService {
    ports: ApiKeyPorts,
}

impl ApiKeyService {
    pub fn new(ports: ApiKeyPorts) -> Self {
        Self { ports }
    }

    /// Creates a key for an organization the caller belongs to.
    pub async fn create(
        &self,
        principal: &Principal,
        name: ApiKeyName,
        organization_id: OrganizationId,
    ) -> Result<CreatedApiKey, CreateApiKeyError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(CreateApiKeyError::NotAUser);
        }
        membership_of(self.ports.memberships.as_ref(), principal, organization_id).await?;
        let secret = self.ports.random.secret(TokenKind::ApiKey);
        let key = self
            .ports
            .api_keys
            .create_api_key(NewApiKey {
                id: self.ports.random.uuid().into(),
                name,
                prefix: secret.display_prefix(),
                key_hash: secret.hash(),
                organization_id,
                user_id: principal.user_id(),
                created_at: self.ports.clock.now(),
            })
            .await?;
        Ok(CreatedApiKey {
            id: key.id,
            name: key.name,
            key: secret.expose().to_owned(),
            prefix: key.prefix,
            organization_id: key.organization_id,
            created_at: key.created_at,
        })
    }

    /// The caller's keys, without secrets. Keys are managed by their user: an API key cannot
    /// list or delete keys (it would reach its creator's keys of other organizations).
    pub async fn list(&self, principal: &Principal) -> Result<Vec<ApiKey>, CreateApiKeyError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(CreateApiKeyError::NotAUser);
        }
        Ok(self.ports.api_keys.api_keys_of(principal.user_id()).await?)
    }

    pub async fn delete(
        &self,
        principal: &Principal,
        id: ApiKeyId,
    ) -> Result<(), DeleteApiKeyError> {
        if matches!(principal, Principal::ApiKey { .. }) {
            return Err(DeleteApiKeyError::NotAUser);
        }
        if self
            .ports
            .api_keys
            .delete_api_key(principal.user_id(), id)
            .await?
        {
            Ok(())
        } else {
            Err(DeleteApiKeyError::NotFound)
        }
    }
}
