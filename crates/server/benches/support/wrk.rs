//! wrk's report, read: what `just bench` and `just bench-cluster` both take from it.
#![allow(dead_code)]

/// One wrk run.
pub struct WrkResult {
    pub requests_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Answers that were not 2xx/3xx, and socket errors: a healthy row has none.
    pub errors: Vec<String>,
}

/// Reads wrk's `--latency` report; `None` when a figure is missing.
pub fn parse_wrk(text: &str) -> Option<WrkResult> {
    let mut requests_per_sec = None;
    let (mut p50_ms, mut p99_ms) = (None, None);
    let mut errors = Vec::new();
    for line in text.lines().map(str::trim) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("Requests/sec:"), Some(value)) => requests_per_sec = value.parse().ok(),
            (Some("50%"), Some(value)) => p50_ms = duration_ms(value),
            (Some("99%"), Some(value)) => p99_ms = duration_ms(value),
            _ if line.starts_with("Non-2xx or 3xx responses:") => {
                errors.push(line.replace("Non-2xx or 3xx responses:", "non-2xx:"));
            }
            _ if line.starts_with("Socket errors:") => errors.push(line.to_owned()),
            _ => {}
        }
    }
    Some(WrkResult {
        requests_per_sec: requests_per_sec?,
        p50_ms: p50_ms?,
        p99_ms: p99_ms?,
        errors,
    })
}

/// wrk's `812.00us`, `1.23ms`, `2.00s`, `1.00m` in milliseconds.
fn duration_ms(value: &str) -> Option<f64> {
    let split = value.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = value.split_at(split);
    let number: f64 = number.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(number * factor)
}
