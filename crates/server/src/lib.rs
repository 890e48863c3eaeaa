//! The `gatehouse` binary's library: configuration, the server's adapters, wiring.

pub mod adapters;
pub mod app;
pub mod config;
pub mod secret_key;
pub mod telemetry;
pub mod worker;

pub use app::Application;
pub use config::Config;
