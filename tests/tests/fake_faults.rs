//! The faults the fake injects, held to what each promises: an injected status is the API
//! server's own `Status` (a 429 with `Retry-After`) for exactly the requests it matches; a lost
//! response is a change made whose answer never arrives; a delay holds a request before it is
//! served, and only the requests it matches.

use std::time::Duration;

use kube_gang_tests::{FakeApi, FaultKind, gang_pod, node};
use serde_json::{Value, json};

const PODS: &str = "/api/v1/namespaces/ml/pods";
const JSON: &str = "application/json";

fn binding(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": "ml"},
           "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
}

#[tokio::test]
async fn an_injected_status_answers_only_the_requests_it_matches_and_only_so_many_times() {
    let api = FakeApi::start(&[]).await;
    api.put(node("n1", "8", 0, &[]));
    api.put(gang_pod("ml", "w-0", "g", 0));
    api.put(gang_pod("ml", "w-1", "g", 0));
    api.fault("POST", "/pods/w-0/binding", 429, 2);
    for _ in 0..2 {
        let a = api.call("POST", &format!("{PODS}/w-0/binding"), JSON, &binding("w-0", "n1")).await;
        assert_eq!((a.status, a.retry_after.as_deref()), (429, Some("1")), "{:#}", a.body);
        assert_eq!(
            (a.body["kind"].as_str(), a.body["reason"].as_str(), a.body["code"].as_u64()),
            (Some("Status"), Some("TooManyRequests"), Some(429))
        );
        assert_eq!(a.body["details"]["retryAfterSeconds"], 1);
    }
    // Another pod, another method: untouched. Then the fault is spent: served.
    let other = api.call("POST", &format!("{PODS}/w-1/binding"), JSON, &binding("w-1", "n1")).await;
    assert_eq!(other.status, 201);
    assert_eq!(api.call("GET", &format!("{PODS}/w-0"), "", &Value::Null).await.status, 200);
    let a = api.call("POST", &format!("{PODS}/w-0/binding"), JSON, &binding("w-0", "n1")).await;
    assert_eq!(a.status, 201, "{:#}", a.body);
    // Nothing was served while the fault answered, and every request was recorded with its answer.
    let statuses: Vec<u16> = api.requests_to("POST", "/pods/w-0/binding").iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 429, 201]);
    // Each code with the reason kube-apiserver gives it.
    for (code, reason) in [
        (403, "Forbidden"),
        (409, "Conflict"),
        (500, "InternalError"),
        (503, "ServiceUnavailable"),
        (504, "Timeout"),
    ] {
        api.fault("GET", "/pods/w-1", code, 1);
        let a = api.call("GET", &format!("{PODS}/w-1"), "", &Value::Null).await;
        assert_eq!((a.status, a.body["reason"].as_str(), a.retry_after), (code, Some(reason), None));
    }
}

#[tokio::test]
async fn a_lost_response_is_a_change_made_whose_answer_never_arrives() {
    let api = FakeApi::start(&[]).await;
    api.put(node("n1", "8", 0, &[]));
    api.put(gang_pod("ml", "w-0", "g", 0));
    api.fault_with("POST", "/pods/w-0/binding", FaultKind::LoseResponse, 1);
    let body = binding("w-0", "n1").to_string();
    let resp = api.send("POST", &format!("{PODS}/w-0/binding"), JSON, &body).await;
    // The body breaks off: the client never learns the outcome...
    assert!(axum::body::to_bytes(resp.into_body(), 1 << 20).await.is_err(), "the answer is lost");
    // ... though the binding was made, and a retry meets the API server's own 409.
    let pod = api.get("v1", "Pod", "ml", "w-0").unwrap();
    assert_eq!(pod["spec"]["nodeName"], "n1");
    let again = api.call("POST", &format!("{PODS}/w-0/binding"), JSON, &binding("w-0", "n1")).await;
    assert_eq!((again.status, again.body["reason"].as_str()), (409, Some("Conflict")));
    // Over real HTTP too: the connection drops before a complete answer.
    api.put(gang_pod("ml", "w-1", "g", 0));
    api.fault_with("POST", "/pods/w-1/binding", FaultKind::LoseResponse, 1);
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(api.addr).await.unwrap();
    let body = binding("w-1", "n1").to_string();
    let req = format!(
        "POST {PODS}/w-1/binding HTTP/1.1\r\nHost: x\r\nContent-Type: {JSON}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = conn.read_to_end(&mut got).await;
    let got = String::from_utf8_lossy(&got);
    assert!(!got.ends_with("0\r\n\r\n"), "the chunked body never ends: {got:?}");
    assert!(api.get("v1", "Pod", "ml", "w-1").unwrap()["spec"]["nodeName"] == "n1");
}

#[tokio::test(start_paused = true)]
async fn a_delay_holds_the_requests_it_matches_before_they_are_served() {
    let api = FakeApi::start(&[]).await;
    api.delay("POST", "/pods", Duration::from_secs(30));
    api.delay("POST", "/pods", Duration::from_secs(60));
    let start = tokio::time::Instant::now();
    let created = tokio::spawn({
        let api = api.clone();
        async move { api.call("POST", PODS, JSON, &gang_pod("ml", "w-0", "g", 0)).await }
    });
    // Recorded on arrival, unanswered and not yet served, for as long as the longest delay.
    tokio::time::sleep(Duration::from_secs(59)).await;
    let pending = api.requests_to("POST", "/pods");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].status, 0, "not answered yet");
    assert!(api.get("v1", "Pod", "ml", "w-0").is_none(), "not served yet");
    // Requests the delay does not match go through meanwhile.
    let read = api.call("GET", PODS, "", &Value::Null).await;
    assert_eq!(read.status, 200);
    assert_eq!(start.elapsed(), Duration::from_secs(59), "a read is not held");
    let a = created.await.unwrap();
    assert_eq!(a.status, 201, "{:#}", a.body);
    assert!(start.elapsed() >= Duration::from_secs(60));
    assert!(api.get("v1", "Pod", "ml", "w-0").is_some());
    assert_eq!(api.requests_to("POST", "/pods")[0].status, 201);
}
