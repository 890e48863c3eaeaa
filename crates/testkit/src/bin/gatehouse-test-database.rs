//! A fresh PostgreSQL database for a test that runs outside Rust (the contract fuzzer):
//! found or started exactly as for the Rust tests (see the crate's documentation), created,
//! its URL printed on one line of stdout; dropped again when stdin closes, so that it goes
//! with the process that asked for it, however that one ends.
#![allow(clippy::print_stdout)]

use std::io::{BufRead, Write};

fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("gatehouse-test-database: cannot start a runtime: {error}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let database = runtime.block_on(gatehouse_testkit::TestDatabase::create());
    let mut stdout = std::io::stdout();
    if writeln!(stdout, "{}", database.url())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return std::process::ExitCode::FAILURE;
    }
    // Wait for stdin to close (or any line), then drop the database.
    let _ = std::io::stdin().lock().lines().next();
    drop(database);
    std::process::ExitCode::SUCCESS
}
