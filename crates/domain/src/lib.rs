//! Gatehouse's domain: what an identity, organization and webhook service *is*, free of how it is
//! served or stored. Other Rust services reuse it as a library.
//!
//! - [`model`]: value types that parse instead of validate. Once a value is an [`model::Email`]
//!   or a [`model::Slug`], nothing downstream checks it again.
//! - [`ports`]: the traits the use cases need from the outside world (stores, clock, randomness,
//!   password hashing, token signing, mail, webhook sending). Adapters in other crates
//!   implement them: `gatehouse-store` (PostgreSQL and SQLite), `gatehouse-crypto`,
//!   `gatehouse-mail`, `gatehouse-ratelimit`, `gatehouse-delivery`, `gatehouse-saml`,
//!   `gatehouse-webauthn`, `gatehouse-dns`, `gatehouse-metrics`.
//! - [`service`]: the use cases, written against the ports only. Each service takes the ports
//!   it uses and nothing else, as one struct ([`service::OrganizationPorts`] for
//!   [`service::OrganizationService`], and so on); the whole set, [`ports::Ports`], converts into
//!   each of them.
//! - `mock` (feature `mock`): mockall mocks of every port and `MockPorts`, all of them at once.
//!
//! This crate depends on no web framework, database driver or async runtime; CI proves it. Its
//! futures run on any executor.
//!
//! # Using a use case
//!
//! Build the service from the ports it names, then call it with parsed values: a
//! [`service::Principal`] (who calls) and model types, never raw strings. Errors are enums that
//! say what went wrong in domain terms; mapping them to HTTP is the caller's business.
//!
//! Here `OrganizationService` runs on mocks, as a unit test of a reusing service would run it:
//! the clock is stopped, ids are fixed, and the store is expected to be asked to create exactly
//! one organization, owned by the caller, with its `organization.created` event and its audit
//! record in the same write.
//!
//! ```
//! use gatehouse_domain::mock::{ready, MockPorts};
//! use gatehouse_domain::model::{
//!     Amr, AuditAction, AuditActor, EventType, OrganizationName, OrganizationType, Origin, Plan,
//!     Scope, Slug, UserId,
//! };
//! use gatehouse_domain::service::{OrganizationService, Principal};
//! use time::macros::datetime;
//! use uuid::Uuid;
//!
//! let ada = UserId::from_uuid(Uuid::from_u128(0xada));
//! let mut mocks = MockPorts::new();
//! mocks.clock.expect_now().return_const(datetime!(2026-11-25 10:00 UTC));
//! mocks.random.expect_uuid().returning(Uuid::now_v7);
//! mocks
//!     .organizations
//!     .expect_create_organization()
//!     .withf(move |new, owner, events, audit| {
//!         new.slug.as_ref() == "acme"
//!             && *owner == ada
//!             && events.len() == 1
//!             && events[0].event_type == EventType::OrganizationCreated
//!             && audit.action == AuditAction::OrganizationCreated
//!             && audit.actor == AuditActor::User(ada)
//!     })
//!     .times(1)
//!     .returning(|new, _, _, _| ready(Ok(new.slug)));
//!
//! let organizations = OrganizationService::new((&mocks.into_ports()).into());
//! let caller = Principal::User {
//!     user_id: ada,
//!     session_id: Uuid::from_u128(1).into(),
//!     amr: Amr::password(),
//!     application: None,
//! };
//! let created = futures::executor::block_on(organizations.create(
//!     &caller,
//!     OrganizationName::parse("Acme").unwrap(),
//!     Some(Slug::parse("acme").unwrap()),
//!     OrganizationType::Team,
//!     &Origin::new([192, 0, 2, 1].into(), Some("curl/8.5"), None),
//! ))
//! .unwrap();
//! assert_eq!(created.plan, Plan::Free);
//! assert_eq!(created.created_at, datetime!(2026-11-25 10:00 UTC));
//! ```

#![warn(missing_docs)]

#[cfg(any(test, feature = "mock"))]
pub mod mock;
pub mod model;
pub mod ports;
pub mod service;
