//! The HTTP front: every request is recorded, meets its fault or delay, then is served as one
//! transaction on the store (a watch excepted) whose answer is recorded in the same transaction —
//! whoever sees its effect also sees that it was answered.
//!
//! Writes follow kube-apiserver's order: decode (400), preconditions (409), the `/status` split
//! (the main resource cannot change `.status`, `/status` changes nothing else), system fields
//! (`uid`, `creationTimestamp`, `generation` bumped when anything but metadata and status
//! changes), validation (422), then the store.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};

use crate::faults::{self, FaultKind};
use crate::patch::{self, PatchType};
use crate::status::{self, ApiError, FieldError};
use crate::store::{self, Recorded, Resource, Store, format_time};
use crate::subresources;
use crate::validation::{self, Kind};
use crate::watch::{self, Query};

pub use crate::route::{Inner, Target, parse_path, qualified};

fn version_of(res: &Resource) -> String {
    res.0.rsplit('/').next().unwrap_or("v1").to_string()
}

/// Serves one HTTP request (the axum fallback handler).
pub async fn handle(State(inner): State<Arc<Inner>>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let (user_agent, content_type) = {
        let header =
            |name: &str| req.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        (header("user-agent"), header("content-type"))
    };
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
        let fault = faults::take(&mut s.faults, method.as_str(), &path);
        let delay = faults::delay(&s.delays, method.as_str(), &path);
        (index, fault, delay)
    };
    let request = Incoming { method, path, query, content_type, bytes };
    let (delay, fault) = match fault {
        Some(FaultKind::Slow(d)) => (Some(delay.map_or(d, |e| e.max(d))), None),
        other => (delay, other),
    };
    let Some(d) = delay else { return respond(&inner, index, fault, &request) };
    // A request the server holds is served when the hold ends even if its client went away
    // meanwhile, as a write kube-apiserver has begun storing is not undone when the connection
    // drops: the worst case for a client that died (or gave up) mid-request.
    let held = tokio::spawn(async move {
        tokio::time::sleep(d).await;
        respond(&inner, index, fault, &request)
    });
    held.await.unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Answers a request as its fault (if any) says.
fn respond(inner: &Arc<Inner>, index: usize, fault: Option<FaultKind>, request: &Incoming) -> Response {
    match fault {
        Some(FaultKind::Status(code)) => {
            let resp = ApiError::injected(code).into_response();
            if let Some(r) = inner.store.lock().expect("store").requests.get_mut(index) {
                r.status = resp.status().as_u16();
            }
            resp
        }
        Some(FaultKind::LoseResponse) => {
            // Served, then the connection breaks before the body: the client sees an error.
            let _ = serve(inner, None, request);
            let broken = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped by the fake"))
            });
            (StatusCode::OK, Body::from_stream(broken)).into_response()
        }
        Some(FaultKind::BoundElsewhere(node)) => {
            if let Some(t) = parse_path(&request.path)
                && let Some(name) = &t.name
            {
                let mut s = inner.store.lock().expect("store");
                subresources::assign(&mut s, &t, name, &node, &json!({}));
            }
            serve(inner, Some(index), request)
        }
        Some(FaultKind::Slow(_)) | None => serve(inner, Some(index), request),
    }
}

/// A request as the fake reads it.
#[derive(Debug)]
pub struct Incoming {
    pub method: Method,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub bytes: Bytes,
}

fn serve(inner: &Arc<Inner>, index: Option<usize>, r: &Incoming) -> Response {
    let Some(resp) = serve_outside(inner, r) else { return serve_in_store(inner, index, r) };
    if let Some(i) = index
        && let Some(rec) = inner.store.lock().expect("store").requests.get_mut(i)
    {
        rec.status = resp.status().as_u16();
    }
    resp
}

/// What is answered without a transaction on the store: unknown paths, unserved resources,
/// watches (recorded as 200 when they start).
fn serve_outside(inner: &Arc<Inner>, r: &Incoming) -> Option<Response> {
    let Some(t) = parse_path(&r.path) else {
        return Some(ApiError::not_found("", &r.path).into_response());
    };
    if !inner.served.lock().expect("served").contains(&t.res) {
        let mut e = ApiError::not_found("", "");
        e.message = format!("the server could not find the requested resource ({})", t.res.1);
        e.details = None;
        return Some(e.into_response());
    }
    let q = Query::parse(&r.query);
    if r.method == Method::GET && t.name.is_none() && q.flag("watch") {
        return Some(watch::watch(inner, &t, &q));
    }
    None
}

fn serve_in_store(inner: &Arc<Inner>, index: Option<usize>, r: &Incoming) -> Response {
    let Some(t) = parse_path(&r.path) else { return ApiError::not_found("", &r.path).into_response() };
    let q = Query::parse(&r.query);
    let body = if r.bytes.is_empty() {
        Ok(Value::Null)
    } else {
        serde_json::from_slice::<Value>(&r.bytes)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))
    };
    let mut guard = inner.store.lock().expect("store");
    let s = &mut *guard;
    let kind = store::kind(&t.res);
    let sub = t.sub.as_deref();
    let status_ok = sub.is_none() || (sub == Some("status") && kind.has_status());
    let answer = body.and_then(|body| match (&r.method, t.name.as_deref(), sub) {
        (&Method::GET, None, None) => watch::list(s, &t, &q).map(|v| status::object(200, &v)),
        (&Method::GET, Some(name), _) if status_ok => get(s, &t, name).map(|v| status::object(200, &v)),
        (&Method::POST, None, None) => create(s, &t, body).map(|v| status::object(201, &v)),
        (&Method::PUT, Some(name), _) if status_ok => {
            replace(s, &t, name, body).map(|v| status::object(200, &v))
        }
        (&Method::PATCH, Some(name), _) if status_ok => {
            patch(s, &t, name, &r.content_type, &body).map(|v| status::object(200, &v))
        }
        (&Method::DELETE, Some(name), None) => {
            if !body.is_null() {
                use k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions;
                serde_json::from_value::<DeleteOptions>(body.clone()).map_err(|e| {
                    ApiError::bad_request(format!(
                        "DeleteOptions in version \"v1\" cannot be handled as a DeleteOptions: {e}"
                    ))
                })?;
            }
            subresources::delete(s, &t, name, &body).map(|v| status::object(200, &v))
        }
        (&Method::POST, Some(name), Some("binding")) if kind == Kind::Pod => {
            subresources::bind(s, &t, name, &body).map(|()| status::success(201))
        }
        (&Method::POST, Some(name), Some("eviction")) if kind == Kind::Pod => {
            subresources::evict(s, &t, name, &body).map(|()| status::success(201))
        }
        (_, Some(_), Some(other)) if !status_ok && other != "binding" && other != "eviction" => {
            Err(ApiError::not_found(&format!("{}/{other}", t.res.1), ""))
        }
        (m, _, _) => Err(ApiError::method_not_allowed(&format!("{m} {}", r.path))),
    });
    let resp = answer.unwrap_or_else(IntoResponse::into_response);
    if let Some(rec) = index.and_then(|i| s.requests.get_mut(i)) {
        rec.status = resp.status().as_u16();
    }
    resp
}

fn get(s: &Store, t: &Target, name: &str) -> Result<Value, ApiError> {
    s.get(&t.res, &t.key(name)).cloned().ok_or_else(|| ApiError::not_found(&qualified(&t.res), name))
}

fn meta_str<'a>(v: &'a Value, field: &str) -> &'a str {
    v.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or("")
}

/// The namespace in the body must be the request's (or absent).
fn check_namespace(t: &Target, body: &Value) -> Result<(), ApiError> {
    let ns = meta_str(body, "namespace");
    if !ns.is_empty() && ns != t.namespace {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

fn set_meta(obj: &mut Value, field: &str, v: Value) {
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    if v.is_null() {
        if let Some(m) = obj["metadata"].as_object_mut() {
            m.remove(field);
        }
    } else {
        obj["metadata"][field] = v;
    }
}

/// Kinds whose `metadata.generation` tracks spec changes.
fn tracks_generation(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Pod
            | Kind::PodDisruptionBudget
            | Kind::Gang
            | Kind::ResourceSlice
            | Kind::DeviceClass
            | Kind::VolcanoPodGroup
            | Kind::GrovePodGang
            | Kind::Custom
    )
}

fn create(s: &mut Store, t: &Target, mut body: Value) -> Result<Value, ApiError> {
    let kind = store::kind(&t.res);
    validation::decode(kind, &version_of(&t.res), &body)?;
    check_namespace(t, &body)?;
    if !t.namespace.is_empty() {
        set_meta(&mut body, "namespace", json!(t.namespace));
    }
    if meta_str(&body, "name").is_empty() && !meta_str(&body, "generateName").is_empty() {
        // SimpleNameGenerator: the base cut to 58 characters, then five random ones.
        let base: String = meta_str(&body, "generateName").chars().take(58).collect();
        let name = format!("{base}{}", s.suffix());
        set_meta(&mut body, "name", json!(name));
    }
    validation::validate(kind, &t.res.1, &body, &t.namespace)?;
    let name = meta_str(&body, "name").to_string();
    let key = t.key(&name);
    if s.get(&t.res, &key).is_some() {
        return Err(ApiError::already_exists(&qualified(&t.res), &name));
    }
    let now = s.now();
    set_meta(&mut body, "uid", json!(format!("{:08x}-fake-{:012x}", s.version + 1, s.generated)));
    set_meta(&mut body, "creationTimestamp", json!(format_time(now)));
    set_meta(&mut body, "resourceVersion", Value::Null);
    set_meta(&mut body, "deletionTimestamp", Value::Null);
    if tracks_generation(kind) {
        set_meta(&mut body, "generation", json!(1));
    }
    match kind {
        Kind::Pod => body["status"] = json!({"phase": "Pending"}),
        // A claim's status is not the creator's to set (`PrepareForCreate`).
        Kind::ResourceClaim => {
            if let Some(m) = body.as_object_mut() {
                m.remove("status");
            }
        }
        _ => {}
    }
    validation::normalize(kind, &mut body);
    Ok(s.commit(&t.res, key, body, "ADDED"))
}

/// Preconditions a write carries in its body: `metadata.resourceVersion` and `metadata.uid`.
fn preconditions(t: &Target, name: &str, current: &Value, new: &Value) -> Result<(), ApiError> {
    let want = meta_str(new, "resourceVersion");
    if !want.is_empty() && want != meta_str(current, "resourceVersion") {
        return Err(ApiError::stale(&qualified(&t.res), name));
    }
    let uid = meta_str(new, "uid");
    let have = meta_str(current, "uid");
    if !uid.is_empty() && uid != have {
        return Err(ApiError::conflict(
            &qualified(&t.res),
            name,
            &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
        ));
    }
    Ok(())
}

/// The object an update stores: the `/status` split, system fields kept, generation bumped.
fn updated(kind: Kind, sub: Option<&str>, current: &Value, new: &Value) -> Value {
    let mut out = if kind.has_status() && sub == Some("status") {
        let mut kept = current.clone();
        match new.get("status") {
            Some(st) if !st.is_null() => kept["status"] = st.clone(),
            _ => {
                kept.as_object_mut().map(|m| m.remove("status"));
            }
        }
        if !kind.status_keeps_metadata() {
            for f in ["labels", "annotations"] {
                set_meta(
                    &mut kept,
                    f,
                    new.pointer(&format!("/metadata/{f}")).cloned().unwrap_or(Value::Null),
                );
            }
        }
        kept
    } else {
        let mut out = new.clone();
        if kind.has_status() {
            match current.get("status") {
                Some(st) => out["status"] = st.clone(),
                None => {
                    out.as_object_mut().map(|m| m.remove("status"));
                }
            }
        }
        out
    };
    for f in [
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        set_meta(&mut out, f, current.pointer(&format!("/metadata/{f}")).cloned().unwrap_or(Value::Null));
    }
    if tracks_generation(kind) && sub != Some("status") {
        // Without a status subresource the status is content like any other: a custom
        // resource's strategy bumps the generation for any change but to metadata.
        let strip = |v: &Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("metadata");
                if kind.has_status() {
                    m.remove("status");
                }
            }
            v
        };
        if strip(current) != strip(&out) {
            let g = current.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            set_meta(&mut out, "generation", json!(g + 1));
        }
    }
    out
}

fn replace(s: &mut Store, t: &Target, name: &str, body: Value) -> Result<Value, ApiError> {
    let kind = store::kind(&t.res);
    validation::decode(kind, &version_of(&t.res), &body)?;
    check_namespace(t, &body)?;
    let body_name = meta_str(&body, "name");
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    let key = t.key(name);
    let current =
        s.get(&t.res, &key).cloned().ok_or_else(|| ApiError::not_found(&qualified(&t.res), name))?;
    preconditions(t, name, &current, &body)?;
    let mut out = updated(kind, t.sub.as_deref(), &current, &body);
    validation::validate(kind, &t.res.1, &out, &t.namespace)?;
    validation::update(kind, &t.res.1, t.sub.as_deref(), &current, &out)?;
    validation::normalize(kind, &mut out);
    Ok(s.commit(&t.res, key, out, "MODIFIED"))
}

fn patch(s: &mut Store, t: &Target, name: &str, content_type: &str, body: &Value) -> Result<Value, ApiError> {
    let kind = store::kind(&t.res);
    let ty = PatchType::from_content_type(content_type)?;
    if ty == PatchType::Strategic && !kind.built_in() {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    let key = t.key(name);
    let current =
        s.get(&t.res, &key).cloned().ok_or_else(|| ApiError::not_found(&qualified(&t.res), name))?;
    let patched = patch::apply(ty, &current, body)?;
    preconditions(t, name, &current, &patched)?;
    if let Err(e) = validation::decode(kind, &version_of(&t.res), &patched) {
        // A patched object that does not decode: 422 on the `patch` field, as the API server says.
        return Err(ApiError::invalid(
            "",
            "",
            &[FieldError::invalid("patch", &patched.to_string(), e.message)],
        ));
    }
    let mut out = updated(kind, t.sub.as_deref(), &current, &patched);
    validation::validate(kind, &t.res.1, &out, &t.namespace)?;
    validation::update(kind, &t.res.1, t.sub.as_deref(), &current, &out)?;
    validation::normalize(kind, &mut out);
    Ok(s.commit(&t.res, key, out, "MODIFIED"))
}
