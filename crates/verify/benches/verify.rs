//! What `Verifier::verify` costs a product per request, on a cached key set, beside a bare
//! `jsonwebtoken::decode` of the same token with the same key (the RS256 signature check,
//! which both pay): the difference is the verifier's own work (the header, the cache lookup,
//! the typed claims).
//!
//! `just bench-verify`, or `cargo bench -p gatehouse-verify --bench verify -- [rounds]`
//! (default 20,000 verifications a side, the best of 5 runs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::{hint::black_box, time::Instant};

use gatehouse_verify::{testing::TestIssuer, Verifier};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

const RUNS: usize = 5;

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find(|arg| !arg.starts_with('-'))
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(20_000);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let issuer = TestIssuer::start("https://id.example.test").await.unwrap();
        let verifier = Verifier::builder(issuer.issuer())
            .jwks_url(issuer.jwks_url())
            .build()
            .unwrap();
        let token = issuer.sign(&issuer.claims());
        verifier.verify(&token).await.unwrap();

        let jwk = issuer.signing_key().jwk().clone();
        let key = DecodingKey::from_rsa_components(
            jwk["n"].as_str().unwrap(),
            jwk["e"].as_str().unwrap(),
        )
        .unwrap();
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[issuer.issuer()]);
        validation.set_audience(&["gatehouse"]);
        validation.leeway = 5;

        let mut bare = f64::MAX;
        let mut verified = f64::MAX;
        for _ in 0..RUNS {
            let started = Instant::now();
            for _ in 0..rounds {
                black_box(
                    jsonwebtoken::decode::<Value>(black_box(&token), &key, &validation).unwrap(),
                );
            }
            bare = bare.min(started.elapsed().as_secs_f64() / rounds as f64);

            let started = Instant::now();
            for _ in 0..rounds {
                black_box(verifier.verify(black_box(&token)).await.unwrap());
            }
            verified = verified.min(started.elapsed().as_secs_f64() / rounds as f64);
        }
        assert_eq!(issuer.fetches(), 1, "the key set stayed cached");
        println!("{rounds} verifications a side, the best of {RUNS} runs, one thread:");
        println!("  jsonwebtoken::decode (bare)   {:>8.2} µs", bare * 1e6);
        println!("  Verifier::verify (cached)     {:>8.2} µs", verified * 1e6);
        println!(
            "  the verifier's own work       {:>8.2} µs ({:+.1}%)",
            (verified - bare) * 1e6,
            (verified / bare - 1.0) * 100.0
        );
    });
}
