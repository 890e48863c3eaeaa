//! An organization's SSO configuration: the protocol it speaks, the configuration as stored
//! and the changes made to it, and the service provider's (Gatehouse's) URLs the IdP is given.

use time::OffsetDateTime;

use super::{DomainWhitelist, IdpCertificate, IdpEntityId, IdpSsoUrl, ProvisionRole};
use crate::model::{
    text::{apply_changes, display_as_str, from_str_by_parse},
    OrganizationId,
};

/// The SSO protocol. Only SAML 2.0 for now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SsoProvider {
    /// SAML 2.0.
    Saml,
}

/// The protocol named is not `saml`, the only one accepted (lowercase, exactly).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be saml")]
pub struct SsoProviderError;

impl SsoProvider {
    /// Parses the protocol's name: exactly `saml`.
    pub fn parse(raw: &str) -> Result<Self, SsoProviderError> {
        match raw {
            "saml" => Ok(Self::Saml),
            _ => Err(SsoProviderError),
        }
    }

    /// The protocol's name, as stored and sent: `saml`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Saml => "saml",
        }
    }
}

from_str_by_parse!(SsoProvider, SsoProviderError);

display_as_str!(SsoProvider);

/// An organization's SSO configuration, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SsoConfiguration {
    /// The organization configured; it has at most one configuration.
    pub organization_id: OrganizationId,
    /// The protocol spoken with the IdP.
    pub provider: SsoProvider,
    /// The IdP's entity id: the `Issuer` its assertions must carry.
    pub idp_entity_id: IdpEntityId,
    /// The IdP's single sign-on endpoint, where sign-in requests are sent.
    pub idp_sso_url: IdpSsoUrl,
    /// The certificate whose key signs the IdP's assertions.
    pub idp_certificate: IdpCertificate,
    /// The email domains whose users sign in through the IdP.
    pub domain_whitelist: DomainWhitelist,
    /// Whether a first sign-in creates the user and their membership.
    pub auto_provision: bool,
    /// The role an auto-provisioned member gets.
    pub default_role: ProvisionRole,
    /// Whether the configuration is in use; an inactive one is kept but not published to the
    /// IdP.
    pub is_active: bool,
    /// When the configuration was first saved.
    pub created_at: OffsetDateTime,
    /// When the configuration last changed.
    pub updated_at: OffsetDateTime,
}

/// A merge-style change to an [`SsoConfiguration`]: only the `Some` fields change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SsoChange {
    /// The new protocol; `None` keeps the current one.
    pub provider: Option<SsoProvider>,
    /// The new IdP entity id; `None` keeps the current one.
    pub idp_entity_id: Option<IdpEntityId>,
    /// The new IdP sign-on endpoint; `None` keeps the current one.
    pub idp_sso_url: Option<IdpSsoUrl>,
    /// The new IdP signing certificate; `None` keeps the current one.
    pub idp_certificate: Option<IdpCertificate>,
    /// The new whitelist, replacing the whole list; `None` keeps the current one.
    pub domain_whitelist: Option<DomainWhitelist>,
    /// Whether first sign-ins now provision users; `None` keeps the current setting.
    pub auto_provision: Option<bool>,
    /// The new role for auto-provisioned members; `None` keeps the current one.
    pub default_role: Option<ProvisionRole>,
    /// Turns the configuration on or off; `None` keeps the current state.
    pub is_active: Option<bool>,
}

impl SsoConfiguration {
    /// Applies the change; returns the names of the fields that actually changed (a new
    /// certificate counts when its fingerprint differs). Leaves `updated_at` to the caller.
    pub fn apply(&mut self, change: SsoChange) -> Vec<&'static str> {
        // Certificates are kept normalised, so equal fingerprints mean equal certificates.
        apply_changes!(self, change;
            provider, idp_entity_id, idp_sso_url, idp_certificate, domain_whitelist,
            auto_provision, default_role, is_active,
        )
    }
}

/// The service provider's (Gatehouse's) entity id for an organization:
/// `{public_url}/sso/saml/{org}/metadata`.
pub fn sp_entity_id(public_url: &str, org: OrganizationId) -> String {
    format!(
        "{}/sso/saml/{org}/metadata",
        public_url.trim_end_matches('/')
    )
}

/// The service provider's assertion consumer service URL for an organization:
/// `{public_url}/sso/saml/{org}/acs`.
pub fn sp_acs_url(public_url: &str, org: OrganizationId) -> String {
    format!("{}/sso/saml/{org}/acs", public_url.trim_end_matches('/'))
}
