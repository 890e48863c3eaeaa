//! API tests: the real server on 127.0.0.1:0, on SQLite and on PostgreSQL, spoken to over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod accounts;
mod admission;
mod api_keys;
mod applications;
mod audit;
mod brute_force;
mod consent;
mod control;
mod domains;
mod errors;
mod health;
mod invitation_page;
mod limits;
mod links;
mod members;
mod metrics;
mod mfa;
mod oauth;
mod oidc;
mod org_tokens;
mod organizations;
mod ownership;
mod permissions;
mod pkce;
mod policies;
mod races;
mod rate_limits;
mod roles;
mod rules;
mod saml;
mod scim;
mod service_accounts;
mod webhooks;
