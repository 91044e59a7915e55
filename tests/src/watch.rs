//! list and watch as kube-apiserver serves them: label selectors (`=`, `==`, `!=`, `in`, `notin`,
//! `key`, `!key`), field selectors on the fields the API server indexes for each kind (for pods:
//! `metadata.name`, `metadata.namespace`, `spec.nodeName`, `spec.schedulerName`, `status.phase`,
//! …; anything else is a 400 `field label not supported`), `limit`/`continue` pagination,
//! `allowWatchBookmarks` (`BOOKMARK` events), `timeoutSeconds` ending the stream, and 410 Gone
//! for a resourceVersion or continue token older than the last compaction.
//!
//! A watch with a selector sees an object that stops matching as `DELETED` and one that starts
//! matching as `ADDED`, as the API server's watch cache reports them.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::route::{Inner, Target};
use crate::status::ApiError;
use crate::store::{self, Change, Store, api_version, kind_name};
use crate::validation::Kind;

/// One label requirement.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Req {
    Exists(String),
    Absent(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed `labelSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas outside parentheses.
fn terms(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

impl LabelSelector {
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        for t in terms(s) {
            let bad = |why: &str| format!("unable to parse requirement: {t:?}: {why}");
            let set = |rest: &str| -> Result<Vec<String>, String> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| bad("expected (values)"))?;
                Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
            };
            let key_ok = |k: &str| -> Result<String, String> {
                let k = k.trim();
                let errs = crate::validation::qualified_name(k);
                if errs.is_empty() { Ok(k.to_string()) } else { Err(bad(&errs.join("; "))) }
            };
            let req = if let Some(k) = t.strip_prefix('!') {
                Req::Absent(key_ok(k)?)
            } else if let Some((k, v)) = t.split_once("!=") {
                Req::NotIn(key_ok(k)?, vec![v.trim().to_string()])
            } else if let Some((k, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                Req::In(key_ok(k)?, vec![v.trim().to_string()])
            } else if let Some((k, rest)) = t.split_once(" notin ") {
                Req::NotIn(key_ok(k)?, set(rest)?)
            } else if let Some((k, rest)) = t.split_once(" in ") {
                Req::In(key_ok(k)?, set(rest)?)
            } else if t.contains(' ') || t.contains('(') {
                return Err(bad("unsupported operator"));
            } else {
                Req::Exists(key_ok(t)?)
            };
            if let Req::In(_, vs) | Req::NotIn(_, vs) = &req {
                for v in vs {
                    if !crate::validation::label_value(v).is_empty() {
                        return Err(bad(&format!("invalid label value: {v:?}")));
                    }
                }
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Exists(k) => get(k).is_some(),
            Req::Absent(k) => get(k).is_none(),
            Req::In(k, vs) => get(k).is_some_and(|v| vs.iter().any(|x| x == v)),
            Req::NotIn(k, vs) => get(k).is_none_or(|v| vs.iter().all(|x| x != v)),
        })
    }
}

/// A parsed `fieldSelector`: `(field, value, equal)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, String, bool)>);

/// The fields kube-apiserver lets a selector use, per kind (`GetAttrs`/field label conversions).
fn selectable(kind: Kind, plural: &str) -> &'static [&'static str] {
    match kind {
        Kind::Pod => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        Kind::Node => &["metadata.name", "spec.unschedulable"],
        Kind::Namespace => &["metadata.name", "status.phase"],
        Kind::CoreEvent => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        Kind::Event => &[
            "metadata.name",
            "metadata.namespace",
            "regarding.kind",
            "regarding.namespace",
            "regarding.name",
            "regarding.uid",
            "regarding.apiVersion",
            "regarding.resourceVersion",
            "regarding.fieldPath",
            "reason",
            "reportingController",
            "type",
        ],
        _ if plural.is_empty() => &[],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

fn field_value(obj: &Value, field: &str) -> String {
    let pointer = format!("/{}", field.replace('.', "/"));
    match obj.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ if field == "spec.hostNetwork" || field == "spec.unschedulable" => "false".into(),
        _ => String::new(),
    }
}

impl FieldSelector {
    pub fn parse(s: &str, kind: Kind, plural: &str) -> Result<FieldSelector, String> {
        let mut out = Vec::new();
        for t in terms(s) {
            let (field, value, equal) = if let Some((f, v)) = t.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = t.split_once("==").or_else(|| t.split_once('=')) {
                (f, v, true)
            } else {
                return Err(format!("invalid selector: '{t}'; can't understand '{t}'"));
            };
            let field = field.trim();
            if !selectable(kind, plural).contains(&field) {
                return Err(format!("field label not supported: {field}"));
            }
            out.push((field.to_string(), value.trim().to_string(), equal));
        }
        Ok(FieldSelector(out))
    }

    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(f, v, equal)| (field_value(obj, f) == *v) == *equal)
    }
}

/// What a list or watch selects: a namespace (empty: all) and the selectors.
#[derive(Clone, Debug)]
pub struct Filter {
    pub namespace: String,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Filter {
    pub fn from_query(t: &Target, q: &Query) -> Result<Filter, ApiError> {
        let kind = store::kind(&t.res);
        let labels =
            LabelSelector::parse(q.get("labelSelector").unwrap_or("")).map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""), kind, &t.res.1)
            .map_err(ApiError::bad_request)?;
        Ok(Filter { namespace: t.namespace.clone(), labels, fields })
    }

    pub fn matches(&self, obj: &Value) -> bool {
        (self.namespace.is_empty()
            || obj.pointer("/metadata/namespace").and_then(Value::as_str) == Some(self.namespace.as_str()))
            && self.labels.matches(obj)
            && self.fields.matches(obj)
    }

    /// What a watch with this filter sends for a change, if anything.
    fn event(&self, c: &Change) -> Option<(&'static str, Value)> {
        let now = self.matches(&c.obj);
        match (c.ty, c.prev.as_ref().map(|p| self.matches(p))) {
            ("MODIFIED", Some(was)) => match (was, now) {
                (true, true) => Some(("MODIFIED", c.obj.clone())),
                (false, true) => Some(("ADDED", c.obj.clone())),
                (true, false) => Some(("DELETED", c.obj.clone())),
                (false, false) => None,
            },
            (ty, _) => now.then(|| (ty, c.obj.clone())),
        }
    }
}

/// Query parameters, decoded.
#[derive(Clone, Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    pub fn parse(q: &str) -> Query {
        Query(
            q.split('&')
                .filter(|kv| !kv.is_empty())
                .map(|kv| {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    (decode(k), decode(v))
                })
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1"))
    }
}

/// Percent-decoding (and `+` as space), as `application/x-www-form-urlencoded`.
fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(c) => {
                        out.push(c);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

/// A continue token: the list's resourceVersion, the last key returned, and how many items the
/// pages so far returned (for `remainingItemCount`).
fn token(rv: u64, ns: &str, name: &str, returned: usize) -> String {
    hex(&format!("{rv}\u{0}{ns}\u{0}{name}\u{0}{returned}"))
}

fn untoken(t: &str) -> Option<(u64, String, String, usize)> {
    let s = unhex(t)?;
    let mut parts = s.split('\u{0}');
    let rv = parts.next()?.parse().ok()?;
    let (ns, name) = (parts.next()?.to_string(), parts.next()?.to_string());
    Some((rv, ns, name, parts.next()?.parse().ok()?))
}

/// A list answer. A continued list keeps the first page's resourceVersion, so a watch from it
/// replays whatever changed while the pages were read.
///
/// A page costs its own items, as etcd's range read with a limit does: a namespaced list reads
/// only that namespace's range, and the walk stops at the first match past the page. An
/// unselective list's `remainingItemCount` (etcd's count of the range) is the count the store
/// keeps less what the pages returned, never a walk over the rest — an estimate when objects
/// come or go between pages, as the API documents it.
pub fn list(s: &Store, t: &Target, q: &Query) -> Result<Value, ApiError> {
    let filter = Filter::from_query(t, q)?;
    let limit: usize = match q.get("limit") {
        None | Some("") | Some("0") => usize::MAX,
        Some(l) => l.parse().map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
    };
    let (rv, after, returned) = match q.get("continue").filter(|c| !c.is_empty()) {
        None => (s.version, None, 0),
        Some(c) => {
            let (rv, ns, name, returned) = untoken(c).ok_or_else(|| ApiError::bad_request("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
            if rv < s.compacted {
                return Err(ApiError::expired(
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                ));
            }
            (rv, Some((ns, name)), returned)
        }
    };
    let empty = Default::default();
    let objects = s.objects.get(&t.res).unwrap_or(&empty);
    let ns = filter.namespace.clone();
    use std::ops::Bound::{Excluded, Included, Unbounded};
    let start = match &after {
        Some(k) => Excluded(k.clone()),
        None if !ns.is_empty() => Included((ns.clone(), String::new())),
        None => Unbounded,
    };
    let range = objects
        .range::<(String, String), _>((start, Unbounded))
        .take_while(|((n, _), _)| ns.is_empty() || *n == ns);
    let mut range = range.peekable();
    let mut items = Vec::new();
    let mut last = None;
    while items.len() < limit {
        let Some((k, v)) = range.next() else { break };
        if filter.matches(v) {
            items.push(v.clone());
            last = Some(k);
        }
    }
    let unselective = filter.labels.0.is_empty() && filter.fields.0.is_empty();
    let more = if unselective { range.peek().is_some() } else { range.any(|(_, v)| filter.matches(v)) };
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if more && let Some((last_ns, name)) = last {
        let returned = returned + items.len();
        meta["continue"] = json!(token(rv, last_ns, name, returned));
        if unselective {
            meta["remainingItemCount"] = json!(s.count(&t.res, &ns).saturating_sub(returned).max(1));
        }
    }
    Ok(
        json!({"apiVersion": api_version(&t.res.0), "kind": format!("{}List", kind_name(&t.res.1)), "metadata": meta, "items": items}),
    )
}

fn line(ty: &str, obj: &Value) -> Bytes {
    Bytes::from(format!("{}\n", json!({"type": ty, "object": obj})))
}

fn gone(from: u64, compacted: u64) -> Bytes {
    let status = ApiError::expired(format!("too old resource version: {from} ({compacted})")).to_status();
    line("ERROR", &status)
}

/// State of one open watch.
struct Stream {
    res: crate::store::Resource,
    rx: broadcast::Receiver<Arc<Change>>,
    expiry: tokio::sync::watch::Receiver<u64>,
    filter: Filter,
    /// Highest resourceVersion examined: every change up to it was sent or did not match.
    last: u64,
    deadline: tokio::time::Instant,
    bookmarks: Option<(tokio::time::Interval, Value)>,
    done: bool,
}

impl Stream {
    fn bookmark(&self) -> Option<Bytes> {
        let (_, template) = self.bookmarks.as_ref()?;
        let mut b = template.clone();
        b["metadata"]["resourceVersion"] = json!(self.last.to_string());
        Some(line("BOOKMARK", &b))
    }

    async fn next(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        loop {
            let tick = async {
                match self.bookmarks.as_mut() {
                    Some((i, _)) => {
                        i.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            // Biased: a compaction made before a change is seen before that change.
            tokio::select! {
                biased;
                _ = self.expiry.changed() => {
                    self.done = true;
                    return Some(gone(self.last, self.last + 1));
                }
                _ = tokio::time::sleep_until(self.deadline) => {
                    // timeoutSeconds: the server ends the watch (a last bookmark first).
                    self.done = true;
                    return self.bookmark();
                }
                got = self.rx.recv() => match got {
                    Ok(c) if c.rv <= self.last => {}
                    Ok(c) => {
                        self.last = c.rv;
                        if c.res != self.res {
                            continue;
                        }
                        if let Some((ty, obj)) = self.filter.event(&c) {
                            return Some(line(ty, &obj));
                        }
                    }
                    // Too slow a reader: the server closes the watch; the client resumes from
                    // the last resourceVersion it saw and the history fills the gap.
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => return None,
                },
                () = tick => {
                    if let Some(b) = self.bookmark() {
                        return Some(b);
                    }
                }
            }
        }
    }
}

/// A watch answer: newline-delimited events until `timeoutSeconds`, compaction, or a slow reader.
pub fn watch(inner: &Arc<Inner>, t: &Target, q: &Query) -> Response {
    let filter = match Filter::from_query(t, q) {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    let from: u64 = match q.get("resourceVersion").unwrap_or("") {
        "" => 0,
        v => match v.parse() {
            Ok(v) => v,
            Err(_) => {
                return ApiError::bad_request(format!("invalid resource version: {v:?}")).into_response();
            }
        },
    };
    let timeout = q.get("timeoutSeconds").and_then(|v| v.parse::<u64>().ok()).unwrap_or(1800);
    let (initial, rx, last) = {
        let s = inner.store.lock().expect("store");
        if from != 0 && from < s.compacted {
            let body = gone(from, s.compacted);
            return (StatusCode::OK, [("content-type", "application/json")], body).into_response();
        }
        let initial: Vec<Bytes> = if from == 0 {
            // No resourceVersion: the current state as synthetic ADDED events, then changes.
            s.objects
                .get(&t.res)
                .into_iter()
                .flat_map(|m| m.values())
                .filter(|o| filter.matches(o))
                .map(|o| line("ADDED", o))
                .collect()
        } else {
            s.since(&t.res, from).iter().filter_map(|c| filter.event(c)).map(|(ty, o)| line(ty, &o)).collect()
        };
        (initial, inner.changes.subscribe(), s.version)
    };
    let bookmarks = q.flag("allowWatchBookmarks").then(|| {
        let every = *inner.bookmark_every.lock().expect("bookmark interval");
        let mut i = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        i.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let template = json!({"kind": kind_name(&t.res.1), "apiVersion": api_version(&t.res.0), "metadata": {"resourceVersion": ""}});
        (i, template)
    });
    let mut expiry = inner.expiry.subscribe();
    expiry.mark_unchanged();
    let stream = Stream {
        res: t.res.clone(),
        rx,
        expiry,
        filter,
        last,
        deadline: tokio::time::Instant::now() + Duration::from_secs(timeout),
        bookmarks,
        done: false,
    };
    let live = futures::stream::unfold(stream, |mut st| async move {
        st.next().await.map(|b| (Ok::<Bytes, std::io::Error>(b), st))
    });
    let body = futures::StreamExt::chain(futures::stream::iter(initial.into_iter().map(Ok)), live);
    (StatusCode::OK, [("content-type", "application/json")], Body::from_stream(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(labels: Value, node: Option<&str>, phase: &str) -> Value {
        let mut p = json!({"metadata": {"name": "p", "namespace": "ml", "labels": labels},
                           "spec": {"schedulerName": "gang-scheduler"}, "status": {"phase": phase}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    }

    #[test]
    fn label_selectors() {
        let p = pod(json!({"app": "a", "tier": "gold"}), None, "Pending");
        for (sel, want) in [
            ("app=a", true),
            ("app==a,tier=gold", true),
            ("app!=a", false),
            ("app in (a, b)", true),
            ("app notin (a)", false),
            ("tier", true),
            ("!tier", false),
            ("missing!=x", true),
            ("missing in (x)", false),
            ("", true),
        ] {
            assert_eq!(LabelSelector::parse(sel).unwrap().matches(&p), want, "{sel}");
        }
        assert!(LabelSelector::parse("app in a").is_err());
        assert!(LabelSelector::parse("bad key=1").is_err());
        assert!(LabelSelector::parse("app=-x").is_err());
    }

    #[test]
    fn pod_field_selectors_as_the_api_server_supports_them() {
        let pending = pod(json!({}), None, "Pending");
        let bound = pod(json!({}), Some("n1"), "Running");
        let sel = |s: &str| FieldSelector::parse(s, Kind::Pod, "pods").unwrap();
        assert!(sel("spec.nodeName=").matches(&pending));
        assert!(!sel("spec.nodeName=").matches(&bound));
        assert!(sel("spec.nodeName=n1,status.phase=Running").matches(&bound));
        assert!(sel("spec.schedulerName=gang-scheduler,status.phase!=Succeeded").matches(&pending));
        assert!(sel("metadata.namespace=ml,metadata.name=p").matches(&pending));
        assert!(sel("spec.hostNetwork=false").matches(&pending));
        assert_eq!(
            FieldSelector::parse("spec.priority=1", Kind::Pod, "pods").unwrap_err(),
            "field label not supported: spec.priority"
        );
        assert!(
            FieldSelector::parse("spec.nodeName=n1", Kind::Gang, "gangs").is_err(),
            "custom resources select by name and namespace only"
        );
    }

    #[test]
    fn a_watch_with_a_selector_sees_objects_leave_and_enter_it() {
        let f = Filter {
            namespace: String::new(),
            labels: LabelSelector::default(),
            fields: FieldSelector::parse("spec.nodeName=", Kind::Pod, "pods").unwrap(),
        };
        let before = pod(json!({}), None, "Pending");
        let after = pod(json!({}), Some("n1"), "Pending");
        let res = ("/api/v1".to_string(), "pods".to_string());
        let bind = Change {
            rv: 2,
            res: res.clone(),
            ty: "MODIFIED",
            obj: after.clone(),
            prev: Some(before.clone()),
        };
        assert_eq!(f.event(&bind).map(|e| e.0), Some("DELETED"));
        let unbind = Change {
            rv: 3,
            res: res.clone(),
            ty: "MODIFIED",
            obj: before.clone(),
            prev: Some(after.clone()),
        };
        assert_eq!(f.event(&unbind).map(|e| e.0), Some("ADDED"));
        let other = Change { rv: 4, res, ty: "MODIFIED", obj: after.clone(), prev: Some(after) };
        assert_eq!(f.event(&other), None);
    }

    #[test]
    fn query_decoding_and_tokens() {
        let q = Query::parse("labelSelector=app%20in%20(a%2Cb)&watch=true&limit=5");
        assert_eq!(q.get("labelSelector"), Some("app in (a,b)"));
        assert!(q.flag("watch"));
        assert_eq!(untoken(&token(7, "ml", "w-1", 4)), Some((7, "ml".to_string(), "w-1".to_string(), 4)));
        assert_eq!(untoken("zz"), None);
    }
}
