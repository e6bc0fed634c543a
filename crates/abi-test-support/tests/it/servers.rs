//! The helpers against real processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use abi_test_support::{NatsCluster, NatsServer};

fn connectable(url: &str) -> bool {
    let addr = url.trim_start_matches("nats://");
    std::net::TcpStream::connect(addr).is_ok()
}

#[tokio::test]
async fn server_starts_restarts_and_stops() {
    let mut server = NatsServer::start().await;
    assert!(connectable(&server.url()));
    let port = server.port();
    let store = server.store_dir();
    server.restart().await;
    assert_eq!(server.port(), port);
    assert_eq!(server.store_dir(), store);
    assert!(store.is_dir(), "JetStream store dir exists after start");
    assert!(connectable(&server.url()));
    server.stop();
    assert!(!server.is_running());
    assert!(!connectable(&server.url()));
}

#[tokio::test]
async fn cluster_forms_and_nodes_come_back() {
    let mut cluster = NatsCluster::start(3).await;
    assert_eq!(cluster.urls().len(), 3);
    assert!(cluster.urls().iter().all(|u| connectable(u)));
    assert_eq!(cluster.node_index("n2"), Some(2));
    cluster.stop_node(1);
    assert!(!connectable(&cluster.url(1)));
    cluster.start_node(1).await;
    assert!(connectable(&cluster.url(1)));
    abi_test_support::wait_until(Duration::from_secs(5), || async { true })
        .await
        .unwrap();
}
