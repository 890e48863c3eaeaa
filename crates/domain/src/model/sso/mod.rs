//! An organization's SAML single sign-on configuration: the identity provider (IdP) it trusts,
//! which email domains may sign in through it, and how new users are provisioned. One file per
//! concept:
//!
//! - `configuration`: the protocol, the configuration as stored and its changes, and the
//!   service provider's (Gatehouse's) URLs the IdP is given.
//! - `identity_provider`: the IdP's entity id, sign-on URL and signing certificate.
//! - `domains`: the email domains that sign in through the IdP.
//! - `provisioning`: the role users the IdP provisions get.

mod configuration;
mod domains;
mod identity_provider;
mod provisioning;

pub use configuration::{
    sp_acs_url, sp_entity_id, SsoChange, SsoConfiguration, SsoProvider, SsoProviderError,
};
pub use domains::{DomainWhitelist, EmailDomain, EmailDomainError};
pub use identity_provider::{CertificateError, IdpCertificate, IdpEntityId, IdpSsoUrl};
pub use provisioning::{ProvisionRole, ProvisionRoleError};

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
