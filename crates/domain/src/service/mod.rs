//! The use cases, written against the ports.

mod api_keys;
mod auth;
mod principal;

pub use api_keys::{ApiKeyService, CreateApiKeyError, CreatedApiKey, DeleteApiKeyError};
pub use auth::{
    AccessToken, AuthService, AuthSettings, ChangePasswordError, LoginError, ProfileChange,
    RefreshError, RegisterError, Registered, TokenPair, UpdateProfileError,
};
pub use principal::{AuthenticateError, OrgAccessError, Principal};

use chrono::{DateTime, Utc};

use crate::{
    model::{EventType, NewEvent, OrganizationId, UserId},
    ports::Ports,
};

/// Builds an outbox event with a fresh id, stamped with the time of the change.
pub(crate) fn event(
    ports: &Ports,
    at: DateTime<Utc>,
    event_type: EventType,
    organization_id: Option<OrganizationId>,
    user_id: Option<UserId>,
    data: serde_json::Value,
) -> NewEvent {
    NewEvent {
        id: ports.random.uuid().into(),
        event_type,
        organization_id,
        user_id,
        data,
        occurred_at: at,
    }
}
