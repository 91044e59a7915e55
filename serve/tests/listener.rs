//! The listener against clients that hold what they can (issue 32): idle connections from one
//! client are closed for another's, one client's connections are capped, headers are bounded, and
//! each request knows its client. Servers run in-process on loopback; clients bind addresses of
//! their own in 127.0.0.0/8 so that each is a client of its own. Every wait is bounded.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use kube_gang_serve::Source;
use kube_gang_serve::server::{self, ConnectionEvents, Limits};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A generous bound on any wait, so a broken limit fails the test instead of hanging it.
const BOUND: Duration = Duration::from_secs(20);

#[derive(Clone, Default)]
struct Closed(Arc<Mutex<Vec<&'static str>>>);

impl ConnectionEvents for Closed {
    fn closed(&self, reason: &'static str) {
        self.0.lock().unwrap().push(reason);
    }
}

impl Closed {
    fn count(&self, reason: &str) -> usize {
        self.0.lock().unwrap().iter().filter(|r| **r == reason).count()
    }
}

/// `/` answers the client's address as the server saw it; `/hold` answers once `release` is
/// notified (a request in flight as long as a test wants).
fn app(release: Arc<tokio::sync::Notify>) -> Router {
    Router::new()
        .route("/", get(|req: axum::extract::Request| async move { format!("{:?}\n", req.extensions().get::<Source>()) }))
        .route(
            "/hold",
            get(move || {
                let release = release.clone();
                async move {
                    release.notified().await;
                    "released\n"
                }
            }),
        )
}

struct Server {
    addr: SocketAddr,
    closed: Closed,
    release: Arc<tokio::sync::Notify>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start(limits: Limits) -> Server {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let closed = Closed::default();
    let release = Arc::new(tokio::sync::Notify::new());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let plain = |tcp| async move { io::Result::Ok(tcp) };
    tokio::spawn(server::serve(listener, plain, app(release.clone()), limits, closed.clone(), async {
        let _ = stopped.await;
    }));
    Server { addr, closed, release, stop: Some(stop) }
}

/// A TCP connection to `addr` from loopback address 127.0.0.`client`.
async fn connect(client: u8, addr: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::from(([127, 0, 0, client], 0))).unwrap();
    socket.connect(addr).await.unwrap()
}

/// One GET on a connection of its own, from 127.0.0.`client`: the whole response.
async fn get_from(client: u8, addr: SocketAddr, path: &str) -> String {
    let mut s = connect(client, addr).await;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(BOUND, s.read_to_string(&mut out)).await.expect("answered in time").unwrap();
    out
}

/// True when the server closes `s` (EOF or reset) within `BOUND`.
async fn closed_by_server(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 256];
    tokio::time::timeout(BOUND, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    })
    .await
    .unwrap_or(false)
}

fn limits(max: usize, per_source: usize) -> Limits {
    Limits {
        max_connections: max,
        max_connections_per_source: per_source,
        header_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(60),
        ..Limits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_pool_closes_the_busiest_clients_idle_connection_for_a_new_client() {
    let server = start(limits(4, 4)).await;
    // Client 2 takes every slot with connections that send nothing.
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(connect(2, server.addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Client 3 is served at once, and sees its own address.
    let answer = get_from(3, server.addr, "/").await;
    assert!(answer.starts_with("HTTP/1.1 200") && answer.contains("127.0.0.3"), "{answer}");
    // One of client 2's was closed for it.
    let mut closed = 0;
    for s in &mut idle {
        if tokio::time::timeout(Duration::from_millis(200), closed_by_server(s)).await.unwrap_or(false) {
            closed += 1;
        }
    }
    assert!(closed >= 1, "no idle connection was closed");
    assert!(server.closed.count("evicted") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_with_a_request_in_flight_is_never_closed_for_another() {
    let server = start(limits(2, 2)).await;
    // Both slots hold a request in flight.
    let mut busy = Vec::new();
    for _ in 0..2 {
        let mut s = connect(2, server.addr).await;
        s.write_all(b"GET /hold HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        busy.push(s);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A new client waits (nothing to close) until a request ends.
    let waiting = tokio::spawn(get_from(3, server.addr, "/"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "a busy connection was closed for a new one");
    assert_eq!(server.closed.count("evicted"), 0);
    server.release.notify_waiters();
    let mut head = [0u8; 12];
    busy[0].read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200", "the held request was answered, not cut off");
    let answer = tokio::time::timeout(BOUND, waiting).await.unwrap().unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_more_than_its_share_of_connections() {
    let server = start(limits(64, 3)).await;
    // Client 2 opens three idle connections, then more: each one beyond its share is closed at
    // once, and the three it has stay.
    let mut first = Vec::new();
    for _ in 0..3 {
        first.push(connect(2, server.addr).await);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..5 {
        let mut more = connect(2, server.addr).await;
        assert!(closed_by_server(&mut more).await);
    }
    assert_eq!(server.closed.count("source_limit"), 5);
    for s in &mut first {
        let mut buf = [0u8; 8];
        assert!(
            tokio::time::timeout(Duration::from_millis(50), s.read(&mut buf)).await.is_err(),
            "still open"
        );
    }
    // Another client is served meanwhile, on the same pool.
    assert!(get_from(5, server.addr, "/").await.starts_with("HTTP/1.1 200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_ports_headers_are_bounded() {
    let server = start(Limits::default().probes()).await;
    let mut s = connect(2, server.addr).await;
    let header = format!("X-Large: {}\r\n", "a".repeat(20 * 1024));
    let _ = s.write_all(format!("GET / HTTP/1.1\r\nHost: x\r\n{header}\r\n").as_bytes()).await;
    let mut out = Vec::new();
    let _ = tokio::time::timeout(BOUND, s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    // An ordinary probe is answered.
    assert!(get_from(3, server.addr, "/").await.starts_with("HTTP/1.1 200"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_opening_connections_faster_than_its_rate_has_the_rest_closed() {
    let server = start(Limits { handshakes_per_second: 1, handshake_burst: 3, ..limits(64, 64) }).await;
    let mut opened = Vec::new();
    for _ in 0..6 {
        opened.push(connect(2, server.addr).await);
    }
    let mut closed = 0;
    for s in &mut opened {
        if tokio::time::timeout(Duration::from_millis(300), closed_by_server(s)).await.unwrap_or(false) {
            closed += 1;
        }
    }
    assert!(closed >= 2, "{closed} of 6 closed: the burst is 3 (one more may have come in by the rate)");
    assert!(server.closed.count("handshake_rate") >= 2);
    // Another client's connections are its own to open.
    assert!(get_from(3, server.addr, "/").await.starts_with("HTTP/1.1 200"));
}
