//! Logs: `tracing` to stderr, filtered by `GATEHOUSE_LOG` (or `RUST_LOG`), JSON lines when
//! `GATEHOUSE_LOG_FORMAT=json`.

use tracing_subscriber::{fmt, prelude::*, EnvFilter};

pub fn init() {
    let filter = std::env::var("GATEHOUSE_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_owned());
    let filter = EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info"));
    let json = std::env::var("GATEHOUSE_LOG_FORMAT").is_ok_and(|f| f == "json");
    let registry = tracing_subscriber::registry().with(filter);
    // A second init (tests) is harmless: the first subscriber stays.
    let _ = if json {
        registry
            .with(fmt::layer().json().with_writer(std::io::stderr))
            .try_init()
    } else {
        registry
            .with(fmt::layer().with_writer(std::io::stderr))
            .try_init()
    };
}
