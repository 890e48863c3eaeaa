//! Verified domains: an organization claims an email domain and proves it holds it with a DNS
//! TXT record (`_gatehouse-challenge.{domain}` holding a random value). Owners and admins
//! (`domains.manage`), on any plan. A domain is verified by at most one organization; what
//! single sign-on may speak for is the verified ones ([`super::SamlService`]).

use super::payloads::{self, Payload};
use time::OffsetDateTime;

use super::{Actor, Forbidden};
use crate::{
    model::{
        AuditAction, AuditRecord, ClaimableDomain, DomainId, NewEvent, OrganizationDomain, Origin,
        Page, PageRequest, Permission, TargetKind, TokenKind,
    },
    ports::{service_ports, DnsError, StoreError},
};

/// The most domains one organization may claim.
pub const MAX_DOMAINS: usize = 100;

/// Why a domain use case failed.
#[derive(Debug, thiserror::Error)]
pub enum DomainError {
    /// The caller's role lacks `domains.manage`.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// No such domain in the organization (or the organization is gone).
    #[error("domain not found")]
    NotFound,
    /// The organization claimed this domain already.
    #[error("the organization has claimed {0} already")]
    AlreadyClaimed(String),
    /// Another organization verified the domain.
    #[error("{0} is verified by another organization")]
    VerifiedElsewhere(String),
    /// The organization has [`MAX_DOMAINS`] domains.
    #[error("an organization may claim at most {MAX_DOMAINS} domains")]
    TooMany,
    /// No TXT record of the challenge's name holds its value: what was found instead.
    #[error("{}", not_proven(.name, .found))]
    NotProven {
        /// The name that was asked: `_gatehouse-challenge.{domain}`.
        name: String,
        /// The TXT records found there (none, or other values).
        found: Vec<String>,
    },
    /// The DNS could not be asked.
    #[error("the DNS could not be asked; try again later")]
    Dns(#[source] DnsError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The message of [`DomainError::NotProven`].
fn not_proven(name: &str, found: &[String]) -> String {
    if found.is_empty() {
        format!("no TXT record found at {name}")
    } else {
        let found: Vec<String> = found.iter().map(|value| format!("\"{value}\"")).collect();
        format!(
            "no TXT record at {name} holds the verification value; found: {}",
            found.join(", ")
        )
    }
}

service_ports! {
    /// The ports [`DomainService`] uses.
    pub struct DomainPorts { domains: DomainStore, dns: DnsTxt, clock: Clock, random: Random }
}

/// Claims, verifies, lists and removes an organization's email domains.
#[derive(Clone)]
pub struct DomainService {
    ports: DomainPorts,
}

impl DomainService {
    /// A service on these ports.
    pub fn new(ports: DomainPorts) -> Self {
        Self { ports }
    }

    fn record(
        &self,
        actor: &Actor,
        action: AuditAction,
        id: DomainId,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> AuditRecord {
        actor
            .audit(self.ports.random.as_ref(), now, action, origin)
            .on(TargetKind::Domain, id)
    }

    fn event(&self, actor: &Actor, payload: impl Payload, now: OffsetDateTime) -> NewEvent {
        actor.event(self.ports.random.as_ref(), now, payload)
    }

    /// Claims a domain for the actor's organization: pending, with the value its TXT record
    /// must hold.
    pub async fn add(
        &self,
        actor: &Actor,
        domain: ClaimableDomain,
        origin: &Origin,
    ) -> Result<OrganizationDomain, DomainError> {
        actor.require(Permission::DomainsManage)?;
        let organization_id = actor.organization_id();
        let domain = domain.into_domain();
        let claimed = self.ports.domains.domains(organization_id).await?;
        if claimed.iter().any(|d| d.domain == domain) {
            return Err(DomainError::AlreadyClaimed(domain.to_string()));
        }
        if claimed.len() >= MAX_DOMAINS {
            return Err(DomainError::TooMany);
        }
        if self
            .ports
            .domains
            .verifying_organization(&domain)
            .await?
            .is_some()
        {
            return Err(DomainError::VerifiedElsewhere(domain.to_string()));
        }
        let now = self.ports.clock.now();
        let added = OrganizationDomain {
            id: DomainId::from_uuid(self.ports.random.uuid()),
            organization_id,
            verification_value: self
                .ports
                .random
                .secret(TokenKind::DomainChallenge)
                .expose()
                .to_owned(),
            domain,
            verified_at: None,
            created_at: now,
        };
        let audit = self.record(actor, AuditAction::DomainAdded, added.id, origin, now);
        match self.ports.domains.add_domain(added.clone(), audit).await {
            Ok(true) => Ok(added),
            Ok(false) => Err(DomainError::NotFound),
            Err(StoreError::Conflict) => Err(DomainError::AlreadyClaimed(added.domain.to_string())),
            Err(e) => Err(e.into()),
        }
    }

    /// A page of the organization's domains, oldest first. At most [`MAX_DOMAINS`] of them:
    /// read whole and paged here.
    pub async fn list(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> Result<Page<OrganizationDomain>, DomainError> {
        actor.require(Permission::DomainsManage)?;
        let all = self.ports.domains.domains(actor.organization_id()).await?;
        Ok(Page::of_all(all, page))
    }

    async fn get(&self, actor: &Actor, id: DomainId) -> Result<OrganizationDomain, DomainError> {
        self.ports
            .domains
            .domain(actor.organization_id(), id)
            .await?
            .ok_or(DomainError::NotFound)
    }

    /// Looks for the domain's TXT record: verified when a record of
    /// `_gatehouse-challenge.{domain}` holds its value (`organization.domain_verified`), else
    /// [`DomainError::NotProven`] with what was found. A verified domain stays as it is.
    pub async fn verify(
        &self,
        actor: &Actor,
        id: DomainId,
        origin: &Origin,
    ) -> Result<OrganizationDomain, DomainError> {
        actor.require(Permission::DomainsManage)?;
        let mut domain = self.get(actor, id).await?;
        if domain.verified_at.is_some() {
            return Ok(domain);
        }
        let name = domain.challenge_name();
        let found = self
            .ports
            .dns
            .txt_records(&name)
            .await
            .map_err(DomainError::Dns)?;
        if !found
            .iter()
            .any(|value| value == &domain.verification_value)
        {
            return Err(DomainError::NotProven { name, found });
        }
        let now = self.ports.clock.now();
        domain.verified_at = Some(now);
        let event = self.event(
            actor,
            payloads::DomainVerified(payloads::domain(&domain)),
            now,
        );
        let audit = self.record(actor, AuditAction::DomainVerified, id, origin, now);
        match self
            .ports
            .domains
            .verify_domain(actor.organization_id(), id, now, event, audit)
            .await
        {
            Ok(true) => Ok(domain),
            // Verified (or removed) meanwhile: say how it is now.
            Ok(false) => self.get(actor, id).await,
            Err(StoreError::Conflict) => {
                Err(DomainError::VerifiedElsewhere(domain.domain.to_string()))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Removes the domain (`organization.domain_removed`): single sign-on stops speaking for it
    /// at once.
    pub async fn remove(
        &self,
        actor: &Actor,
        id: DomainId,
        origin: &Origin,
    ) -> Result<(), DomainError> {
        actor.require(Permission::DomainsManage)?;
        let domain = self.get(actor, id).await?;
        let now = self.ports.clock.now();
        let event = self.event(
            actor,
            payloads::DomainRemoved(payloads::domain(&domain)),
            now,
        );
        let audit = self.record(actor, AuditAction::DomainRemoved, id, origin, now);
        if !self
            .ports
            .domains
            .remove_domain(actor.organization_id(), id, event, audit)
            .await?
        {
            return Err(DomainError::NotFound);
        }
        Ok(())
    }
}
