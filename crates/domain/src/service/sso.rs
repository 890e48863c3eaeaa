//! SAML single sign-on configuration (Business and Enterprise plans). The service generates the
//! service-provider addresses the identity provider is configured with; the certificate is
//! checked when it arrives and never shown again.

use super::{
    policies::{changed_in, require_feature, settings_ports, SettingsChange},
    Actor, SettingsError,
};
use crate::{
    model::{
        sp_acs_url, sp_entity_id, AuditAction, DomainWhitelist, EmailDomain, Feature,
        IdpCertificate, IdpEntityId, IdpSsoUrl, OrganizationId, Origin, Permission, ProvisionRole,
        SsoChange, SsoConfiguration, SsoProvider, VerifiedDomains,
    },
    ports::{service_ports, StoreError},
};

/// What `POST /sso/configurations` asks for, parsed.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSsoConfiguration {
    /// The protocol; SAML 2.0.
    pub provider: SsoProvider,
    /// The identity provider's entity id (its SAML issuer).
    pub idp_entity_id: IdpEntityId,
    /// Where the identity provider's single sign-on endpoint is.
    pub idp_sso_url: IdpSsoUrl,
    /// The identity provider's signing certificate, valid now.
    pub idp_certificate: IdpCertificate,
    /// Email domains whose users sign in through the identity provider.
    pub domain_whitelist: DomainWhitelist,
    /// Whether a first sign-in creates the user and their membership.
    pub auto_provision: bool,
    /// The role an auto-provisioned member gets.
    pub default_role: ProvisionRole,
}

/// A configuration with the addresses the identity provider needs.
#[derive(Clone, Debug, PartialEq)]
pub struct SsoView {
    /// The saved configuration.
    pub configuration: SsoConfiguration,
    /// Gatehouse's entity id as the service provider, to register at the identity provider.
    pub sp_entity_id: String,
    /// Gatehouse's assertion consumer service URL, to register at the identity provider.
    pub sp_acs_url: String,
    /// The whitelisted domains the organization verified: the only ones its identity provider
    /// signs in (a whitelisted domain not verified is kept, and does nothing).
    pub verified_domains: Vec<EmailDomain>,
}

service_ports! {
    /// The ports [`SsoService`] uses.
    pub struct SsoPorts { sso: SsoStore, domains: DomainStore, organizations: OrganizationStore, clock: Clock, random: Random }
}

settings_ports!(SsoPorts);

/// Reads and saves an organization's SAML single sign-on configuration (Business plan and up).
#[derive(Clone)]
pub struct SsoService {
    ports: SsoPorts,
    /// The service's public URL, the base of the service-provider addresses.
    public_url: String,
}

impl SsoService {
    /// A service on these ports; `public_url` is where Gatehouse is reached, for the addresses the identity provider needs.
    pub fn new(ports: SsoPorts, public_url: String) -> Self {
        Self { ports, public_url }
    }

    async fn view(&self, configuration: SsoConfiguration) -> Result<SsoView, StoreError> {
        let id = configuration.organization_id;
        let verified = VerifiedDomains::of(&self.ports.domains.domains(id).await?);
        Ok(SsoView {
            sp_entity_id: sp_entity_id(&self.public_url, id),
            sp_acs_url: sp_acs_url(&self.public_url, id),
            verified_domains: configuration
                .domain_whitelist
                .as_slice()
                .iter()
                .filter(|domain| verified.contains(domain))
                .cloned()
                .collect(),
            configuration,
        })
    }

    /// The configuration an identity provider may read without credentials (the service
    /// provider's metadata): only an active one of an organization whose plan includes SSO.
    pub async fn published(
        &self,
        organization_id: OrganizationId,
    ) -> Result<SsoView, SettingsError> {
        let organization = self
            .ports
            .organizations
            .organization(organization_id)
            .await?
            .filter(|org| org.plan.includes(Feature::Sso))
            .ok_or(SettingsError::NotConfigured)?;
        let configuration = self
            .ports
            .sso
            .sso_configuration(organization.id)
            .await?
            .filter(|configuration| configuration.is_active)
            .ok_or(SettingsError::NotConfigured)?;
        Ok(self.view(configuration).await?)
    }

    /// Whether the actor may read and change SSO: the permission, then the plan.
    pub fn authorize(actor: &Actor) -> Result<(), SettingsError> {
        require_feature(actor, Permission::SsoManage, Feature::Sso)
    }

    /// Configures SSO for the actor's organization; a second configuration is refused.
    pub async fn create(
        &self,
        actor: &Actor,
        new: NewSsoConfiguration,
        origin: &Origin,
    ) -> Result<SsoView, SettingsError> {
        Self::authorize(actor)?;
        let SettingsChange {
            organization,
            at: now,
            event,
            audit,
        } = SettingsChange::now(
            &self.ports,
            actor,
            &["sso".to_owned()],
            AuditAction::SsoConfigured,
            origin,
        )
        .await?;
        let configuration = SsoConfiguration {
            organization_id: organization.id,
            provider: new.provider,
            idp_entity_id: new.idp_entity_id,
            idp_sso_url: new.idp_sso_url,
            idp_certificate: new.idp_certificate,
            domain_whitelist: new.domain_whitelist,
            auto_provision: new.auto_provision,
            default_role: new.default_role,
            is_active: true,
            created_at: now,
            updated_at: now,
        };
        match self
            .ports
            .sso
            .create_sso_configuration(configuration.clone(), event, audit)
            .await
        {
            Ok(true) => Ok(self.view(configuration).await?),
            Ok(false) => Err(SettingsError::NotFound),
            Err(StoreError::Conflict) => Err(SettingsError::AlreadyConfigured),
            Err(e) => Err(e.into()),
        }
    }

    /// The organization's configuration, with the service provider's addresses.
    pub async fn configuration(&self, actor: &Actor) -> Result<SsoView, SettingsError> {
        Self::authorize(actor)?;
        let configuration = self
            .ports
            .sso
            .sso_configuration(actor.organization_id())
            .await?
            .ok_or(SettingsError::NotConfigured)?;
        Ok(self.view(configuration).await?)
    }

    /// Changes the fields the request names.
    pub async fn update(
        &self,
        actor: &Actor,
        change: SsoChange,
        origin: &Origin,
    ) -> Result<SsoView, SettingsError> {
        let mut view = self.configuration(actor).await?;
        let changed = changed_in("sso", view.configuration.apply(change));
        if changed.is_empty() {
            return Ok(view);
        }
        let saved = SettingsChange::now(
            &self.ports,
            actor,
            &changed,
            AuditAction::SsoConfigured,
            origin,
        )
        .await?;
        view.configuration.updated_at = saved.at;
        if !self
            .ports
            .sso
            .update_sso_configuration(view.configuration.clone(), saved.event, saved.audit)
            .await?
        {
            return Err(SettingsError::NotConfigured);
        }
        // The whitelist may have changed: which of it is verified too.
        Ok(self.view(view.configuration).await?)
    }
}
