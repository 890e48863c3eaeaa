//! Business-plan configuration of an organization: its policies, and the rules every section of
//! it shares (the permission, the plan, the `organization.updated` event).

use std::fmt;

use time::OffsetDateTime;

use super::{payloads, Actor, Forbidden};
use crate::{
    model::{
        AuditAction, AuditRecord, Branding, BrandingChange, ClientAddress, Feature, NewEvent,
        Organization, OrganizationId, OrganizationPolicies, Origin, Permission, Plan, TargetKind,
    },
    ports::{service_ports, Clock, OrganizationStore, Random, StoreError},
};

/// Why a Business-plan configuration could not be read or saved.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    /// The caller's role lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    #[error(
        "{} need the {} plan; this organization is on the {plan} plan",
        feature.as_str(),
        plans_from(feature.minimum_plan())
    )]
    /// The organization's plan does not include the feature.
    PlanRequired {
        /// The feature asked for.
        feature: Feature,
        /// The organization's plan, which lacks it.
        plan: Plan,
    },
    /// The organization is gone (deleted since the caller's membership was read).
    #[error("organization not found")]
    NotFound,
    /// Saving an enabled allowlist that does not hold the caller's own address.
    #[error(
        "the allowlist does not include your current address {0}; saving it would lock you out"
    )]
    LockOut(ClientAddress),
    /// A second SSO configuration for one organization.
    #[error("the organization already has an SSO configuration; change it with PUT")]
    AlreadyConfigured,
    /// No SSO configuration to read or change.
    #[error("the organization has no SSO configuration")]
    NotConfigured,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// `business or enterprise`, `enterprise`: the plans from `minimum` up.
fn plans_from(minimum: Plan) -> String {
    let names: Vec<&str> = Plan::ALL
        .into_iter()
        .filter(|plan| *plan >= minimum)
        .map(Plan::as_str)
        .collect();
    names.join(" or ")
}

/// The checks every Business-plan section makes before anything else: the actor's permission,
/// then the organization's plan.
pub(crate) fn require_feature(
    actor: &Actor,
    permission: Permission,
    feature: Feature,
) -> Result<(), SettingsError> {
    actor.require(permission)?;
    let plan = actor.plan();
    if !plan.includes(feature) {
        return Err(SettingsError::PlanRequired { feature, plan });
    }
    Ok(())
}

/// The live organization of the actor, for the event and for defaults' timestamps.
pub(crate) async fn organization_of(
    organizations: &dyn OrganizationStore,
    actor: &Actor,
) -> Result<Organization, SettingsError> {
    organizations
        .organization(actor.organization_id())
        .await?
        .ok_or(SettingsError::NotFound)
}

/// A section as saved and when, or its defaults since the organization was created.
async fn saved_or_default<T: Default>(
    ports: &dyn SettingsPorts,
    actor: &Actor,
    saved: Option<(T, OffsetDateTime)>,
) -> Result<(T, OffsetDateTime), SettingsError> {
    match saved {
        Some(saved) => Ok(saved),
        None => {
            let organization = organization_of(ports.organizations(), actor).await?;
            Ok((T::default(), organization.created_at))
        }
    }
}

/// What the `organization.updated` event lists for the fields of a section that changed:
/// `branding.logo_url`, `policies.session_policy`, ...
pub(crate) fn changed_in(
    section: &str,
    fields: impl IntoIterator<Item = impl fmt::Display>,
) -> Vec<String> {
    fields
        .into_iter()
        .map(|field| format!("{section}.{field}"))
        .collect()
}

/// The ports of every section of the settings: the organization, the time, fresh ids.
pub(crate) trait SettingsPorts {
    /// Where the organization is read.
    fn organizations(&self) -> &dyn OrganizationStore;
    /// The time of a change.
    fn clock(&self) -> &dyn Clock;
    /// The ids of a change's event and audit record.
    fn random(&self) -> &dyn Random;
}

/// Each section's ports are [`SettingsPorts`], by their fields of those names.
macro_rules! settings_ports {
    ($($ports:ty),+) => {
        $(
            impl $crate::service::policies::SettingsPorts for $ports {
                fn organizations(&self) -> &dyn $crate::ports::OrganizationStore {
                    self.organizations.as_ref()
                }
                fn clock(&self) -> &dyn $crate::ports::Clock {
                    self.clock.as_ref()
                }
                fn random(&self) -> &dyn $crate::ports::Random {
                    self.random.as_ref()
                }
            }
        )+
    };
}

pub(super) use settings_ports;

settings_ports!(PolicyPorts, BrandingPorts);

/// A change to the actor's organization's settings, about to be saved: the live organization,
/// the time of the change, and its `organization.updated` event naming what changed
/// (`policies.session_policy`, `branding.logo_url`, `sso`, ...).
pub(crate) struct SettingsChange {
    pub(crate) organization: Organization,
    pub(crate) at: OffsetDateTime,
    pub(crate) event: NewEvent,
    /// The change's audit record, for the same transaction.
    pub(crate) audit: AuditRecord,
}

impl SettingsChange {
    /// The change of `changed` in the actor's organization, now, audited as `action`;
    /// `NotFound` when the organization is gone.
    pub(crate) async fn now(
        ports: &dyn SettingsPorts,
        actor: &Actor,
        changed: &[String],
        action: AuditAction,
        origin: &Origin,
    ) -> Result<Self, SettingsError> {
        let organization = organization_of(ports.organizations(), actor).await?;
        let at = ports.clock().now();
        let random = ports.random();
        let changed: Vec<&str> = changed.iter().map(String::as_str).collect();
        let event = actor.event(
            random,
            at,
            payloads::OrganizationUpdated {
                organization: payloads::organization(&organization),
                changed: &changed,
                deleted_at: None,
            },
        );
        let audit = actor
            .audit(random, at, action, origin)
            .on(TargetKind::Organization, organization.id);
        Ok(Self {
            organization,
            at,
            event,
            audit,
        })
    }
}

/// An organization's policies as they apply, and since when.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyView {
    /// Whose policies.
    pub organization_id: OrganizationId,
    /// The policies in force: the saved ones, or the defaults.
    pub policies: OrganizationPolicies,
    /// When they were last saved; for the defaults, when the organization was created.
    pub updated_at: OffsetDateTime,
}

service_ports! {
    /// The ports [`PolicyService`] uses.
    pub struct PolicyPorts { policies: PolicyStore, organizations: OrganizationStore, clock: Clock, random: Random }
}

/// Reads and saves an organization's security policies (Business plan and up).
#[derive(Clone)]
pub struct PolicyService {
    ports: PolicyPorts,
}

impl PolicyService {
    /// A service on these ports.
    pub fn new(ports: PolicyPorts) -> Self {
        Self { ports }
    }

    /// Whether the actor may read and change the policies: the permission, then the plan.
    pub fn authorize(actor: &Actor) -> Result<(), SettingsError> {
        require_feature(actor, Permission::PoliciesManage, Feature::Policies)
    }

    /// The organization's policies, or the defaults when it never saved any.
    pub async fn policies(&self, actor: &Actor) -> Result<PolicyView, SettingsError> {
        Self::authorize(actor)?;
        let organization_id = actor.organization_id();
        let saved = self.ports.policies.policies(organization_id).await?;
        let (policies, updated_at) = saved_or_default(
            &self.ports,
            actor,
            saved.map(|saved| (saved.policies, saved.updated_at)),
        )
        .await?;
        Ok(PolicyView {
            organization_id,
            policies,
            updated_at,
        })
    }

    /// Replaces the organization's policies. An enabled allowlist must hold the address the
    /// caller saves it from.
    pub async fn replace(
        &self,
        actor: &Actor,
        policies: OrganizationPolicies,
        client: ClientAddress,
        origin: &Origin,
    ) -> Result<PolicyView, SettingsError> {
        Self::authorize(actor)?;
        if !policies.ip_allowlist.permits(client.0) {
            return Err(SettingsError::LockOut(client));
        }
        let current = self.policies(actor).await?;
        let saved_since = self
            .ports
            .policies
            .policies(actor.organization_id())
            .await?
            .and_then(|saved| saved.mfa_required_since);
        let old = &current.policies;
        let sections = [
            (
                "password_policy",
                old.password_policy != policies.password_policy,
            ),
            ("mfa_policy", old.mfa_policy != policies.mfa_policy),
            (
                "session_policy",
                old.session_policy != policies.session_policy,
            ),
            ("ip_allowlist", old.ip_allowlist != policies.ip_allowlist),
        ];
        let changed = changed_in(
            "policies",
            sections
                .into_iter()
                .filter(|(_, changed)| *changed)
                .map(|(section, _)| section),
        );
        if changed.is_empty() {
            return Ok(current);
        }
        let SettingsChange {
            organization,
            at: now,
            event: updated,
            audit: record,
        } = SettingsChange::now(
            &self.ports,
            actor,
            &changed,
            AuditAction::PoliciesChanged,
            origin,
        )
        .await?;
        // MFA has been required since the save that turned it on; turning it off forgets that.
        let mfa_required_since = if !policies.mfa_policy.required() {
            None
        } else if old.mfa_policy.required() {
            saved_since.or(Some(current.updated_at))
        } else {
            Some(now)
        };
        if !self
            .ports
            .policies
            .save_policies(
                organization.id,
                policies.clone(),
                mfa_required_since,
                now,
                updated,
                record,
            )
            .await?
        {
            return Err(SettingsError::NotFound);
        }
        Ok(PolicyView {
            organization_id: organization.id,
            policies,
            updated_at: now,
        })
    }
}

/// An organization's branding as it applies, and since when.
#[derive(Clone, Debug, PartialEq)]
pub struct BrandingView {
    /// Whose branding.
    pub organization_id: OrganizationId,
    /// The branding in force: the saved one, or the defaults.
    pub branding: Branding,
    /// When it was last saved; for the defaults, when the organization was created.
    pub updated_at: OffsetDateTime,
}

service_ports! {
    /// The ports [`BrandingService`] uses.
    pub struct BrandingPorts { branding: BrandingStore, organizations: OrganizationStore, clock: Clock, random: Random }
}

/// Reads and saves an organization's white-label branding (Business plan and up).
#[derive(Clone)]
pub struct BrandingService {
    ports: BrandingPorts,
}

impl BrandingService {
    /// A service on these ports.
    pub fn new(ports: BrandingPorts) -> Self {
        Self { ports }
    }

    /// Whether the actor may read and change the branding: the permission, then the plan.
    pub fn authorize(actor: &Actor) -> Result<(), SettingsError> {
        require_feature(actor, Permission::BrandingManage, Feature::Branding)
    }

    /// The organization's branding, or the default look when it never saved any.
    pub async fn branding(&self, actor: &Actor) -> Result<BrandingView, SettingsError> {
        Self::authorize(actor)?;
        let organization_id = actor.organization_id();
        let saved = self.ports.branding.branding(organization_id).await?;
        let (branding, updated_at) = saved_or_default(
            &self.ports,
            actor,
            saved.map(|saved| (saved.branding, saved.updated_at)),
        )
        .await?;
        Ok(BrandingView {
            organization_id,
            branding,
            updated_at,
        })
    }

    /// Changes the fields the request names; `null` removes an optional image or address.
    pub async fn update(
        &self,
        actor: &Actor,
        change: BrandingChange,
        origin: &Origin,
    ) -> Result<BrandingView, SettingsError> {
        let mut view = self.branding(actor).await?;
        let changed = changed_in("branding", view.branding.apply(change));
        if changed.is_empty() {
            return Ok(view);
        }
        let saved = SettingsChange::now(
            &self.ports,
            actor,
            &changed,
            AuditAction::BrandingChanged,
            origin,
        )
        .await?;
        if !self
            .ports
            .branding
            .save_branding(
                saved.organization.id,
                view.branding.clone(),
                saved.at,
                saved.event,
                saved.audit,
            )
            .await?
        {
            return Err(SettingsError::NotFound);
        }
        view.updated_at = saved.at;
        Ok(view)
    }
}
