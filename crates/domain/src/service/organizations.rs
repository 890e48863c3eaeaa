//! Organizations: list, create, read, change, delete, and the operator's plan change.

use time::OffsetDateTime;

use super::{audit, event, payloads, Actor, Forbidden, Principal, PurgeSlice};
use crate::{
    model::{
        AuditAction, AuditActor, AuditRecord, NewEvent, NewOrganization, Organization,
        OrganizationChange, OrganizationFilter, OrganizationId, OrganizationName,
        OrganizationSettings, OrganizationType, Origin, Page, PageRequest, Permission, Plan, Slug,
        TargetKind,
    },
    ports::{service_ports, PurgePace, StoreError},
};

/// Why an organization use case failed.
#[derive(Debug, thiserror::Error)]
pub enum OrganizationError {
    /// The caller's role lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// No such live organization, or the caller is not in it.
    #[error("organization not found")]
    NotFound,
    /// Another organization has the slug.
    #[error("the slug is already taken")]
    SlugTaken,
    /// A personal workspace lives as long as its user and cannot be deleted.
    #[error("a personal workspace cannot be deleted")]
    PersonalWorkspace,
    /// The store failed.
    #[error(transparent)]
    Store(StoreError),
}

impl From<StoreError> for OrganizationError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict => Self::SlugTaken,
            other => Self::Store(other),
        }
    }
}

/// A soft-deleted organization.
#[derive(Clone, Debug, PartialEq)]
pub struct DeletedOrganization {
    /// The organization.
    pub id: OrganizationId,
    /// When it was deleted; it is purged `RETENTION_DAYS` later.
    pub deleted_at: OffsetDateTime,
}

/// An organization as its creation makes it: active, with the default settings, its owner its
/// one member, no applications yet.
pub(crate) fn founded(new: &NewOrganization) -> Organization {
    Organization {
        id: new.id,
        name: new.name.clone(),
        slug: new.slug.clone(),
        kind: new.kind,
        plan: new.plan,
        is_active: true,
        settings: OrganizationSettings::default(),
        member_count: 1,
        application_count: 0,
        created_at: new.created_at,
        updated_at: new.created_at,
    }
}

service_ports! {
    /// The ports [`OrganizationService`] uses.
    pub struct OrganizationPorts { organizations: OrganizationStore, clock: Clock, random: Random }
}

impl OrganizationService {
    /// The audit record of a change to the organization, by `actor`.
    fn record(
        &self,
        actor: AuditActor,
        action: AuditAction,
        organization_id: OrganizationId,
        origin: &Origin,
        now: OffsetDateTime,
    ) -> AuditRecord {
        audit(self.ports.random.as_ref(), now, actor, action, origin)
            .in_organization(organization_id)
            .on(TargetKind::Organization, organization_id)
    }

    /// The `organization.updated` event of the actor's change to the organization, naming the
    /// fields that changed, and its audit record as `action`; at the organization's
    /// `updated_at`.
    fn updated(
        &self,
        actor: &Actor,
        organization: &Organization,
        changed: &[&str],
        action: AuditAction,
        origin: &Origin,
    ) -> (NewEvent, AuditRecord) {
        let now = organization.updated_at;
        let random = self.ports.random.as_ref();
        let event = actor.event(
            random,
            now,
            payloads::OrganizationUpdated {
                organization: payloads::organization(organization),
                changed,
                // A deletion, the one change that makes it inactive, says when.
                deleted_at: (!organization.is_active).then_some(now),
            },
        );
        let record = self.record(actor.audit_actor(), action, organization.id, origin, now);
        (event, record)
    }
}

/// Creates, lists, changes and deletes organizations, and moves them between plans.
#[derive(Clone)]
pub struct OrganizationService {
    ports: OrganizationPorts,
}

impl OrganizationService {
    /// A service on these ports.
    pub fn new(ports: OrganizationPorts) -> Self {
        Self { ports }
    }

    /// The caller's live organizations.
    pub async fn list(
        &self,
        principal: &Principal,
        filter: OrganizationFilter,
        page: PageRequest,
    ) -> Result<Page<Organization>, StoreError> {
        if let Principal::ApiKey {
            organization_id, ..
        } = principal
        {
            // An API key sees only its own organization.
            let own = self
                .ports
                .organizations
                .organization(*organization_id)
                .await?;
            let items: Vec<Organization> = own
                .into_iter()
                .filter(|org| filter.kind.is_none_or(|kind| kind == org.kind))
                .filter(|org| {
                    filter.search.as_ref().is_none_or(|s| {
                        org.name
                            .as_ref()
                            .to_lowercase()
                            .contains(&s.as_str().to_lowercase())
                    })
                })
                .collect();
            let total = items.len() as u64;
            let items = if page.page() == 1 { items } else { Vec::new() };
            return Ok(Page::new(items, total, page));
        }
        self.ports
            .organizations
            .organizations_of(principal.user_id(), filter, page)
            .await
    }

    /// Creates an organization owned by the caller.
    pub async fn create(
        &self,
        principal: &Principal,
        name: OrganizationName,
        slug: Option<Slug>,
        kind: OrganizationType,
        origin: &Origin,
    ) -> Result<Organization, OrganizationError> {
        let owner = principal.user_id();
        let now = self.ports.clock.now();
        // A generated slug is the store's to finish: it takes the first free candidate (`acme`,
        // `acme-2`, ...) in the transaction that inserts, and the next one when a concurrent
        // creation took it, so that any number of twins created at once all succeed. A slug the
        // caller chose is taken as it is, or refused.
        let new = NewOrganization {
            id: self.ports.random.uuid().into(),
            slug_generated: slug.is_none(),
            slug: slug.unwrap_or_else(|| Slug::generate_from(name.as_ref())),
            name,
            kind,
            plan: Plan::Free,
            created_at: now,
        };
        let mut organization = founded(&new);
        let created = event(
            self.ports.random.as_ref(),
            now,
            Some(organization.id),
            Some(owner),
            payloads::OrganizationCreated(payloads::organization(&organization)),
        );
        organization.slug = self
            .ports
            .organizations
            .create_organization(
                new,
                owner,
                vec![created],
                self.record(
                    principal.audit_actor(),
                    AuditAction::OrganizationCreated,
                    organization.id,
                    origin,
                    now,
                ),
            )
            .await?;
        Ok(organization)
    }

    /// The organization, with settings and counts.
    pub async fn get(&self, actor: &Actor) -> Result<Organization, OrganizationError> {
        self.organization(actor, Permission::OrganizationRead).await
    }

    /// The actor's organization, when the actor has the permission.
    async fn organization(
        &self,
        actor: &Actor,
        permission: Permission,
    ) -> Result<Organization, OrganizationError> {
        actor.require(permission)?;
        self.ports
            .organizations
            .organization(actor.organization_id())
            .await?
            .ok_or(OrganizationError::NotFound)
    }

    /// Changes the fields given; records `organization.updated` with the list of what changed.
    pub async fn update(
        &self,
        actor: &Actor,
        change: OrganizationChange,
        origin: &Origin,
    ) -> Result<Organization, OrganizationError> {
        let mut organization = self
            .organization(actor, Permission::OrganizationUpdate)
            .await?;
        let changed = change.apply_to(&mut organization);
        if changed.is_empty() {
            return Ok(organization);
        }
        let now = self.ports.clock.now();
        organization.updated_at = now;
        let (updated, record) = self.updated(
            actor,
            &organization,
            &changed,
            AuditAction::OrganizationUpdated,
            origin,
        );
        if !self
            .ports
            .organizations
            .update_organization(organization.id, change, now, updated, record)
            .await?
        {
            return Err(OrganizationError::NotFound);
        }
        Ok(organization)
    }

    /// Soft-deletes the organization (owner only). Its members lose access at once; it is
    /// removed for good after the retention period.
    pub async fn delete(
        &self,
        actor: &Actor,
        origin: &Origin,
    ) -> Result<DeletedOrganization, OrganizationError> {
        let mut organization = self
            .organization(actor, Permission::OrganizationDelete)
            .await?;
        if organization.kind == OrganizationType::Personal {
            return Err(OrganizationError::PersonalWorkspace);
        }
        let now = self.ports.clock.now();
        organization.is_active = false;
        organization.updated_at = now;
        let (deleted, record) = self.updated(
            actor,
            &organization,
            &["is_active"],
            AuditAction::OrganizationDeleted,
            origin,
        );
        if !self
            .ports
            .organizations
            .delete_organization(organization.id, now, deleted, record)
            .await?
        {
            return Err(OrganizationError::NotFound);
        }
        Ok(DeletedOrganization {
            id: organization.id,
            deleted_at: now,
        })
    }

    /// The operator's plan change (`gatehouse orgs set-plan`): records
    /// `billing.subscription.updated`, audited as the operator's.
    pub async fn set_plan(
        &self,
        id: OrganizationId,
        plan: Plan,
    ) -> Result<Organization, OrganizationError> {
        let mut organization = self
            .ports
            .organizations
            .organization(id)
            .await?
            .ok_or(OrganizationError::NotFound)?;
        let now = self.ports.clock.now();
        let previous = organization.plan;
        organization.plan = plan;
        organization.updated_at = now;
        let changed = event(
            self.ports.random.as_ref(),
            now,
            Some(id),
            None,
            payloads::SubscriptionUpdated {
                organization_id: id,
                plan,
                previous_plan: previous,
            },
        );
        if !self
            .ports
            .organizations
            .set_plan(
                id,
                plan,
                now,
                changed,
                self.record(
                    AuditActor::Operator,
                    AuditAction::PlanChanged,
                    id,
                    &Origin::system(),
                    now,
                ),
            )
            .await?
        {
            return Err(OrganizationError::NotFound);
        }
        Ok(organization)
    }

    /// Removes for good the organizations deleted more than the retention period ago: one
    /// slice, at most `pace`'s rows ([`PurgePace`]); the server runs slices, with a pause
    /// between them, until one deletes nothing.
    pub async fn purge_deleted(&self, pace: PurgePace) -> Result<PurgeSlice, StoreError> {
        let cutoff = self.ports.clock.now() - time::Duration::days(RETENTION_DAYS);
        let purged = self
            .ports
            .organizations
            .purge_organizations(cutoff, pace.rows())
            .await?;
        let deleted = purged.organizations + purged.rows;
        Ok(PurgeSlice {
            deleted,
            more: deleted > 0,
        })
    }
}

/// How long a deleted organization's data is kept.
pub const RETENTION_DAYS: i64 = 30;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use futures::executor::block_on;
    use uuid::Uuid;

    use super::*;
    use crate::{
        mock::{ready, MockPorts},
        model::{Amr, UserId},
    };

    fn ada() -> Principal {
        Principal::User {
            user_id: UserId::from_uuid(Uuid::from_u128(0xada)),
            session_id: Uuid::from_u128(1).into(),
            amr: Amr::password(),
            application: None,
        }
    }

    fn mocks() -> MockPorts {
        let mut mocks = MockPorts::new();
        mocks
            .clock
            .expect_now()
            .return_const(time::macros::datetime!(2026-11-26 10:00 UTC));
        mocks.random.expect_uuid().returning(Uuid::now_v7);
        mocks
    }

    fn create(mocks: MockPorts, slug: Option<&str>) -> Result<Organization, OrganizationError> {
        let service = OrganizationService::new((&mocks.into_ports()).into());
        block_on(service.create(
            &ada(),
            OrganizationName::parse("Acme").unwrap(),
            slug.map(|s| Slug::parse(s).unwrap()),
            OrganizationType::Team,
            &Origin::system(),
        ))
    }

    #[test]
    fn a_generated_slug_is_finished_by_the_store_which_answers_the_one_it_took() {
        let mut mocks = mocks();
        mocks.organizations.expect_first_free_slug().never();
        mocks
            .organizations
            .expect_create_organization()
            .withf(|new, _, _, _| new.slug.as_ref() == "acme" && new.slug_generated)
            .times(1)
            .returning(|_, _, _, _| ready(Ok(Slug::parse("acme-7").unwrap())));
        let created = create(mocks, None).unwrap();
        assert_eq!(created.slug.as_ref(), "acme-7");
    }

    #[test]
    fn a_chosen_slug_that_is_taken_is_refused_once_without_another_candidate() {
        let mut mocks = mocks();
        mocks
            .organizations
            .expect_create_organization()
            .withf(|new, _, _, _| new.slug.as_ref() == "acme" && !new.slug_generated)
            .times(1)
            .returning(|_, _, _, _| ready(Err(StoreError::Conflict)));
        let result = create(mocks, Some("acme"));
        assert!(
            matches!(result, Err(OrganizationError::SlugTaken)),
            "{result:?}"
        );
    }
}
