//! Value types and records of the domain.

mod api_key;
mod email;
mod event;
mod ids;
mod member;
mod org;
mod organization;
mod page;
mod password;
mod permission;
mod rate_limit;
mod secret;
mod session;
mod user;
mod webhook;

pub use api_key::{ApiKey, ApiKeyName, NewApiKey};
pub use email::{Email, EmailError};
pub use event::{EventCategory, EventType, NewEvent};
pub use ids::{ApiKeyId, EventId, InvitationId, OrganizationId, SessionId, UserId};
pub use member::{
    InvitableRole, Invitation, Member, MemberFilter, MemberStatus, NewInvitation,
    INVITATION_TTL_DAYS,
};
pub use org::{
    DefaultRole, Organization, OrganizationChange, OrganizationFilter, OrganizationSettings,
};
pub use organization::{
    Membership, NewOrganization, OrganizationName, OrganizationType, Plan, Role, Slug, SlugError,
};
pub use page::{Page, PageRequest, PageRequestError};
pub use password::{NewPassword, PasswordError, PasswordHash, PasswordPolicy};
pub use permission::Permission;
pub use rate_limit::RateLimits;
pub use secret::{SecretToken, TokenHash, TokenKind};
pub use session::{NewSession, Session};
pub use user::{FullName, FullNameError, NewUser, User, UserCredentials};
pub use webhook::{
    signature, Delivery, DeliveryId, DeliveryStats, DeliveryStatus, EndpointId, RetrySchedule,
    WebhookEndpoint, WebhookUrl, WebhookUrlError,
};
