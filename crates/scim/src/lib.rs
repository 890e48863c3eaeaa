//! Gatehouse's SCIM 2.0 adapter: the protocol of RFC 7643 (schema) and RFC 7644 (protocol) as
//! pure functions over JSON. No HTTP server, no store: the routes hand this crate the request's
//! JSON and query parameters, and the domain's directory types; it hands back JSON (with
//! [`SCIM_CONTENT_TYPE`]) or a [`ScimError`] to answer with.
//!
//! - **Resources** ([`Resources`]): a [`DirectoryUser`] or [`DirectoryGroup`] rendered as a SCIM
//!   `User` or `Group` under one base URL, and the discovery documents
//!   (`/ServiceProviderConfig`, `/ResourceTypes`, `/Schemas`), whose schemas describe exactly the
//!   attributes Gatehouse keeps.
//! - **Bodies** of `POST` and `PUT`: [`parse_user`] and [`parse_group`].
//! - **`PATCH`** ([`Patch`]): the operations of RFC 7644 §3.5.2, applied to the resource's JSON
//!   and read back with the same parsers, so that a patched resource obeys the same rules as a
//!   created one.
//! - **Listing** ([`ListQuery`], [`Filter`], [`list_response`], [`project`]): `filter`,
//!   `startIndex`, `count`, `attributes` and `excludedAttributes`, over rendered resources.
//!
//! # Leniency
//!
//! Identity providers send more than Gatehouse keeps, and not always as the RFC says. On
//! purpose, and tested with the bodies Okta and Microsoft Entra ID document:
//!
//! - Attributes Gatehouse does not keep (`locale`, `password`, `phoneNumbers`, `roles`, ...),
//!   schema extensions (`urn:ietf:params:scim:schemas:extension:enterprise:2.0:User`) and
//!   read-only attributes (`id`, `meta`, `groups`) are ignored in bodies, and a `PATCH`
//!   operation whose path names one of them does nothing.
//! - Attribute names are matched without case (RFC 7643 §2.1), and may be fully qualified
//!   (`urn:ietf:params:scim:schemas:core:2.0:User:userName`).
//! - Booleans may come as strings (`"active": "False"`, as Entra ID sends them), `PATCH`'s `op`
//!   in any case (`"Replace"`), filter keywords in any case (`userName EQ "x" OR ...`), and a
//!   path-less `PATCH` value may hold dotted keys (`{"name.givenName": "Ada"}`).
//! - An optional text that is empty (or only white space) is taken as unassigned, as `null` is.
//!
//! What stays strict: a missing or invalid `userName` or `displayName`, a text the directory
//! rules refuse ([`DirectoryText`]), a member whose `value` is not a UUID, more than
//! [`MAX_DIRECTORY_EMAILS`] addresses or [`MAX_GROUP_MEMBERS`] members, more than one primary
//! address, a malformed filter or path, a filtered `PATCH` path that matches nothing where
//! nothing can be made (RFC 7644's `noTarget`), and removing `active` (which the schema
//! announces as required: Gatehouse always has a value, `true` when a request leaves it out).
//!
//! `POST /.search` (RFC 7644 §3.4.3) is a list whose parameters come in the body: the routes
//! turn the body into [`ListQuery`] parameters and list as for a `GET`.
//!
//! [`DirectoryUser`]: gatehouse_domain::model::DirectoryUser
//! [`DirectoryGroup`]: gatehouse_domain::model::DirectoryGroup
//! [`DirectoryText`]: gatehouse_domain::model::DirectoryText
//! [`MAX_DIRECTORY_EMAILS`]: gatehouse_domain::model::MAX_DIRECTORY_EMAILS
//! [`MAX_GROUP_MEMBERS`]: gatehouse_domain::model::MAX_GROUP_MEMBERS

#![deny(missing_docs)]

mod attr;
mod discovery;
mod error;
mod filter;
mod list;
mod patch;
mod resource;

pub use error::{ScimError, ScimType};
pub use filter::Filter;
pub use list::{list_page, list_response, project, ListQuery};
pub use patch::Patch;
pub use resource::{parse_group, parse_user, Resources};

/// The media type of every SCIM request and response body (RFC 7644 §3.1).
pub const SCIM_CONTENT_TYPE: &str = "application/scim+json";

/// The core `User` schema (RFC 7643 §4.1).
pub const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
/// The core `Group` schema (RFC 7643 §4.2).
pub const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
/// The enterprise `User` extension (RFC 7643 §4.3): accepted and ignored.
pub const ENTERPRISE_USER_SCHEMA: &str =
    "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User";
/// The `ServiceProviderConfig` schema (RFC 7643 §5).
pub const SERVICE_PROVIDER_CONFIG_SCHEMA: &str =
    "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig";
/// The `ResourceType` schema (RFC 7643 §6).
pub const RESOURCE_TYPE_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:ResourceType";
/// The schema of the schema definitions themselves (RFC 7643 §7).
pub const SCHEMA_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Schema";
/// A list response (RFC 7644 §3.4.2).
pub const LIST_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
/// An error response (RFC 7644 §3.12).
pub const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
/// A `PATCH` request (RFC 7644 §3.5.2).
pub const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

/// The most resources one list response holds (`count` is capped to it), as the
/// `ServiceProviderConfig` announces (`filter.maxResults`).
pub const MAX_RESULTS: usize = 200;
/// The page size of a list request without `count`.
pub const DEFAULT_COUNT: usize = 100;
