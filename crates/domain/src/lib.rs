//! Gatehouse's domain: what an identity, organization and webhook service *is*, free of how it is
//! served or stored.
//!
//! - [`model`]: value types that parse instead of validate. Once a value is an [`model::Email`]
//!   or a [`model::Slug`], nothing downstream checks it again.
//! - [`ports`]: the traits the use cases need from the outside world (stores, clock, randomness,
//!   password hashing, token signing). Adapters in other crates implement them.
//! - [`service`]: the use cases, written against the ports only.
//!
//! This crate depends on no web framework, database driver or async runtime; CI proves it.

pub mod model;
pub mod ports;
pub mod service;
