//! Logs: `tracing` to stderr, filtered by `GATEHOUSE_LOG` (or `RUST_LOG`), JSON lines when
//! `GATEHOUSE_LOG_FORMAT=json`. Panics are logged there too, at error level.

use tracing_subscriber::{fmt, prelude::*, EnvFilter};

pub fn init() {
    log_panics();
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

/// Sends every panic (a caught handler panic, or one in a background task) to the log as an
/// error line, in the log's format, instead of the bare text the default hook prints. The line
/// keeps the default's words, "thread '…' panicked at …", which log alerts and CI look for.
fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let name = thread.name().unwrap_or("<unnamed>");
        let location = info.location().map(ToString::to_string).unwrap_or_default();
        let message = gatehouse_api::panic_message(info.payload());
        // Captured when RUST_BACKTRACE (or RUST_LIB_BACKTRACE) asks for it, as by default.
        let backtrace = std::backtrace::Backtrace::capture();
        tracing::error!(
            thread = name,
            %location,
            panic = message,
            %backtrace,
            "thread '{name}' panicked at {location}: {message}"
        );
    }));
}
