//! An N-node JetStream cluster on loopback.

use std::ffi::OsString;

use crate::binary::nats_server_binary;
use crate::process::{Process, free_ports};
use crate::wait::unique_name;

/// How many times a cluster start picks new ports when another process took
/// one first.
const START_ATTEMPTS: usize = 3;

/// A JetStream cluster of `nats-server` processes on loopback, each with its
/// own store directory and a `server_name` of `n0`, `n1`, ... Ready once every
/// node is current with the meta leader and the meta leader can place a
/// stream on every running node. Killed on `Drop`.
///
/// ```no_run
/// # async fn demo() {
/// let mut cluster = abi_test_support::NatsCluster::start(3).await;
/// let urls = cluster.urls(); // connect with all of them
/// cluster.stop_node(0); // e.g. the stream leader, found via stream info
/// cluster.start_node(0).await;
/// # let _ = urls;
/// # }
/// ```
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<Process>,
}

impl NatsCluster {
    /// Starts `size` nodes and waits (up to 30 s each) until all are healthy
    /// and current with an elected meta leader, and (up to 30 s) until a
    /// stream with `size` replicas can be placed.
    ///
    /// # Panics
    ///
    /// When `size` is 0, `nats-server` cannot be found (run
    /// `./scripts/setup.sh`) or the cluster does not form.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future kills the processes being started.
    pub async fn start(size: usize) -> Self {
        Self::start_with_args(size, &[]).await
    }

    /// As [`start`](Self::start), but the nodes do not tell clients about
    /// each other (`--no_advertise`): a client knows only the servers it was
    /// given, so it fails over to another node only when its seed list names
    /// one. Tests of seed lists use this; with advertising on, a client given
    /// one URL learns the others from the first node it reaches.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    ///
    /// # Cancel safety
    ///
    /// As [`start`](Self::start).
    pub async fn start_unadvertised(size: usize) -> Self {
        Self::start_with_args(size, &["--no_advertise=true"]).await
    }

    /// Starts `size` nodes with `node_args` added to each node's command line.
    async fn start_with_args(size: usize, node_args: &[&str]) -> Self {
        assert!(size > 0, "a cluster needs at least one node");
        let bin = nats_server_binary();
        let mut failures = Vec::new();
        for _ in 0..START_ATTEMPTS {
            let cluster_name = unique_name("abi_cluster");
            // Per node: client, monitoring and route ports.
            let ports = free_ports(3 * size);
            let route_port = |i: usize| ports[3 * i + 2];
            let mut nodes: Vec<Process> = (0..size)
                .map(|i| {
                    let routes = (0..size)
                        .filter(|&j| j != i)
                        .map(|j| format!("nats://127.0.0.1:{}", route_port(j)))
                        .collect::<Vec<_>>()
                        .join(",");
                    let mut args: Vec<OsString> = vec![
                        "--server_name".into(),
                        Self::server_name(i).into(),
                        "--cluster_name".into(),
                        cluster_name.clone().into(),
                        "--cluster".into(),
                        format!("nats://127.0.0.1:{}", route_port(i)).into(),
                    ];
                    if !routes.is_empty() {
                        args.extend(["--routes".into(), routes.into()]);
                    }
                    args.extend(node_args.iter().map(OsString::from));
                    Process::new(bin.clone(), ports[3 * i], ports[3 * i + 1], args)
                })
                .collect();
            for node in &mut nodes {
                node.spawn();
            }
            let mut healthy = true;
            for node in &mut nodes {
                if let Err(e) = node.wait_healthy().await {
                    failures.push(e);
                    healthy = false;
                    break;
                }
            }
            if healthy {
                let cluster = Self { nodes };
                match cluster.wait_placeable().await {
                    Ok(()) => return cluster,
                    Err(e) => failures.push(e),
                }
            }
        }
        panic!("nats cluster did not form:\n{}", failures.join("\n---\n"));
    }

    /// The `server_name` of node `i` (`n<i>`), as stream info reports leaders.
    pub fn server_name(i: usize) -> String {
        format!("n{i}")
    }

    /// The index of the node called `server_name`, if it is one of ours.
    pub fn node_index(&self, server_name: &str) -> Option<usize> {
        (0..self.nodes.len()).find(|&i| Self::server_name(i) == server_name)
    }

    /// How many nodes the cluster has (running or not).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a cluster has at least one node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Client URLs of every node, `nats://127.0.0.1:<port>`.
    pub fn urls(&self) -> Vec<String> {
        (0..self.nodes.len()).map(|i| self.url(i)).collect()
    }

    /// Client URL of node `i`.
    ///
    /// # Panics
    ///
    /// When `i` is out of range.
    pub fn url(&self, i: usize) -> String {
        format!("nats://127.0.0.1:{}", self.nodes[i].port)
    }

    /// Whether node `i` is running.
    ///
    /// # Panics
    ///
    /// When `i` is out of range.
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].is_running()
    }

    /// Kills node `i` abruptly (SIGKILL). Its store stays for
    /// [`start_node`](Self::start_node).
    ///
    /// # Panics
    ///
    /// When `i` is out of range.
    pub fn stop_node(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Starts node `i` again (same ports and store; killed first if running)
    /// and waits until it is healthy and current with the meta leader.
    ///
    /// # Panics
    ///
    /// When `i` is out of range or the node does not come back within 30 s.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the node starting; it is still killed on
    /// `Drop`.
    pub async fn start_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        node.kill();
        node.spawn();
        if let Err(e) = node.wait_healthy().await {
            panic!("cluster node {i} did not restart: {e}");
        }
        if let Err(e) = self.wait_placeable().await {
            panic!("cluster node {i} restarted but is not placeable: {e}");
        }
    }

    /// Waits (up to [`PLACEMENT_TIMEOUT`]) until the meta leader places a
    /// stream with one replica per running node: create a probe stream in
    /// memory, then delete it.
    ///
    /// `/healthz` says a node is current with the meta leader, but the
    /// leader counts a peer offline until it has heard that peer's own
    /// statistics; until then an R3 create answers "no suitable peers for
    /// placement, peer offline" (seen in CI right after a cluster formed).
    ///
    /// # Errors
    ///
    /// The last refusal when no probe was placed in time.
    async fn wait_placeable(&self) -> Result<(), String> {
        use async_nats::jetstream::stream::{Config, StorageType};
        let running: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.is_running(i))
            .collect();
        let Some(&first) = running.first() else {
            return Ok(());
        };
        let name = unique_name("abi_placement_probe");
        let config = Config {
            name: name.clone(),
            subjects: vec![format!("{name}.>")],
            storage: StorageType::Memory,
            num_replicas: running.len(),
            ..Default::default()
        };
        let deadline = tokio::time::Instant::now() + PLACEMENT_TIMEOUT;
        let mut last = String::from("no attempt");
        while tokio::time::Instant::now() < deadline {
            let attempt = tokio::time::timeout(MONITOR_TIMEOUT, async {
                let client = async_nats::connect(self.url(first))
                    .await
                    .map_err(|e| e.to_string())?;
                let context = async_nats::jetstream::new(client);
                context
                    .create_stream(config.clone())
                    .await
                    .map_err(|e| e.to_string())?;
                context
                    .delete_stream(&name)
                    .await
                    .map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            })
            .await;
            match attempt {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => last = e,
                Err(_) => last = format!("no answer within {MONITOR_TIMEOUT:?}"),
            }
            tokio::time::sleep(PLACEMENT_RETRY).await;
        }
        Err(format!(
            "no R{} stream placed within {PLACEMENT_TIMEOUT:?}: {last}",
            running.len()
        ))
    }
}

/// How long a started cluster may take to place a stream on every node.
const PLACEMENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// The pause between two placement probes.
const PLACEMENT_RETRY: std::time::Duration = std::time::Duration::from_millis(100);

/// How long one monitoring request (or placement probe) may take.
const MONITOR_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

impl NatsCluster {
    /// Monitoring URL of node `i`, `http://127.0.0.1:<port>` (`/connz`,
    /// `/jsz`, `/healthz`, ...).
    ///
    /// # Panics
    ///
    /// When `i` is out of range.
    pub fn monitor_url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.nodes[i].http_port)
    }

    /// The names of the client connections node `i` has open now, from its
    /// `/connz` (unnamed clients show as `""`). Empty when the node is not
    /// running or does not answer.
    ///
    /// # Panics
    ///
    /// When `i` is out of range.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads `/connz`; dropped, the blocking GET still finishes on the
    /// blocking pool (within its 2 s timeouts) and its answer is discarded.
    pub async fn client_names(&self, i: usize) -> Vec<String> {
        if !self.is_running(i) {
            return Vec::new();
        }
        let port = self.nodes[i].http_port;
        // Blocking std I/O on the blocking pool, like the health probe, so
        // a paused tokio clock neither times it out early nor advances.
        let body = tokio::task::spawn_blocking(move || monitor_get(port, "/connz?limit=1024"))
            .await
            .ok()
            .flatten();
        let Some(body) = body else {
            return Vec::new();
        };
        let Ok(connz) = serde_json::from_str::<serde_json::Value>(&body) else {
            return Vec::new();
        };
        connz["connections"]
            .as_array()
            .map(|connections| {
                connections
                    .iter()
                    .map(|c| c["name"].as_str().unwrap_or_default().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The running node a client called `client_name` (its NATS connect
    /// name) is connected to now, asking each node's `/connz` once; `None`
    /// while it is connected nowhere (e.g. reconnecting). Poll it with
    /// [`wait_until`](crate::wait_until) to wait for a (re)connection.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads, as [`NatsCluster::client_names`].
    pub async fn connected_node(&self, client_name: &str) -> Option<usize> {
        for i in 0..self.nodes.len() {
            if self
                .client_names(i)
                .await
                .iter()
                .any(|name| name == client_name)
            {
                return Some(i);
            }
        }
        None
    }
}

/// `GET path` on a monitoring port (HTTP/1.0, so the server closes after the
/// body): the body when the answer is a 200.
fn monitor_get(http_port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], http_port));
    let mut stream = std::net::TcpStream::connect_timeout(&addr, MONITOR_TIMEOUT).ok()?;
    stream.set_read_timeout(Some(MONITOR_TIMEOUT)).ok()?;
    stream.set_write_timeout(Some(MONITOR_TIMEOUT)).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let response = String::from_utf8(response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let ok = head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200");
    ok.then(|| body.to_owned())
}
