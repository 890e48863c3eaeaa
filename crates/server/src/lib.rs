//! The `gatehouse` binary's library: configuration, wiring of the domain to its adapters, the
//! CLI's commands.

pub mod app;
pub mod config;
pub mod connections;
pub mod secret_key;
pub mod telemetry;

pub use app::Application;
pub use config::Config;
