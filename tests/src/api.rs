//! [`FakeApi`]: start a fake, seed it, inject faults, move its clock, and read what it was asked.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::faults::{Fault, FaultKind};
use crate::server::{self, Inner};
use crate::store::{self, Recorded, Resource, Store};
use crate::{disruption, subresources};

/// A running fake API server.
#[derive(Clone, Debug)]
pub struct FakeApi {
    inner: Arc<Inner>,
    pub addr: SocketAddr,
}

/// The answer to an in-process request ([`FakeApi::call`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
    pub body: Value,
}

impl FakeApi {
    /// Starts a fake serving the core kinds (nodes, pods, namespaces, events in both APIs, leases,
    /// priority classes, PodDisruptionBudgets, PodTemplates, PVCs, PVs, StorageClasses, CSINodes)
    /// plus `extra` resources as `(prefix, plural)` (ResourceClaims, ResourceSlices and
    /// DeviceClasses among them, when a test's cluster has DRA).
    pub async fn start(extra: &[(&str, &str)]) -> FakeApi {
        let (changes, _) = broadcast::channel(1 << 16);
        let mut served: Vec<Resource> = [
            ("/api/v1", "nodes"),
            ("/api/v1", "pods"),
            ("/api/v1", "namespaces"),
            ("/api/v1", "events"),
            ("/api/v1", "podtemplates"),
            ("/apis/events.k8s.io/v1", "events"),
            ("/apis/coordination.k8s.io/v1", "leases"),
            ("/apis/scheduling.k8s.io/v1", "priorityclasses"),
            ("/apis/policy/v1", "poddisruptionbudgets"),
            ("/api/v1", "persistentvolumeclaims"),
            ("/api/v1", "persistentvolumes"),
            ("/apis/storage.k8s.io/v1", "storageclasses"),
            ("/apis/storage.k8s.io/v1", "csinodes"),
        ]
        .iter()
        .map(|(p, r)| (p.to_string(), r.to_string()))
        .collect();
        served.extend(extra.iter().map(|(p, r)| (p.to_string(), r.to_string())));
        let inner = Arc::new(Inner {
            store: Mutex::new(Store::new(changes.clone())),
            changes,
            served: Mutex::new(served),
            expiry: tokio::sync::watch::channel(0).0,
            bookmark_every: Mutex::new(Duration::from_secs(1)),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let app = axum::Router::new().fallback(server::handle).with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        // The kubelet's part of graceful deletion: pods go when their grace period ends.
        let weak = Arc::downgrade(&inner);
        tokio::spawn(async move {
            while let Some(inner) = weak.upgrade() {
                subresources::reap(&mut inner.store.lock().expect("store"));
                drop(inner);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
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

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.inner.store.lock().expect("store")
    }

    /// Adds or replaces an object as a controller would, unchecked, notifying watches. A missing
    /// `uid` becomes `uid-{resourceVersion}`, a missing `creationTimestamp` the start of 2026.
    pub fn put(&self, mut obj: Value) {
        let (res, key) = store::locate(&obj);
        let mut s = self.store();
        let existed = s.get(&res, &key).is_some();
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.entry("uid").or_insert_with(|| Value::String(format!("uid-{}", s.version + 1)));
            meta.entry("creationTimestamp").or_insert_with(|| Value::String("2026-01-01T00:00:00Z".into()));
        }
        s.commit(&res, key, obj, if existed { "MODIFIED" } else { "ADDED" });
    }

    /// Deletes an object at once, notifying watches.
    pub fn remove(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let res = store::resource_of(api_version, kind);
        let key = (namespace.to_string(), name.to_string());
        let mut s = self.store();
        let obj = s.get(&res, &key)?.clone();
        Some(s.commit(&res, key, obj, "DELETED"))
    }

    /// The stored object.
    pub fn get(&self, api_version: &str, kind: &str, namespace: &str, name: &str) -> Option<Value> {
        let res = store::resource_of(api_version, kind);
        self.store().get(&res, &(namespace.to_string(), name.to_string())).cloned()
    }

    /// Every object of `kind` in `namespace` (all namespaces when empty), in key order.
    pub fn list(&self, api_version: &str, kind: &str, namespace: &str) -> Vec<Value> {
        let res = store::resource_of(api_version, kind);
        let s = self.store();
        s.objects
            .get(&res)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(|((ns, _), _)| namespace.is_empty() || ns == namespace)
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.store().requests.clone()
    }

    /// Requests with this method whose path ends with `suffix`.
    pub fn requests_to(&self, method: &str, suffix: &str) -> Vec<Recorded> {
        self.store()
            .requests
            .iter()
            .filter(|r| r.method == method && r.path.ends_with(suffix))
            .cloned()
            .collect()
    }

    /// Answers the next `times` requests matching `method` and `path_suffix` with `status`.
    pub fn fault(&self, method: &str, path_suffix: &str, status: u16, times: usize) {
        self.fault_with(method, path_suffix, FaultKind::Status(status), times);
    }

    /// Injects a fault of any kind for the next `times` matching requests.
    /// Drops every fault not yet served.
    pub fn clear_faults(&self) {
        self.store().faults.clear();
    }

    pub fn fault_with(&self, method: &str, path_suffix: &str, kind: FaultKind, times: usize) {
        self.store().faults.push(Fault {
            method: method.into(),
            path_suffix: path_suffix.into(),
            kind,
            times,
        });
    }

    /// Delays every request matching `method` and `path_suffix` by `delay` before serving it.
    pub fn delay(&self, method: &str, path_suffix: &str, delay: Duration) {
        self.store().delays.push((method.into(), path_suffix.into(), delay));
    }

    /// Compacts: history is forgotten, every open watch ends with a 410 Gone `ERROR` event, and
    /// a watch or continue token from before now gets 410 — the client must list again.
    pub fn compact(&self) {
        {
            let mut s = self.store();
            s.compacted = s.version;
            s.history.clear();
        }
        self.inner.expiry.send_modify(|e| *e += 1);
    }

    /// How often a watch that allows bookmarks gets a `BOOKMARK` (1 s unless set).
    pub fn bookmark_every(&self, every: Duration) {
        *self.inner.bookmark_every.lock().expect("bookmark interval") = every;
    }

    /// Runs the disruption controller from now on: every PodDisruptionBudget's status follows
    /// its pods ([`crate::disruption`]); computed at once for the budgets already stored.
    pub fn run_disruption_controller(&self) {
        let mut s = self.store();
        s.on_pod_change = Some(disruption::reconcile);
        let budgets = ("/apis/policy/v1".to_string(), "poddisruptionbudgets".to_string());
        let namespaces: std::collections::BTreeSet<String> =
            s.objects.get(&budgets).into_iter().flat_map(|m| m.keys()).map(|(ns, _)| ns.clone()).collect();
        for ns in namespaces {
            disruption::reconcile(&mut s, &ns);
        }
    }

    /// Runs the PV controller (and a CSI provisioner) from now on: claims are bound and provisioned
    /// as the scheduler's binder asks ([`crate::pv_controller::pv_controller`]); done at once for what
    /// is stored.
    pub fn run_pv_controller(&self) {
        let mut s = self.store();
        s.on_storage_change = Some(crate::pv_controller::pv_controller);
        crate::pv_controller::pv_controller(&mut s);
    }

    /// Moves the fake's clock forward: pods whose grace period ends by then are removed.
    pub fn advance(&self, by: Duration) {
        let mut s = self.store();
        s.clock_offset += by;
        subresources::reap(&mut s);
    }

    /// Starts serving a resource later (a CRD installed while the scheduler runs).
    pub fn serve(&self, prefix: &str, plural: &str) {
        self.inner.served.lock().expect("served").push((prefix.into(), plural.into()));
    }

    /// Sends one request in-process, through the same handler HTTP requests go through, and
    /// returns the raw response (a watch's body streams).
    pub async fn send(&self, method: &str, uri: &str, content_type: &str, body: &str) -> Response {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", content_type)
            .body(Body::from(body.to_string()))
            .unwrap_or_default();
        server::handle(State(self.inner.clone()), req).await
    }

    /// [`FakeApi::send`], the answer read whole (not for watches).
    pub async fn call(&self, method: &str, uri: &str, content_type: &str, body: &Value) -> Answer {
        let body = if body.is_null() { String::new() } else { body.to_string() };
        let resp = self.send(method, uri, content_type, &body).await;
        let status = resp.status().as_u16();
        let retry_after = resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(String::from);
        let bytes = axum::body::to_bytes(resp.into_body(), 64 << 20).await.unwrap_or_default();
        Answer { status, retry_after, body: serde_json::from_slice(&bytes).unwrap_or(json!(null)) }
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
