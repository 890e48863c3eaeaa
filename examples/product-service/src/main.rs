//! `cargo run -p gatehouse-example-product`: the example product service, configured from
//! `GATEHOUSE_URL` (default `http://127.0.0.1:8080`, what `just run` serves), `WEBHOOK_SECRET` (required) and `PORT` (default 8090).

use actix_web::{App, HttpServer};
use gatehouse_example_product::{configure, Config, State};

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let config = Config {
        gatehouse_url: std::env::var("GATEHOUSE_URL")
            .unwrap_or_else(|_| "http://127.0.0.1:8080".to_owned()),
        jwks_url: std::env::var("GATEHOUSE_JWKS_URL").ok(),
        webhook_secret: std::env::var("WEBHOOK_SECRET")
            .ok()
            .filter(|secret| !secret.is_empty())
            .ok_or_else(|| {
                std::io::Error::other("WEBHOOK_SECRET is required: the webhook endpoint's secret")
            })?,
    };
    let port: u16 = match std::env::var("PORT") {
        Ok(port) => port.parse().map_err(std::io::Error::other)?,
        Err(_) => 8090,
    };
    let state = State::new(&config).map_err(std::io::Error::other)?;
    eprintln!(
        "example product service on http://127.0.0.1:{port}, trusting {}",
        config.gatehouse_url
    );
    HttpServer::new(move || App::new().configure(|app| configure(app, state.clone())))
        .bind(("127.0.0.1", port))?
        .run()
        .await
}
