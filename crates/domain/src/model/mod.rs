//! Value types and records of the domain.

mod api_key;
mod email;
mod event;
mod ids;
mod organization;
mod page;
mod password;
mod secret;
mod session;
mod user;

pub use api_key::{ApiKey, ApiKeyName, NewApiKey};
pub use email::{Email, EmailError};
pub use event::{EventCategory, EventType, NewEvent};
pub use ids::{ApiKeyId, EventId, OrganizationId, SessionId, UserId};
pub use organization::{
    Membership, NewOrganization, OrganizationName, OrganizationType, Plan, Role, Slug, SlugError,
};
pub use page::{Page, PageRequest, PageRequestError};
pub use password::{NewPassword, PasswordError, PasswordHash, PasswordPolicy};
pub use secret::{SecretToken, TokenHash, TokenKind};
pub use session::{NewSession, Session};
pub use user::{FullName, FullNameError, NewUser, User, UserCredentials};
