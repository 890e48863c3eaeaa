//! A panic in a handler is caught: the client gets `500 {detail}` naming its request id, the
//! panic is counted, and the worker that ran it serves on. The middleware stack is the
//! server's (request ids outside, panics caught inside them), served by a real actix-web
//! server with a single worker on 127.0.0.1:0, spoken to over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use actix_web::{middleware::from_fn, web, App, HttpResponse, HttpServer};
use gatehouse_api::{catch_panics, json_errors, request_id, PanicCount};
use serde_json::Value;

async fn boom() -> HttpResponse {
    let stages: Vec<u8> = Vec::new();
    // A bug as it would happen: an index out of bounds.
    HttpResponse::Ok().body(format!("{}", stages[3]))
}

async fn fine() -> HttpResponse {
    HttpResponse::Ok().body("fine")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_answers_500_with_its_request_id_and_the_worker_lives_on() {
    let panics = web::Data::new(PanicCount::default());
    let shared = panics.clone();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(shared.clone())
            .wrap(from_fn(json_errors))
            .wrap(from_fn(catch_panics))
            .wrap(from_fn(request_id))
            .route("/boom", web::get().to(boom))
            .route("/fine", web::get().to(fine))
    })
    // One worker: were it lost to the panic, nothing below would be answered by it.
    .workers(1)
    .bind("127.0.0.1:0")
    .unwrap();
    let base = format!("http://{}", server.addrs()[0]);
    let running = server.run();
    let handle = running.handle();
    tokio::spawn(running);
    let client = reqwest::Client::new();

    let fine_before = client.get(format!("{base}/fine")).send().await.unwrap();
    assert_eq!(fine_before.status(), 200);

    for round in 1..=3_u64 {
        let answer = client
            .get(format!("{base}/boom"))
            .header("X-Request-ID", format!("boom-{round}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 500);
        assert_eq!(
            answer.headers()["x-request-id"].to_str().unwrap(),
            format!("boom-{round}")
        );
        assert!(answer.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
        let body: Value = answer.json().await.unwrap();
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("boom-{round}")), "{detail}");
        assert!(
            !detail.contains("index out of bounds"),
            "no internals: {detail}"
        );
        assert_eq!(panics.get(), round, "each panic is counted");
    }

    // The one worker still serves, on a new connection and many at once.
    let answers = futures_util::future::join_all((0..20).map(|_| {
        let url = format!("{base}/fine");
        async move { reqwest::Client::new().get(url).send().await.unwrap() }
    }))
    .await;
    for answer in answers {
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.text().await.unwrap(), "fine");
    }
    handle.stop(true).await;
}
