//! What a webhook receiver got, read: each delivery once, and its latency from the event's
//! commit (`just bench` and `just bench-tenants` both use it).
#![allow(dead_code)]

use gatehouse_delivery::test_receiver::ReceivedRequest;
use gatehouse_domain::model::timestamp;
use serde_json::Value;
use time::OffsetDateTime;

/// Each delivery once (by `X-Service-Delivery-Id`), at its first arrival.
pub fn first_arrivals(requests: &[ReceivedRequest]) -> Vec<&ReceivedRequest> {
    let mut seen = std::collections::HashSet::new();
    requests
        .iter()
        .filter(|request| seen.insert(request.header("x-service-delivery-id").map(str::to_owned)))
        .collect()
}

/// Milliseconds from the event's commit (the payload's `timestamp`) to the delivery's arrival;
/// `None` for a body that does not say.
pub fn commit_to_receipt_ms(request: &ReceivedRequest) -> Option<f64> {
    let payload: Value = serde_json::from_slice(&request.body).ok()?;
    let committed = timestamp::parse(payload["timestamp"].as_str()?).ok()?;
    let received = OffsetDateTime::from(request.received_at);
    let micros = (received - committed).whole_microseconds();
    Some(micros as f64 / 1000.0)
}
