//! The webhook against hostile clients (issue 16): what a connection, a request and an accept error
//! may cost, shutdown, and metrics for refused requests. Servers run in-process on loopback with
//! short limits; every wait is bounded.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::Body;
use gang_webhook::lanes::Lane;
use gang_webhook::server::{self, ConnectionEvents, Limits, Listener};
use gang_webhook::{AppState, router};
use http::{Request, StatusCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tower::ServiceExt;

#[path = "support/mod.rs"]
mod support;
use support::{plain, start};

/// A generous bound on any wait, so a broken limit fails the test instead of hanging it.
const BOUND: Duration = Duration::from_secs(20);

async fn tls(port: u16, ca: &str) -> io::Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
    support::tls(port, ca.as_bytes()).await
}

const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1","operation":"CREATE","namespace":"ml","kind":{"group":"","version":"v1","kind":"ConfigMap"},"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"ml"}}}}"#;

fn request_head(len: usize, close: bool) -> String {
    format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {len}\r\n{}\r\n",
        if close { "Connection: close\r\n" } else { "" }
    )
}

/// Reads one HTTP/1.1 response with a Content-Length body; returns the head and body.
async fn read_response<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> (String, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).await.unwrap(), 1, "connection closed mid-response: {buf:?}");
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase().strip_prefix("content-length: ").map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0; len];
    s.read_exact(&mut body).await.unwrap();
    (head, String::from_utf8(body).unwrap())
}

/// True when the peer closes the connection (EOF or reset) before `BOUND`.
async fn closed_by_server<S: tokio::io::AsyncRead + Unpin>(s: &mut S) -> bool {
    let mut buf = [0u8; 1024];
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

async fn metrics(probe: u16) -> String {
    plain(probe, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap().1
}

/// Asserts every line of `lines` is in the metrics within `BOUND` (a count may land just after
/// the client saw its connection close), naming the lines missing from the last reading.
async fn assert_metrics(probe: u16, lines: &[&str]) {
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let text = metrics(probe).await;
        if lines.iter().all(|l| text.contains(l)) {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let missing: Vec<_> = lines.iter().filter(|l| !text.contains(*l)).collect();
            panic!("{missing:?} missing from\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn refused_requests_are_counted_too() {
    let state = AppState::default();
    let app = router(state.clone());
    let send = |req: Request<Body>| app.clone().oneshot(req);
    let res = send(Request::post("/nope").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(res.status(), StatusCode::NOT_FOUND);
    let res = send(Request::get("/validate").body(Body::empty()).unwrap()).await.unwrap();
    assert_eq!(res.status(), StatusCode::METHOD_NOT_ALLOWED);
    let big = vec![b' '; gang_webhook::BODY_LIMIT + 1];
    let res = send(Request::post("/mutate").body(Body::from(big)).unwrap()).await.unwrap();
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let res = send(Request::post("/validate").body(Body::from("{")).unwrap()).await.unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let text = state.metrics.encode();
    for line in [
        r#"gang_webhook_requests_total{hook="none",result="not_found"} 1"#,
        r#"gang_webhook_requests_total{hook="validate",result="method_not_allowed"} 1"#,
        r#"gang_webhook_requests_total{hook="mutate",result="too_large"} 1"#,
        r#"gang_webhook_requests_total{hook="validate",result="bad_request"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_body_gets_408_and_no_decision_slot() {
    let state = AppState::new(1, Duration::from_millis(300));
    let app = router(state.clone());
    let (mut tx, body) = futures::channel::mpsc::channel::<Result<bytes::Bytes, io::Error>>(1);
    tx.try_send(Ok(bytes::Bytes::from_static(b"{"))).unwrap();
    let req = Request::post("/validate").body(Body::from_stream(body)).unwrap();
    let res = tokio::time::timeout(BOUND, app.oneshot(req)).await.unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
    assert_eq!(state.lanes.available(Lane::Small), 1, "the slow client held no decision slot");
    assert!(
        state.metrics.encode().contains(r#"gang_webhook_requests_total{hook="validate",result="timeout"} 1"#)
    );
    drop(tx);
}

#[test]
fn by_default_big_objects_are_decided_on_half_the_cpus_and_small_ones_on_all() {
    let cpus = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    let state = AppState::new(0, Duration::from_secs(1));
    assert_eq!(state.lanes.available(Lane::Small), cpus);
    assert_eq!(state.lanes.available(Lane::Big), (cpus / 2).max(1));
    // --max-decisions sets both.
    let state = AppState::new(3, Duration::from_secs(1));
    assert_eq!((state.lanes.available(Lane::Small), state.lanes.available(Lane::Big)), (3, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn big_bodies_wait_for_reading_budget_before_being_read_and_small_ones_never_wait_for_them() {
    let mut state = AppState::new(1, Duration::from_millis(300));
    state.lanes = gang_webhook::lanes::Lanes::with_reading(1, 1, 1 << 20, 256 * 1024);
    let app = router(state.clone());
    // The reading budget held (as by clients trickling big bodies).
    let mut held = state.lanes.reserve_body(kube_gang_serve::Source::LOCAL, Some(256 * 1024)).await;
    held.grow(256 * 1024).await;
    assert_eq!(state.lanes.available_reading_kib(), 0);
    // A big body declared by Content-Length: never read, 503 within the request timeout. The body
    // channel is never written to: reading it would wait for the timeout and answer 408 instead.
    let (_tx, body) = futures::channel::mpsc::channel::<Result<bytes::Bytes, io::Error>>(1);
    let req = Request::post("/validate")
        .header("content-length", (100 * 1024).to_string())
        .body(Body::from_stream(body))
        .unwrap();
    let res = tokio::time::timeout(BOUND, app.clone().oneshot(req)).await.unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
    // A small one goes through meanwhile (a review that is not one: 400, but decided).
    let req = Request::post("/validate").header("content-length", "2").body(Body::from("{}")).unwrap();
    let res = tokio::time::timeout(BOUND, app.clone().oneshot(req)).await.unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    // A declared length over the limit: 413 at once, nothing reserved or read.
    let req = Request::post("/validate")
        .header("content-length", (gang_webhook::BODY_LIMIT + 1).to_string())
        .body(Body::empty())
        .unwrap();
    let res = tokio::time::timeout(BOUND, app.clone().oneshot(req)).await.unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::PAYLOAD_TOO_LARGE);
    drop(held);
    let text = state.metrics.encode();
    for line in [
        r#"gang_webhook_requests_total{hook="validate",result="overloaded"} 1"#,
        r#"gang_webhook_requests_total{hook="validate",result="too_large"} 1"#,
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_headers_are_cut_off_on_both_ports() {
    let server = start(&["--request-timeout", "1"]).await;
    // Probe port: half a request line, then nothing.
    let mut probe = tokio::net::TcpStream::connect(("127.0.0.1", server.probe)).await.unwrap();
    probe.write_all(b"GET /heal").await.unwrap();
    // Webhook port: a completed handshake, then half the headers.
    let mut hook = tls(server.port, &server.ca).await.unwrap();
    hook.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nX-Slow: ").await.unwrap();
    hook.flush().await.unwrap();
    // Webhook port: TCP only, the handshake never started.
    let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
    // Webhook port: a completed handshake, then less than HTTP/2's preface (the protocol is not
    // known yet, so no HTTP header timer runs).
    let mut preface = tls(server.port, &server.ca).await.unwrap();
    preface.write_all(b"PRI * HTTP/2.0\r\n").await.unwrap();
    preface.flush().await.unwrap();
    assert!(closed_by_server(&mut probe).await, "probe port kept a slow client");
    assert!(closed_by_server(&mut hook).await, "webhook port kept a slow header");
    assert!(closed_by_server(&mut raw).await, "webhook port kept a connection without a handshake");
    assert!(closed_by_server(&mut preface).await, "webhook port kept a connection with no request");
    // Each close is counted, by port and reason.
    let lines = [
        r#"gang_webhook_connections_closed_total{port="webhook",reason="handshake_timeout"} 1"#,
        r#"gang_webhook_connections_closed_total{port="webhook",reason="header_timeout"} 2"#,
        r#"gang_webhook_connections_closed_total{port="probe",reason="header_timeout"} 1"#,
    ];
    assert_metrics(server.probe, &lines).await;
}

#[test]
fn the_probe_port_cuts_slow_clients_off_sooner() {
    let args = <gang_webhook::Args as clap::Parser>::parse_from(["gang-webhook"]);
    let probes = args.limits().probes();
    assert!(probes.header_timeout <= server::PROBE_REQUEST_TIMEOUT, "{probes:?}");
    assert!(probes.body_timeout <= server::PROBE_REQUEST_TIMEOUT, "{probes:?}");
    assert!(args.limits().header_timeout > server::PROBE_REQUEST_TIMEOUT);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_hyper_answers_itself_is_counted() {
    let server = start(&[]).await;
    // Not HTTP: hyper answers 400 and closes.
    let mut bad = tls(server.port, &server.ca).await.unwrap();
    bad.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n").await.unwrap();
    let (head, _) = read_response(&mut bad).await;
    assert!(head.starts_with("HTTP/1.1 400"), "{head}");
    // Headers over the 64 KiB buffer: 431.
    let mut large = tls(server.port, &server.ca).await.unwrap();
    let header = format!("X-Large: {}\r\n", "a".repeat(70 * 1024));
    let _ = large
        .write_all(format!("POST /validate HTTP/1.1\r\nHost: localhost\r\n{header}\r\n").as_bytes())
        .await;
    let (head, _) = read_response(&mut large).await;
    assert!(head.starts_with("HTTP/1.1 431"), "{head}");
    let lines = [
        r#"gang_webhook_requests_total{hook="none",result="bad_request"} 1"#,
        r#"gang_webhook_requests_total{hook="none",result="headers_too_large"} 1"#,
        r#"gang_webhook_connections_closed_total{port="webhook",reason="bad_http"} 1"#,
        r#"gang_webhook_connections_closed_total{port="webhook",reason="headers_too_large"} 1"#,
    ];
    assert_metrics(server.probe, &lines).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_connection_pool_waits_and_frees_itself() {
    let server = start(&["--max-connections", "2", "--request-timeout", "1"]).await;
    // Two connections that never handshake take every slot...
    let _a = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
    let _b = tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await.unwrap();
    // ...a legitimate client waits in the backlog and is served once the handshake timeout frees a slot.
    let mut s = tokio::time::timeout(BOUND, tls(server.port, &server.ca)).await.unwrap().unwrap();
    s.write_all(request_head(REVIEW.len(), true).as_bytes()).await.unwrap();
    s.write_all(REVIEW.as_bytes()).await.unwrap();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains(r#""uid":"u-1""#), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_is_closed_after_its_request_cap() {
    let server = start(&["--max-requests-per-connection", "3"]).await;
    let mut s = tls(server.port, &server.ca).await.unwrap();
    for i in 1..=3 {
        s.write_all(request_head(REVIEW.len(), false).as_bytes()).await.unwrap();
        s.write_all(REVIEW.as_bytes()).await.unwrap();
        let (head, _) = read_response(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert_eq!(head.to_ascii_lowercase().contains("connection: close"), i == 3, "request {i}: {head}");
    }
    assert!(closed_by_server(&mut s).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_closed() {
    let server = start(&["--idle-timeout", "1", "--request-timeout", "30"]).await;
    let mut s = tls(server.port, &server.ca).await.unwrap();
    s.write_all(request_head(REVIEW.len(), false).as_bytes()).await.unwrap();
    s.write_all(REVIEW.as_bytes()).await.unwrap();
    let (head, _) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(closed_by_server(&mut s).await, "an idle keep-alive connection stays open");
    let text = metrics(server.probe).await;
    assert!(
        text.contains(r#"gang_webhook_connections_closed_total{port="webhook",reason="idle"} 1"#),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_connections_at_once_and_drains_in_flight_requests() {
    let mut server = start(&[]).await;
    // A request in flight: headers sent, body not yet.
    let mut s = tls(server.port, &server.ca).await.unwrap();
    s.write_all(request_head(REVIEW.len(), false).as_bytes()).await.unwrap();
    s.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = server.stop.take().unwrap().send(());
    // New connections are refused by the kernel: the listening socket is gone.
    let refused = tokio::time::timeout(BOUND, async {
        loop {
            match tokio::net::TcpStream::connect(("127.0.0.1", server.port)).await {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => break,
                _ => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    })
    .await;
    assert!(refused.is_ok(), "the port still accepts connections after shutdown");
    // The request in flight is still answered.
    s.write_all(REVIEW.as_bytes()).await.unwrap();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(body.contains(r#""uid":"u-1""#));
    assert!(tokio::time::timeout(BOUND, &mut server.done).await.is_ok(), "shutdown did not finish");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stuck_client_does_not_hold_shutdown_beyond_the_drain_period() {
    let mut server = start(&["--shutdown-timeout", "1", "--request-timeout", "60"]).await;
    let mut s = tls(server.port, &server.ca).await.unwrap();
    s.write_all(request_head(REVIEW.len(), false).as_bytes()).await.unwrap();
    s.write_all(&REVIEW.as_bytes()[..10]).await.unwrap();
    s.flush().await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _ = server.stop.take().unwrap().send(());
    assert!(
        tokio::time::timeout(BOUND, &mut server.done).await.is_ok(),
        "shutdown waited for the stuck client"
    );
    assert!(closed_by_server(&mut s).await);
}

/// `/healthz` comes from a thread and runtime of its own: it answers while every async worker of
/// the runtime that serves admissions is blocked.
#[test]
fn healthz_answers_while_the_admission_runtime_is_blocked() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let server = rt.block_on(start(&[]));
    let (release, blocked) = std::sync::mpsc::channel::<()>();
    let (started_tx, started) = std::sync::mpsc::channel::<()>();
    rt.spawn(async move {
        let _ = started_tx.send(());
        // Holds the only worker thread until released (what a CPU-bound decision used to do).
        let _ = blocked.recv_timeout(BOUND);
    });
    started.recv_timeout(BOUND).unwrap();
    let probe = server.probe;
    let answer = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", probe)).unwrap();
        s.set_read_timeout(Some(BOUND)).unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
    .join()
    .unwrap();
    let _ = release.send(());
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
    drop(server);
    rt.shutdown_timeout(Duration::from_secs(1));
}

/// A listener whose every accept fails as `accept(2)` does when the process is out of file
/// descriptors.
struct OutOfFiles(Arc<AtomicUsize>);

impl Listener for OutOfFiles {
    type Io = tokio::net::TcpStream;
    async fn accept(&mut self) -> io::Result<(Self::Io, SocketAddr)> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Err(io::Error::from_raw_os_error(24)) // EMFILE
    }
}

#[derive(Clone)]
struct NoEvents;
impl ConnectionEvents for NoEvents {
    fn closed(&self, _: &'static str) {}
}

/// EMFILE forever for 60 (virtual) seconds: with pauses growing to 1 s the loop tries about once a
/// second, not millions of times.
#[tokio::test(start_paused = true)]
async fn accept_errors_back_off_instead_of_spinning() {
    let calls = Arc::new(AtomicUsize::new(0));
    let plain = |tcp| async move { io::Result::Ok(tcp) };
    let _ = tokio::time::timeout(
        Duration::from_secs(60),
        server::serve(
            OutOfFiles(calls.clone()),
            plain,
            axum::Router::new(),
            Limits::default(),
            NoEvents,
            std::future::pending(),
        ),
    )
    .await;
    let n = calls.load(Ordering::SeqCst);
    // 5 ms, 10 ms, … 640 ms, then 1 s each: 8 tries in the first 1.3 s, then one a second.
    assert!((55..=75).contains(&n), "{n} accepts in 60 s");
}

/// A Job near the API server's 3 MiB request limit (90,000 env vars), as an AdmissionReview.
fn maximum_size_review(uid: &str) -> Vec<u8> {
    let env: Vec<_> =
        (0..90_000).map(|i| serde_json::json!({"name": format!("V{i}"), "value": "x"})).collect();
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "namespace": "ml",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "object": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "big", "namespace": "ml"},
                "spec": {"parallelism": 4, "template": {"spec": {"containers": [
                    {"name": "c", "image": "x", "env": env}]}}}}}});
    serde_json::to_vec(&review).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_request_is_answered_while_maximum_size_ones_fill_the_big_lane() {
    let state = AppState::new(1, BOUND);
    let app = router(state.clone());
    let post = |body: Vec<u8>| {
        let app = app.clone();
        tokio::spawn(async move {
            let res = app.oneshot(Request::post("/mutate").body(Body::from(body)).unwrap()).await.unwrap();
            let status = res.status();
            let body = axum::body::to_bytes(res.into_body(), usize::MAX).await.unwrap();
            (status, serde_json::from_slice::<serde_json::Value>(&body).unwrap())
        })
    };
    // The big lane full: its one slot taken, and a maximum-size request queued behind it.
    let held = state.lanes.saturate_big().await.unwrap();
    assert_eq!(state.lanes.available(Lane::Big), 0);
    let big: Vec<_> = (0..1).map(|i| post(maximum_size_review(&format!("big-{i}")))).collect();
    // A small request is answered all the same...
    let (status, small) = tokio::time::timeout(BOUND, post(REVIEW.as_bytes().to_vec()))
        .await
        .expect("the small request waited behind the big lane")
        .unwrap();
    assert_eq!((status, small["response"]["uid"].as_str()), (StatusCode::OK, Some("u-1")));
    // ...while the maximum-size ones still wait for the big lane.
    assert!(big.iter().all(|b| !b.is_finished()), "a big request went past the full big lane");
    drop(held);
    for (i, b) in big.into_iter().enumerate() {
        let (status, answer) = tokio::time::timeout(BOUND, b).await.unwrap().unwrap();
        assert_eq!(status, StatusCode::OK);
        assert_eq!(answer["response"]["uid"], format!("big-{i}"));
        assert_eq!(answer["response"]["allowed"], true);
    }
    assert_eq!(state.lanes.available_kib(), gang_webhook::BIG_LANE_BUDGET / 1024);
}

/// An HTTP/2 request whose body may not be read yet (the reading budget is taken) gets no more of
/// its body into the server than one 64 KiB window: hyper's default (1 MiB per stream and per
/// connection) would let every stream of every connection park that much before any budget is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_body_that_may_not_be_read_yet_sends_no_more_than_its_window() {
    use futures::StreamExt as _;
    let mut state = AppState::new(1, BOUND);
    state.lanes = gang_webhook::lanes::Lanes::with_reading(1, 1, 1 << 20, 256 * 1024);
    let mut held = state.lanes.reserve_body(kube_gang_serve::Source::LOCAL, Some(256 * 1024)).await;
    held.grow(256 * 1024).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let plain = |tcp| async move { io::Result::Ok(tcp) };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(server::serve(
        listener,
        plain,
        router(state.clone()),
        Limits::default(),
        NoEvents,
        async {
            let _ = stopped.await;
        },
    ));
    // HTTP/2 with prior knowledge over plain TCP; a 3 MiB body in 16 KiB chunks, counted as the
    // client takes them to send.
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    const CHUNK: usize = 16 * 1024;
    let taken = Arc::new(AtomicUsize::new(0));
    let counter = taken.clone();
    let chunks = futures::stream::iter(0..192).map(move |_| {
        counter.fetch_add(CHUNK, Ordering::SeqCst);
        Ok::<_, io::Error>(hyper::body::Frame::data(bytes::Bytes::from(vec![b' '; CHUNK])))
    });
    let req = Request::post("/validate")
        .header("content-length", (192 * CHUNK).to_string())
        .body(http_body_util::StreamBody::new(chunks))
        .unwrap();
    let answer = tokio::spawn(send.send_request(req));
    // Until the client stops taking chunks (the window is used up): unchanged over 300 ms.
    let mut last = usize::MAX;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = taken.load(Ordering::SeqCst);
        if now == last {
            break;
        }
        last = now;
    }
    let window = server::H2_WINDOW as usize;
    assert!(last <= window + 2 * CHUNK, "{last} bytes sent before the body could be read");
    // Once there is room, the body is read and answered (spaces are no AdmissionReview: 400).
    drop(held);
    let res = tokio::time::timeout(BOUND, answer).await.unwrap().unwrap().unwrap();
    assert_eq!(res.status(), StatusCode::BAD_REQUEST);
    let _ = stop.send(());
    let _ = served.await;
}

/// A request whose body sends one byte and then nothing, as a stream the test keeps open.
fn trickle(
    path: &str,
    declared: Option<usize>,
) -> (Request<Body>, futures::channel::mpsc::Sender<Result<bytes::Bytes, io::Error>>) {
    let (mut tx, body) = futures::channel::mpsc::channel::<Result<bytes::Bytes, io::Error>>(1);
    tx.try_send(Ok(bytes::Bytes::from_static(b"{"))).unwrap();
    let mut req = Request::post(path);
    if let Some(n) = declared {
        req = req.header("content-length", n.to_string());
    }
    (req.body(Body::from_stream(body)).unwrap(), tx)
}

/// Issue 32: 520 connections that declared 64 KiB and sent one byte held the whole small reading
/// budget (they reserved what they declared) and a Pod's review waited 8.9 s. A body now holds what
/// it has received, and a body that falls behind the pace is cut off after its grace period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_declare_much_and_send_a_byte_hold_a_byte_and_are_cut_off() {
    let mut state = AppState::new(2, BOUND);
    // A grace period long enough that the idle bodies are surely still open when the review is
    // answered, however loaded the machine.
    state.pace.grace = Duration::from_secs(2);
    let app = router(state.clone());
    let small_budget = state.lanes.available_small_reading_kib();
    let mut idle = Vec::new();
    for _ in 0..600 {
        let (req, tx) = trickle("/validate", Some(gang_webhook::lanes::SMALL_BODY));
        idle.push((tokio::spawn(app.clone().oneshot(req)), tx));
    }
    // All of them started, each holding 1 KiB (what one byte takes), not 64 KiB.
    let deadline = tokio::time::Instant::now() + BOUND;
    while state.lanes.available_small_reading_kib() > small_budget - 600 {
        assert!(tokio::time::Instant::now() < deadline, "the 600 bodies did not all start");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(state.lanes.available_small_reading_kib(), small_budget - 600);
    // A Pod's review is answered meanwhile, while every idle body is still open.
    let res = tokio::time::timeout(
        BOUND,
        app.clone().oneshot(Request::post("/validate").body(Body::from(REVIEW)).unwrap()),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(idle.iter().all(|(answer, _)| !answer.is_finished()), "it waited for the idle bodies");
    // Each idle one is cut off (408) once its grace period is over, and holds nothing after.
    for (answer, _tx) in idle {
        let res = tokio::time::timeout(BOUND, answer).await.unwrap().unwrap().unwrap();
        assert_eq!(res.status(), StatusCode::REQUEST_TIMEOUT);
    }
    assert_eq!(state.lanes.available_small_reading_kib(), small_budget);
    assert!(
        state
            .metrics
            .encode()
            .contains(r#"gang_webhook_requests_total{hook="validate",result="timeout"} 600"#)
    );
}

/// Issue 32: five chunked uploads that never finished reserved the 7 MiB limit each and kept every
/// request over 64 KiB waiting 9.5 s. Undeclared bodies hold what they sent, so a big review goes
/// through beside them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunked_uploads_that_never_finish_do_not_hold_up_big_requests() {
    let mut state = AppState::new(1, BOUND);
    state.pace.grace = Duration::from_secs(2);
    let app = router(state.clone());
    let budget = state.lanes.available_reading_kib();
    let mut idle = Vec::new();
    for _ in 0..5 {
        let (req, tx) = trickle("/validate", None);
        idle.push((tokio::spawn(app.clone().oneshot(req)), tx));
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(state.lanes.available_reading_kib() >= budget - 5, "each holds what it sent");
    // A big review (a Job with 3,000 env vars, ~100 KiB) is decided meanwhile.
    let big = serde_json::to_vec(
        &serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "big", "operation": "CREATE", "namespace": "ml",
            "kind": {"group": "batch", "version": "v1", "kind": "Job"},
            "object": support::job_with_env(3_000)}}),
    )
    .unwrap();
    assert!(big.len() > gang_webhook::lanes::SMALL_BODY);
    let res = app.clone().oneshot(Request::post("/validate").body(Body::from(big)).unwrap()).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(idle.iter().all(|(answer, _)| !answer.is_finished()), "it waited for the uploads");
    for (answer, _tx) in idle {
        assert_eq!(
            tokio::time::timeout(BOUND, answer).await.unwrap().unwrap().unwrap().status(),
            StatusCode::REQUEST_TIMEOUT
        );
    }
}
