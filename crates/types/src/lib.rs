//! What Gatehouse and the products behind it share, and nothing of the server: the ids of its
//! resources, the built-in roles and the permission table, Gatehouse's API scopes, the claims
//! of the tokens it signs and the format of its webhook signatures.
//!
//! `gatehouse-domain` (the server's rules) and `gatehouse-verify` (the library products verify
//! tokens and webhooks with) both build on it, so a product reads a token's `org_role` and
//! `org_permissions` with the very types Gatehouse wrote them from. Its dependencies are serde,
//! uuid, and RustCrypto's `hmac`, `sha2` and `hex` for the signatures.
//!
//! ```
//! use gatehouse_types::{Permission, Role};
//!
//! let role: Role = "admin".parse()?;
//! assert!(role.grants(Permission::MembersUpdate));
//! assert!(!role.grants(Permission::OrganizationDelete));
//! assert_eq!(Permission::parse("organization.members.read"), Some(Permission::MembersRead));
//! # Ok::<(), &'static str>(())
//! ```
#![warn(missing_docs)]

mod claims;
mod ids;
mod permission;
mod role;
mod scope;
mod signature;

pub use claims::{
    AccessClaims, Audience, BearerClaims, IdTokenClaims, MachineClaims, GATEHOUSE_AUDIENCE,
};
pub use ids::{
    ApiKeyId, ApplicationId, DirectoryGroupId, DirectoryUserId, DomainId, EventId, InvitationId,
    MfaFactorId, OrganizationId, ScimTokenId, ServiceAccountId, SessionId, UserId,
};
pub use permission::{ApiScope, ApiScopes, Permission};
pub use role::Role;
pub use scope::{Scope, ScopeError};
pub use signature::{signature, signature_matches};
