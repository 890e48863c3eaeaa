//! The metrics, as Prometheus reads them: scraped from `/control/metrics` (and from `/metrics` on
//! `GATEHOUSE_METRICS_BIND`) and parsed by the official Python client's text parser.

use std::collections::HashMap;

use reqwest::Method;
use serde_json::{json, Value};

use crate::{
    helpers::{detail_of, json_of, python, Backend, Options, TestApp, PASSWORD},
    webhooks::{app_with_receiver, create_endpoint},
};

/// One sample of a scrape: its name (a histogram's `_bucket`, `_sum` and `_count` apart), labels
/// and value.
#[derive(Debug)]
struct Sample {
    name: String,
    labels: HashMap<String, String>,
    value: f64,
}

/// A scrape as `prometheus_client.parser` reads it: the families' names and types, and every
/// sample. The parser refuses text that is not the exposition format.
struct Scrape {
    families: HashMap<String, String>,
    samples: Vec<Sample>,
}

impl Scrape {
    async fn parse(text: &str) -> Self {
        const PARSE: &str = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
families, samples = {}, []
for family in text_string_to_metric_families(sys.stdin.read()):
    families[family.name] = family.type
    for s in family.samples:
        samples.append({"name": s.name, "labels": s.labels, "value": s.value})
print(json.dumps({"families": families, "samples": samples}))
"#;
        let mut child = tokio::process::Command::new(python())
            .args(["-c", PARSE])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("python with prometheus_client (scripts/test installs it)");
        {
            use tokio::io::AsyncWriteExt;
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(text.as_bytes()).await.unwrap();
        }
        let output = child.wait_with_output().await.unwrap();
        assert!(
            output.status.success(),
            "the Prometheus parser refused the scrape: {}\n{text}",
            String::from_utf8_lossy(&output.stderr)
        );
        let parsed: Value = serde_json::from_slice(&output.stdout).unwrap();
        let families = parsed["families"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(name, kind)| (name.clone(), kind.as_str().unwrap().to_owned()))
            .collect();
        let samples = parsed["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| Sample {
                name: s["name"].as_str().unwrap().to_owned(),
                labels: s["labels"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
                    .collect(),
                value: s["value"].as_f64().unwrap(),
            })
            .collect();
        Self { families, samples }
    }

    /// The sum of the samples named so whose labels include these.
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.samples
            .iter()
            .filter(|s| s.name == name)
            .filter(|s| {
                labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|s| s.value)
            .sum()
    }
}

async fn scrape(app: &TestApp) -> (Scrape, String) {
    let response = app.as_operator(Method::GET, "/control/metrics", None).await;
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let text = response.text().await.unwrap();
    (Scrape::parse(&text).await, text)
}

async fn counters_move_with_traffic(backend: Backend) {
    let (app, receiver) = app_with_receiver(backend).await;
    // The request families have series once a request was answered.
    reqwest::get(app.url("/livez")).await.unwrap();
    let (before, _) = scrape(&app).await;
    for (family, kind) in [
        ("gatehouse_http_requests", "counter"),
        ("gatehouse_http_request_duration_seconds", "histogram"),
        ("gatehouse_sign_ins", "counter"),
        ("gatehouse_webhook_deliveries", "counter"),
        ("gatehouse_webhook_delivery_latency_seconds", "histogram"),
        ("gatehouse_webhook_deliveries_pending", "gauge"),
        ("gatehouse_store_connections", "gauge"),
        ("gatehouse_rate_limited", "counter"),
    ] {
        assert_eq!(
            before.families.get(family).map(String::as_str),
            Some(kind),
            "{family} in {:?}",
            before.families
        );
    }
    let pools = before.value("gatehouse_store_connections", &[("state", "max")]);
    assert!(pools >= 1.0, "the pools report their size");

    // Traffic: a sign-up, a good and a bad password, reads of an organization by id, and a
    // delivered webhook.
    let ada = app.logged_in("metrics-ada@example.com").await;
    let org = ada.organization_id.clone();
    let wrong = app
        .post_json(
            "/api/v1/auth/login",
            &json!({ "email": ada.email, "password": "not the password" }),
        )
        .await;
    detail_of(wrong, 401).await;
    let right = app
        .post_json(
            "/api/v1/auth/login",
            &json!({ "email": ada.email, "password": PASSWORD }),
        )
        .await;
    json_of(right, 200).await;
    for _ in 0..3 {
        let path = format!("/api/v1/organizations/{org}");
        json_of(
            app.send_as(Method::GET, &ada.access_token, &path, None)
                .await,
            200,
        )
        .await;
    }
    // A route two scopes deep is counted under its whole template.
    let members_path = format!("/api/v1/organizations/{org}/members");
    json_of(
        app.send_as(Method::GET, &ada.access_token, &members_path, None)
            .await,
        200,
    )
    .await;
    let endpoint = create_endpoint(
        &app,
        &ada.access_token,
        &org,
        &receiver.url("/metrics"),
        json!(["user.updated"]),
    )
    .await;
    json_of(
        app.send_as(
            Method::PATCH,
            &ada.access_token,
            "/api/v1/users/me",
            Some(json!({ "full_name": "Ada Metrics" })),
        )
        .await,
        200,
    )
    .await;
    receiver
        .wait_for(1, std::time::Duration::from_secs(10))
        .await;
    let not_found = reqwest::get(app.url(&format!("/no/such/{org}")))
        .await
        .unwrap();
    assert_eq!(not_found.status(), 404);

    // The delivery is counted once its attempt is recorded.
    let mut after = scrape(&app).await;
    for _ in 0..50 {
        if after.0.value(
            "gatehouse_webhook_deliveries_total",
            &[("outcome", "delivered")],
        ) >= 1.0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        after = scrape(&app).await;
    }
    let (after, text) = after;

    let read = [
        ("method", "GET"),
        ("route", "/api/v1/organizations/{id}"),
        ("status", "200"),
    ];
    assert_eq!(
        after.value("gatehouse_http_requests_total", &read)
            - before.value("gatehouse_http_requests_total", &read),
        3.0,
        "{text}"
    );
    assert!(
        after.value(
            "gatehouse_http_request_duration_seconds_count",
            &[("route", "/api/v1/organizations/{id}")]
        ) >= 3.0
    );
    let members = [
        ("method", "GET"),
        ("route", "/api/v1/organizations/{id}/members"),
        ("status", "200"),
    ];
    assert_eq!(
        after.value("gatehouse_http_requests_total", &members)
            - before.value("gatehouse_http_requests_total", &members),
        1.0,
        "{text}"
    );
    assert!(
        after.value(
            "gatehouse_http_requests_total",
            &[("route", "unmatched"), ("status", "404")]
        ) >= 1.0
    );
    for (outcome, at_least) in [("success", 1.0), ("failure", 1.0)] {
        let labels = [("method", "password"), ("outcome", outcome)];
        assert!(
            after.value("gatehouse_sign_ins_total", &labels)
                - before.value("gatehouse_sign_ins_total", &labels)
                >= at_least,
            "{outcome}: {text}"
        );
    }
    assert_eq!(
        after.value(
            "gatehouse_webhook_deliveries_total",
            &[("outcome", "delivered")]
        ),
        1.0
    );
    assert_eq!(
        after.value("gatehouse_webhook_delivery_latency_seconds_count", &[]),
        1.0
    );
    assert!(after.value("gatehouse_webhook_delivery_latency_seconds_sum", &[]) > 0.0);

    // An id never becomes a label: not the organization's, the user's, the endpoint's.
    let endpoint_id = endpoint["id"].as_str().unwrap();
    for sample in &after.samples {
        for value in sample.labels.values() {
            for id in [org.as_str(), ada.user_id.as_str(), endpoint_id] {
                assert!(!value.contains(id), "{id} in a label of {sample:?}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_with_traffic_sqlite() {
    counters_move_with_traffic(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_move_with_traffic_postgres() {
    counters_move_with_traffic(Backend::Postgres).await;
}

async fn refusals_and_the_metrics_listener(backend: Backend) {
    let app = TestApp::spawn_with(
        backend,
        Options {
            rate_limits: Some("free=3"),
            metrics_bind: true,
            ..Options::default()
        },
    )
    .await;
    for _ in 0..5 {
        reqwest::get(app.url("/.well-known/jwks.json"))
            .await
            .unwrap();
    }
    // The metrics listener needs no token: it is the operator's own address.
    let metrics = app.metrics_url().expect("GATEHOUSE_METRICS_BIND was set");
    let response = reqwest::get(&metrics).await.unwrap();
    assert_eq!(response.status(), 200);
    let scrape = Scrape::parse(&response.text().await.unwrap()).await;
    assert!(
        scrape.value("gatehouse_rate_limited_total", &[("caller", "anonymous")]) >= 2.0,
        "the 429s are counted"
    );
    assert!(
        scrape.value(
            "gatehouse_http_requests_total",
            &[("route", "/.well-known/jwks.json"), ("status", "429")]
        ) >= 2.0
    );
    // The listener serves nothing else.
    let other = metrics.replace("/metrics", "/.well-known/jwks.json");
    assert_eq!(reqwest::get(&other).await.unwrap().status(), 404);
}

#[tokio::test]
async fn refusals_are_counted_and_the_metrics_listener_serves_them_sqlite() {
    refusals_and_the_metrics_listener(Backend::Sqlite).await;
}

#[tokio::test]
async fn refusals_are_counted_and_the_metrics_listener_serves_them_postgres() {
    refusals_and_the_metrics_listener(Backend::Postgres).await;
}
