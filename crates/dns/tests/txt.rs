//! The adapter against a real DNS server on loopback.

use gatehouse_dns::{test_server::TestDnsServer, HickoryDns};
use gatehouse_domain::ports::DnsTxt;

#[tokio::test]
async fn the_txt_records_of_a_name_are_read_each_as_one_value() {
    let server = TestDnsServer::start().await.unwrap();
    server.set_txt(
        "_gatehouse-challenge.acme.example",
        &["ghdv_value", "v=spf1 -all"],
    );
    let dns = HickoryDns::at(server.address()).unwrap();

    let mut found = dns
        .txt_records("_gatehouse-challenge.acme.example")
        .await
        .unwrap();
    found.sort();
    assert_eq!(found, ["ghdv_value", "v=spf1 -all"]);
    // Names are not case-sensitive, and a final dot changes nothing.
    assert_eq!(
        dns.txt_records("_Gatehouse-Challenge.ACME.example.")
            .await
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn a_name_without_records_has_none_and_a_change_is_seen_at_once() {
    let server = TestDnsServer::start().await.unwrap();
    let dns = HickoryDns::at(server.address()).unwrap();
    let name = "_gatehouse-challenge.late.example";

    assert_eq!(dns.txt_records(name).await.unwrap(), Vec::<String>::new());
    // Nothing negative was cached: the record published now is found.
    server.set_txt(name, &["ghdv_now"]);
    assert_eq!(dns.txt_records(name).await.unwrap(), ["ghdv_now"]);
}

#[tokio::test]
async fn a_server_that_does_not_answer_is_an_error_not_an_empty_answer() {
    // A bound socket nobody reads: the question times out.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let dns = HickoryDns::at(silent.local_addr().unwrap()).unwrap();
    let started = std::time::Instant::now();
    let error = dns
        .txt_records("_gatehouse-challenge.acme.example")
        .await
        .unwrap_err();
    // Timed out: not refused, and not taken for a name without records.
    assert!(
        matches!(
            error.0.downcast_ref::<hickory_resolver::net::NetError>(),
            Some(hickory_resolver::net::NetError::Timeout)
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[tokio::test]
async fn an_answer_too_long_for_udp_is_read_over_tcp() {
    let server = TestDnsServer::start().await.unwrap();
    let name = "_gatehouse-challenge.many.example";
    let values: Vec<String> = (0..40).map(|i| format!("ghdv_{i:060}")).collect();
    for value in &values {
        server.add_txt(name, value);
    }
    let dns = HickoryDns::at(server.address()).unwrap();
    let mut found = dns.txt_records(name).await.unwrap();
    found.sort();
    assert_eq!(found, values);
}
