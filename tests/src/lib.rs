//! Shared test support for kube-gang: an HTTP-level fake of the Kubernetes API.
//!
//! [`FakeApi`] serves the subset of the API the scheduler and the plugin use, over real HTTP on
//! loopback: list and watch (with resourceVersions, newline-delimited watch events, 410 Gone for a
//! too-old version), get, create, replace (optimistic concurrency: a stale `resourceVersion` is a
//! 409), merge patches (status included), the `pods/binding` and `pods/eviction` subresources, and
//! events. Every request is recorded (method, path, query, body) so tests assert on exactly what a
//! real API server would receive — with when it arrived, who sent it (`User-Agent`) and the status
//! it got — and faults can be injected: a status for the next N matching requests, a request
//! served but its response lost (the connection drops), and a delay before matching requests are
//! served (a slow API server).

pub mod tools;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// One request the fake received.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
    /// When the request arrived.
    pub at: std::time::Instant,
    /// The client's `User-Agent` header (empty when absent).
    pub user_agent: String,
    /// The status it was answered with (0: not answered yet, or the connection was dropped).
    pub status: u16,
}

/// What a fault does to a matching request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer with this status instead of serving the request (a 429 carries `Retry-After: 1`).
    Status(u16),
    /// Serve the request, then drop the connection instead of answering: the change is made but
    /// the client never learns it (a lost response).
    LoseResponse,
}

/// A fault: answer the next `times` requests whose method matches and whose path ends with
/// `path_suffix` with `status` instead of serving them.
#[derive(Clone, Debug)]
pub struct Fault {
    pub method: String,
    pub path_suffix: String,
    pub kind: FaultKind,
    pub times: usize,
}

/// Where an object lives: `(prefix, plural)` with prefix `/api/v1` or `/apis/{group}/{version}`.
type Resource = (String, String);
type ObjKey = (Resource, String, String);

#[derive(Debug, Default)]
struct Store {
    objects: BTreeMap<ObjKey, Value>,
    version: u64,
    /// Every change, for watches that resume from a resourceVersion.
    history: VecDeque<(u64, Resource, &'static str, Value)>,
    /// Oldest version a watch may resume from; older gets 410 Gone.
    compacted: u64,
    requests: Vec<Recorded>,
    faults: Vec<Fault>,
    /// (method, path suffix, delay) applied to every matching request before it is served.
    delays: Vec<(String, String, Duration)>,
}

#[derive(Debug)]
struct Inner {
    store: Mutex<Store>,
    changes: broadcast::Sender<(u64, Resource, &'static str, Value)>,
    /// Resources served (list on an unknown one is a 404, like a missing CRD).
    served: Mutex<Vec<Resource>>,
}

/// A running fake API server.
#[derive(Clone, Debug)]
pub struct FakeApi {
    inner: Arc<Inner>,
    pub addr: SocketAddr,
}

fn kind_to_resource(api_version: &str, kind: &str) -> Resource {
    let prefix = if api_version.contains('/') {
        format!("/apis/{api_version}")
    } else {
        format!("/api/{api_version}")
    };
    let plural = match kind {
        "PriorityClass" => "priorityclasses".to_string(),
        k => format!("{}s", k.to_lowercase()),
    };
    (prefix, plural)
}

impl FakeApi {
    /// Starts a fake serving the core kinds (nodes, pods, namespaces, events, leases, priority
    /// classes) plus `extra` resources as `(prefix, plural)`.
    pub async fn start(extra: &[(&str, &str)]) -> FakeApi {
        let (changes, _) = broadcast::channel(4096);
        let mut served: Vec<Resource> = [
            ("/api/v1", "nodes"),
            ("/api/v1", "pods"),
            ("/api/v1", "namespaces"),
            ("/api/v1", "events"),
            ("/apis/events.k8s.io/v1", "events"),
            ("/apis/coordination.k8s.io/v1", "leases"),
            ("/apis/scheduling.k8s.io/v1", "priorityclasses"),
        ]
        .iter()
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect();
        served.extend(extra.iter().map(|(p, r)| (p.to_string(), r.to_string())));
        let inner = Arc::new(Inner {
            store: Mutex::new(Store { version: 1, ..Store::default() }),
            changes,
            served: Mutex::new(served),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let app = axum::Router::new().fallback(handle).with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeApi { inner, addr }
    }

    /// `http://127.0.0.1:port`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kubeconfig pointing at this fake, for processes (`KUBECONFIG=…`).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\ncurrent-context: fake\nusers:\n- name: fake\n  user:\n    token: fake\n",
            self.url()
        )
    }

    /// Adds or replaces an object (as a controller would), notifying watches.
    pub fn put(&self, mut obj: Value) {
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("v1").to_string();
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
        let res = kind_to_resource(&api_version, &kind);
        let ns = obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("").to_string();
        let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        let mut s = self.inner.store.lock().expect("store");
        let existed = s.objects.contains_key(&(res.clone(), ns.clone(), name.clone()));
        s.version += 1;
        let v = s.version;
        set_rv(&mut obj, v);
        s.objects.insert((res.clone(), ns, name), obj.clone());
        let ty = if existed { "MODIFIED" } else { "ADDED" };
        s.history.push_back((v, res.clone(), ty, obj.clone()));
        let _ = self.inner.changes.send((v, res, ty, obj));
    }

    /// Deletes an object, notifying watches.
    pub fn remove(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let res = kind_to_resource(api_version, kind);
        let mut s = self.inner.store.lock().expect("store");
        let obj = s.objects.remove(&(res.clone(), namespace.to_string(), name.to_string()))?;
        s.version += 1;
        let v = s.version;
        s.history.push_back((v, res.clone(), "DELETED", obj.clone()));
        let _ = self.inner.changes.send((v, res, "DELETED", obj.clone()));
        Some(obj)
    }

    /// The stored object.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let res = kind_to_resource(api_version, kind);
        self.inner
            .store
            .lock()
            .expect("store")
            .objects
            .get(&(res, namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.store.lock().expect("store").requests.clone()
    }

    /// Requests with this method whose path ends with `suffix`.
    pub fn requests_to(&self, method: &str, suffix: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.method == method && r.path.ends_with(suffix)).collect()
    }

    /// Answers the next `times` requests matching `method` and `path_suffix` with `status`.
    pub fn fault(&self, method: &str, path_suffix: &str, status: u16, times: usize) {
        self.fault_with(method, path_suffix, FaultKind::Status(status), times);
    }

    /// Injects a fault of any kind for the next `times` matching requests.
    pub fn fault_with(&self, method: &str, path_suffix: &str, kind: FaultKind, times: usize) {
        self.inner.store.lock().expect("store").faults.push(Fault {
            method: method.into(),
            path_suffix: path_suffix.into(),
            kind,
            times,
        });
    }

    /// Delays every request matching `method` and `path_suffix` by `delay` before serving it.
    pub fn delay(&self, method: &str, path_suffix: &str, delay: Duration) {
        self.inner.store.lock().expect("store").delays.push((method.into(), path_suffix.into(), delay));
    }

    /// Forgets watch history: a watch resuming from before now gets 410 Gone.
    pub fn compact(&self) {
        let mut s = self.inner.store.lock().expect("store");
        s.compacted = s.version;
        s.history.clear();
    }

    /// Starts serving a resource later (a CRD installed while the scheduler runs).
    pub fn serve(&self, prefix: &str, plural: &str) {
        self.inner.served.lock().expect("served").push((prefix.into(), plural.into()));
    }

    /// Waits until `check` holds (polling), up to `timeout`.
    pub async fn wait_for(&self, timeout: Duration, mut check: impl FnMut(&FakeApi) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if check(self) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        check(self)
    }
}

fn set_rv(obj: &mut Value, v: u64) {
    if let Some(m) = obj.as_object_mut() {
        let meta = m.entry("metadata").or_insert_with(|| json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert("resourceVersion".into(), Value::String(v.to_string()));
            meta.entry("uid").or_insert_with(|| Value::String(format!("uid-{v}")));
            meta.entry("creationTimestamp").or_insert_with(|| Value::String("2026-01-01T00:00:00Z".into()));
        }
    }
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code.as_u16()});
    (code, [("content-type", "application/json")], body.to_string()).into_response()
}

fn ok(v: Value) -> Response {
    (StatusCode::OK, [("content-type", "application/json")], v.to_string()).into_response()
}

/// A parsed request path.
#[derive(Debug)]
struct Target {
    res: Resource,
    namespace: String,
    name: Option<String>,
    sub: Option<String>,
}

fn parse_path(path: &str) -> Option<Target> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (prefix, rest) = match *parts.first()? {
        "api" => (format!("/api/{}", parts.get(1)?), parts.get(2..)?),
        "apis" => (format!("/apis/{}/{}", parts.get(1)?, parts.get(2)?), parts.get(3..)?),
        _ => return None,
    };
    let (namespace, rest) = if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        (rest[1].to_string(), &rest[2..])
    } else {
        (String::new(), rest)
    };
    // `/api/v1/namespaces/{name}` itself is the namespaces resource.
    if rest.is_empty() && !namespace.is_empty() {
        return Some(Target {
            res: (prefix, "namespaces".into()),
            namespace: String::new(),
            name: Some(namespace),
            sub: None,
        });
    }
    Some(Target {
        res: (prefix, rest.first()?.to_string()),
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        sub: rest.get(2).map(|s| s.to_string()),
    })
}

async fn handle(State(inner): State<Arc<Inner>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let user_agent = req.headers().get("user-agent").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    let strategic = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("application/strategic-merge-patch"));
    let at = std::time::Instant::now();
    let bytes: Bytes = axum::body::to_bytes(req.into_body(), 8 << 20).await.unwrap_or_default();
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let (index, fault, delay) = {
        let mut s = inner.store.lock().expect("store");
        s.requests.push(Recorded {
            method: method.to_string(),
            path: path.clone(),
            query: query.clone(),
            body: body.clone(),
            at,
            user_agent,
            status: 0,
        });
        let index = s.requests.len() - 1;
        let fault = s
            .faults
            .iter_mut()
            .find(|f| f.times > 0 && f.method == method.as_str() && path.ends_with(&f.path_suffix))
            .map(|f| {
                f.times -= 1;
                f.kind
            });
        let delay = s
            .delays
            .iter()
            .filter(|(m, suffix, _)| m == method.as_str() && path.ends_with(suffix.as_str()))
            .map(|(_, _, d)| *d)
            .max();
        (index, fault, delay)
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    let resp = match fault {
        Some(FaultKind::Status(code)) => {
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = status(code, "Injected", "injected fault");
            if code == StatusCode::TOO_MANY_REQUESTS {
                resp.headers_mut().insert("retry-after", axum::http::HeaderValue::from_static("1"));
            }
            resp
        }
        Some(FaultKind::LoseResponse) => {
            // Served, then the connection breaks before the body: the client sees an error.
            let _ = serve(&inner, None, &method, &path, &query, body, strategic);
            let broken = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped by the fake"))
            });
            return (StatusCode::OK, Body::from_stream(broken)).into_response();
        }
        None => return serve(&inner, Some(index), &method, &path, &query, body, strategic),
    };
    if let Some(r) = inner.store.lock().expect("store").requests.get_mut(index) {
        r.status = resp.status().as_u16();
    }
    resp
}

/// Serves one request. Everything but a watch is one transaction on the store, and its answer is
/// recorded (at `index`, unless the answer is to be lost) in the same one: whoever sees its effect
/// also sees that it was answered.
fn serve(
    inner: &Arc<Inner>,
    index: Option<usize>,
    method: &Method,
    path: &str,
    query: &str,
    body: Value,
    strategic: bool,
) -> Response {
    let Some(t) = parse_path(path) else { return status(StatusCode::NOT_FOUND, "NotFound", "unknown path") };
    let served = inner.served.lock().expect("served").contains(&t.res);
    if !served {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!("the server could not find the requested resource {}", t.res.1),
        );
    }
    let watch = query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
    if watch && method == Method::GET && t.name.is_none() {
        return watch_stream(inner.clone(), t, query);
    }
    let mut guard = inner.store.lock().expect("store");
    let s = &mut *guard;
    let resp = match (method, &t.name, t.sub.as_deref()) {
        (&Method::GET, None, None) => list(s, &t),
        (&Method::GET, Some(name), _) => get(s, &t, name),
        (&Method::POST, None, None) => create(inner, s, &t, body),
        (&Method::PUT, Some(name), _) => replace(inner, s, &t, name, body),
        (&Method::PATCH, Some(name), _) => patch(inner, s, &t, name, &body, strategic),
        (&Method::DELETE, Some(name), None) => delete(inner, s, &t, name),
        (&Method::POST, Some(name), Some("binding")) => bind(inner, s, &t, name, &body),
        (&Method::POST, Some(name), Some("eviction")) => evict(inner, s, &t, name, &body),
        _ => status(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed", "not supported by the fake"),
    };
    if let Some(r) = index.and_then(|i| s.requests.get_mut(i)) {
        r.status = resp.status().as_u16();
    }
    resp
}

fn list(s: &Store, t: &Target) -> Response {
    let items: Vec<Value> = s
        .objects
        .iter()
        .filter(|((res, ns, _), _)| *res == t.res && (t.namespace.is_empty() || *ns == t.namespace))
        .map(|(_, v)| v.clone())
        .collect();
    ok(
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": s.version.to_string()}, "items": items}),
    )
}

fn get(s: &Store, t: &Target, name: &str) -> Response {
    match s.objects.get(&(t.res.clone(), t.namespace.clone(), name.to_string())) {
        Some(v) => ok(v.clone()),
        None => status(StatusCode::NOT_FOUND, "NotFound", &format!("{} {name} not found", t.res.1)),
    }
}

fn store_change(inner: &Inner, s: &mut Store, key: ObjKey, mut obj: Value, ty: &'static str) -> Value {
    s.version += 1;
    let v = s.version;
    set_rv(&mut obj, v);
    if ty == "DELETED" {
        s.objects.remove(&key);
    } else {
        s.objects.insert(key.clone(), obj.clone());
    }
    s.history.push_back((v, key.0.clone(), ty, obj.clone()));
    let _ = inner.changes.send((v, key.0, ty, obj.clone()));
    obj
}

fn create(inner: &Inner, s: &mut Store, t: &Target, mut body: Value) -> Response {
    let name = match body.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) => n.to_string(),
        None => {
            let base =
                body.pointer("/metadata/generateName").and_then(Value::as_str).unwrap_or("obj-").to_string();
            let n = format!("{base}{}", s.version + 1);
            if let Some(m) = body.pointer_mut("/metadata").and_then(Value::as_object_mut) {
                m.insert("name".into(), Value::String(n.clone()));
            }
            n
        }
    };
    if !t.namespace.is_empty()
        && let Some(m) = body.pointer_mut("/metadata").and_then(Value::as_object_mut)
    {
        m.insert("namespace".into(), Value::String(t.namespace.clone()));
    }
    let key = (t.res.clone(), t.namespace.clone(), name.clone());
    if s.objects.contains_key(&key) {
        return status(StatusCode::CONFLICT, "AlreadyExists", &format!("{name} already exists"));
    }
    let obj = store_change(inner, s, key, body, "ADDED");
    (StatusCode::CREATED, [("content-type", "application/json")], obj.to_string()).into_response()
}

fn replace(inner: &Inner, s: &mut Store, t: &Target, name: &str, body: Value) -> Response {
    let key = (t.res.clone(), t.namespace.clone(), name.to_string());
    let Some(current) = s.objects.get(&key) else {
        return status(StatusCode::NOT_FOUND, "NotFound", &format!("{name} not found"));
    };
    let have = current.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
    let want = body.pointer("/metadata/resourceVersion").and_then(Value::as_str).unwrap_or("");
    if !want.is_empty() && want != have {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            "the object has been modified; please apply your changes to the latest version",
        );
    }
    let obj = store_change(inner, s, key, body, "MODIFIED");
    ok(obj)
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

/// A merge patch, or a strategic merge patch (`strategic`: `status.conditions` merge by `type`, as
/// the API server merges them). A `metadata.resourceVersion` in the patch is a precondition.
fn patch(inner: &Inner, s: &mut Store, t: &Target, name: &str, body: &Value, strategic: bool) -> Response {
    let key = (t.res.clone(), t.namespace.clone(), name.to_string());
    let Some(mut obj) = s.objects.get(&key).cloned() else {
        return status(StatusCode::NOT_FOUND, "NotFound", &format!("{name} not found"));
    };
    let want = body.pointer("/metadata/resourceVersion").and_then(Value::as_str);
    if want.is_some_and(|w| Some(w) != obj.pointer("/metadata/resourceVersion").and_then(Value::as_str)) {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            "the object has been modified; please apply your changes to the latest version",
        );
    }
    let mut body = body.clone();
    if strategic
        && let (Some(new), Some(old)) = (
            body.pointer("/status/conditions").and_then(Value::as_array).cloned(),
            obj.pointer("/status/conditions").and_then(Value::as_array).cloned(),
        )
    {
        let mut merged = old;
        for c in new {
            match merged.iter_mut().find(|o| o.get("type") == c.get("type")) {
                Some(o) => merge(o, &c),
                None => merged.push(c),
            }
        }
        body["status"]["conditions"] = Value::Array(merged);
    }
    merge(&mut obj, &body);
    let obj = store_change(inner, s, key, obj, "MODIFIED");
    ok(obj)
}

fn delete(inner: &Inner, s: &mut Store, t: &Target, name: &str) -> Response {
    let key = (t.res.clone(), t.namespace.clone(), name.to_string());
    let Some(obj) = s.objects.get(&key).cloned() else {
        return status(StatusCode::NOT_FOUND, "NotFound", &format!("{name} not found"));
    };
    let obj = store_change(inner, s, key, obj, "DELETED");
    ok(obj)
}

fn bind(inner: &Inner, s: &mut Store, t: &Target, name: &str, body: &Value) -> Response {
    let key = (t.res.clone(), t.namespace.clone(), name.to_string());
    let Some(mut pod) = s.objects.get(&key).cloned() else {
        return status(StatusCode::NOT_FOUND, "NotFound", &format!("pods {name} not found"));
    };
    let uid = body.pointer("/metadata/uid").and_then(Value::as_str);
    if uid.is_some_and(|u| Some(u) != pod.pointer("/metadata/uid").and_then(Value::as_str)) {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            "Precondition failed: UID in precondition does not match",
        );
    }
    if let Some(node) = pod.pointer("/spec/nodeName").and_then(Value::as_str) {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            &format!("pod {name} is already assigned to node \"{node}\""),
        );
    }
    let node = body.pointer("/target/name").cloned().unwrap_or(Value::Null);
    if let Some(spec) = pod.pointer_mut("/spec").and_then(Value::as_object_mut) {
        spec.insert("nodeName".into(), node);
    }
    // As the API server does: the pod is scheduled now, whatever a condition said before.
    let scheduled = json!({"type": "PodScheduled", "status": "True"});
    if let Some(status) = pod.as_object_mut().map(|p| p.entry("status").or_insert_with(|| json!({}))) {
        let conditions = status.as_object_mut().map(|s| s.entry("conditions").or_insert_with(|| json!([])));
        if let Some(list) = conditions.and_then(Value::as_array_mut) {
            list.retain(|c| c.get("type").and_then(Value::as_str) != Some("PodScheduled"));
            list.push(scheduled);
        }
    }
    store_change(inner, s, key, pod, "MODIFIED");
    (
        StatusCode::CREATED,
        [("content-type", "application/json")],
        json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}).to_string(),
    )
        .into_response()
}

fn evict(inner: &Inner, s: &mut Store, t: &Target, name: &str, body: &Value) -> Response {
    let key = (t.res.clone(), t.namespace.clone(), name.to_string());
    let Some(pod) = s.objects.get(&key).cloned() else {
        return status(StatusCode::NOT_FOUND, "NotFound", &format!("pods {name} not found"));
    };
    let uid = body.pointer("/deleteOptions/preconditions/uid").and_then(Value::as_str);
    if uid.is_some_and(|u| Some(u) != pod.pointer("/metadata/uid").and_then(Value::as_str)) {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            "Precondition failed: UID in precondition does not match",
        );
    }
    store_change(inner, s, key, pod, "DELETED");
    (
        StatusCode::CREATED,
        [("content-type", "application/json")],
        json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}).to_string(),
    )
        .into_response()
}

fn watch_stream(inner: Arc<Inner>, t: Target, query: &str) -> Response {
    let from: u64 = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("resourceVersion="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let (backlog, rx) = {
        let s = inner.store.lock().expect("store");
        if from < s.compacted {
            let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Expired", "code": 410, "message": "too old resource version"}});
            return (StatusCode::OK, [("content-type", "application/json")], format!("{gone}\n"))
                .into_response();
        }
        let backlog: Vec<(u64, Resource, &'static str, Value)> =
            s.history.iter().filter(|(v, r, _, _)| *v > from && *r == t.res).cloned().collect();
        (backlog, inner.changes.subscribe())
    };
    let ns = t.namespace.clone();
    let res = t.res.clone();
    let matches = move |r: &Resource, obj: &Value| {
        *r == res
            && (ns.is_empty()
                || obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(ns.as_str()))
    };
    let last = backlog.last().map_or(from, |b| b.0);
    let initial: Vec<Result<Bytes, std::io::Error>> = backlog
        .into_iter()
        .filter(|(_, r, _, o)| matches(r, o))
        .map(|(_, _, ty, o)| Ok(Bytes::from(format!("{}\n", json!({"type": ty, "object": o})))))
        .collect();
    let live = futures::stream::unfold((rx, last), move |(mut rx, last)| {
        let matches = matches.clone();
        async move {
            loop {
                match rx.recv().await {
                    Ok((v, r, ty, o)) if v > last && matches(&r, &o) => {
                        let line = Bytes::from(format!("{}\n", json!({"type": ty, "object": o})));
                        return Some((Ok::<Bytes, std::io::Error>(line), (rx, v)));
                    }
                    Ok(_) => continue,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => return None,
                }
            }
        }
    });
    let stream = futures::StreamExt::chain(futures::stream::iter(initial), live);
    (StatusCode::OK, [("content-type", "application/json")], Body::from_stream(stream)).into_response()
}

/// A node object as the API serves it.
pub fn node(name: &str, cpu: &str, gpus: u32, labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> =
        labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
           "status": {"allocatable": {"cpu": cpu, "memory": "512Gi", "pods": "110", "nvidia.com/gpu": gpus.to_string()},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// A pending pod of gang `gang` (label form) asking for `gpus`.
pub fn gang_pod(namespace: &str, name: &str, gang: &str, gpus: u32) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "labels": {"kube-gang.io/gang": gang}},
           "spec": {"schedulerName": "gang-scheduler", "containers": [{"name": "c", "image": "x",
                    "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": gpus.to_string()}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
           "status": {"phase": "Pending"}})
}

/// A `Gang` object.
pub fn gang(namespace: &str, name: &str, min_member: u32) -> Value {
    json!({"apiVersion": "kube-gang.io/v1alpha1", "kind": "Gang",
           "metadata": {"name": name, "namespace": namespace, "generation": 1},
           "spec": {"minMember": min_member}})
}
