//! `pods/binding`, `pods/eviction` and graceful deletion, as kube-apiserver's pod storage
//! (`pkg/registry/core/pod/storage`) serves them.
//!
//! - **Binding**: the body's `metadata.uid` (and `resourceVersion`) are preconditions; a pod
//!   being deleted, already bound, or still carrying `spec.schedulingGates` is refused with 409
//!   Conflict (`Operation cannot be fulfilled on pods/binding "x": pod x has non-empty
//!   .spec.schedulingGates`); a bound pod gets `PodScheduled=True` and loses its
//!   `nominatedNodeName`.
//! - **Eviction**: pods that are Pending, finished or already terminating are deleted without a
//!   budget; otherwise the one PodDisruptionBudget selecting the pod decides: a budget whose
//!   status is older than its spec is 429 with `Retry-After: 10`; `disruptionsAllowed: 0` is 429
//!   `Cannot evict pod as it would violate the pod's disruption budget.` with a
//!   `DisruptionBudget` cause naming the budget; else one disruption is consumed (the pod noted in
//!   `status.disruptedPods`) and the pod deleted gracefully. Two budgets selecting one pod is a
//!   500, as in the API server. (The unhealthy-pod eviction policy is not modelled: every
//!   running pod counts as healthy.)
//! - **Graceful deletion**: a bound, unfinished pod gets `deletionTimestamp` (now plus its grace
//!   period: the request's, else `spec.terminationGracePeriodSeconds`, else 30 s) and is removed
//!   when the fake's clock passes it ([`reap`]; tests move the clock with
//!   [`crate::FakeApi::advance`]). Other pods, and other kinds, go at once.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use crate::route::{Target, qualified};
use crate::status::{ApiError, FieldError};
use crate::store::{Store, format_time};

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Binds `name` to `node` (no checks): what a successful binding, or another scheduler, does.
pub fn assign(s: &mut Store, t: &Target, name: &str, node: &str, annotations: &Value) -> bool {
    let key = t.key(name);
    let Some(mut pod) = s.get(&t.res, &key).cloned() else { return false };
    let now = format_time(s.now());
    pod["spec"]["nodeName"] = json!(node);
    if let Some(st) = pod.get_mut("status").and_then(Value::as_object_mut) {
        st.remove("nominatedNodeName");
    }
    if let Some(a) = annotations.as_object().filter(|a| !a.is_empty()) {
        for (k, v) in a {
            pod["metadata"]["annotations"][k] = v.clone();
        }
    }
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    if !pod["status"].get("conditions").is_some_and(Value::is_array) {
        pod["status"]["conditions"] = json!([]);
    }
    if let Some(list) = pod["status"]["conditions"].as_array_mut() {
        match list.iter_mut().find(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled")) {
            Some(c) => {
                if c.get("status").and_then(Value::as_str) != Some("True") {
                    c["lastTransitionTime"] = json!(now);
                }
                c["status"] = json!("True");
                if let Some(m) = c.as_object_mut() {
                    m.remove("reason");
                    m.remove("message");
                }
            }
            None => list.push(json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": now})),
        }
    }
    s.commit(&t.res, key, pod, "MODIFIED");
    true
}

/// `POST pods/{name}/binding`.
pub fn bind(s: &mut Store, t: &Target, name: &str, body: &Value) -> Result<(), ApiError> {
    serde_json::from_value::<k8s_openapi::api::core::v1::Binding>(body.clone()).map_err(|e| {
        ApiError::bad_request(format!("Binding in version \"v1\" cannot be handled as a Binding: {e}"))
    })?;
    if str_at(body, "/metadata/name") != name {
        return Err(ApiError::bad_request("name in URL does not match name in Binding object"));
    }
    let mut errs = Vec::new();
    let target_kind = str_at(body, "/target/kind");
    if !target_kind.is_empty() && target_kind != "Node" {
        errs.push(FieldError::not_supported("target.kind", target_kind, &["Node", "<empty>"]));
    }
    let node = str_at(body, "/target/name");
    if node.is_empty() {
        errs.push(FieldError::required("target.name", ""));
    }
    if !errs.is_empty() {
        return Err(ApiError::invalid("Binding", name, &errs));
    }
    let pod = s.get(&t.res, &t.key(name)).ok_or_else(|| ApiError::not_found("pods", name))?;
    let refuse = |why: String| Err(ApiError::conflict("pods/binding", name, &why));
    let (uid, have) = (str_at(body, "/metadata/uid"), str_at(pod, "/metadata/uid"));
    if !uid.is_empty() && uid != have {
        return refuse(format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"
        ));
    }
    let rv = str_at(body, "/metadata/resourceVersion");
    if !rv.is_empty() && rv != str_at(pod, "/metadata/resourceVersion") {
        return refuse(
            "the object has been modified; please apply your changes to the latest version and try again"
                .into(),
        );
    }
    if !str_at(pod, "/metadata/deletionTimestamp").is_empty() {
        return refuse(format!("pod {name} is being deleted, cannot be assigned to a host"));
    }
    let bound = str_at(pod, "/spec/nodeName");
    if !bound.is_empty() {
        return refuse(format!("pod {name} is already assigned to node {bound:?}"));
    }
    if pod.pointer("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty()) {
        return refuse(format!("pod {name} has non-empty .spec.schedulingGates"));
    }
    let node = node.to_string();
    let annotations = body.pointer("/metadata/annotations").cloned().unwrap_or(Value::Null);
    assign(s, t, name, &node, &annotations);
    Ok(())
}

/// Whether a PodDisruptionBudget's `spec.selector` selects these labels (policy/v1: an empty
/// selector selects every pod of the namespace, a missing one none).
pub fn selects(pdb: &Value, labels: &Value) -> bool {
    let Some(sel) = pdb.pointer("/spec/selector").filter(|s| s.is_object()) else { return false };
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_label = sel
        .get("matchLabels")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| get(k) == v.as_str());
    let by_expr = sel.get("matchExpressions").and_then(Value::as_array).into_iter().flatten().all(|e| {
        let key = str_at(e, "/key");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match str_at(e, "/operator") {
            "In" => get(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(key).is_some(),
            "DoesNotExist" => get(key).is_none(),
            _ => false,
        }
    });
    by_label && by_expr
}

/// The cause every budget refusal carries.
fn budget_cause(e: &mut ApiError, message: String) {
    let details = e.details.get_or_insert_with(|| json!({}));
    details["causes"] = json!([{"reason": "DisruptionBudget", "message": message}]);
}

/// `POST pods/{name}/eviction` (policy/v1).
pub fn evict(s: &mut Store, t: &Target, name: &str, body: &Value) -> Result<(), ApiError> {
    serde_json::from_value::<k8s_openapi::api::policy::v1::Eviction>(body.clone()).map_err(|e| {
        ApiError::bad_request(format!("Eviction in version \"v1\" cannot be handled as a Eviction: {e}"))
    })?;
    if str_at(body, "/metadata/name") != name {
        return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
    }
    let pod = s.get(&t.res, &t.key(name)).cloned().ok_or_else(|| ApiError::not_found("pods", name))?;
    let options = body.get("deleteOptions").cloned().unwrap_or(Value::Null);
    check_preconditions(&pod, name, &options)?;
    let phase = str_at(&pod, "/status/phase");
    let ignore_budget = matches!(phase, "Pending" | "Succeeded" | "Failed")
        || !str_at(&pod, "/metadata/deletionTimestamp").is_empty();
    if !ignore_budget {
        let budget_res = ("/apis/policy/v1".to_string(), "poddisruptionbudgets".to_string());
        let labels = pod.pointer("/metadata/labels").cloned().unwrap_or(json!({}));
        let budgets: Vec<Value> = s
            .objects
            .get(&budget_res)
            .into_iter()
            .flat_map(|m| m.iter())
            .filter(|((ns, _), pdb)| *ns == t.namespace && selects(pdb, &labels))
            .map(|(_, v)| v.clone())
            .collect();
        if budgets.len() > 1 {
            return Err(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(mut pdb) = budgets.into_iter().next() {
            let pdb_name = str_at(&pdb, "/metadata/name").to_string();
            let generation = pdb.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(0);
            let observed = pdb.pointer("/status/observedGeneration").and_then(Value::as_i64).unwrap_or(0);
            let allowed = pdb.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0);
            const REFUSED: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
            if observed < generation {
                let mut e = ApiError::too_many_requests(REFUSED, 10);
                budget_cause(
                    &mut e,
                    format!("The disruption budget {pdb_name} is still being processed by the server."),
                );
                return Err(e);
            }
            if allowed < 0 {
                let mut e = ApiError::conflict(
                    "poddisruptionbudget.policy",
                    &pdb_name,
                    "pdb disruptions allowed is negative",
                );
                e.code = 403;
                e.reason = "Forbidden";
                e.message = format!(
                    "poddisruptionbudget.policy {pdb_name:?} is forbidden: pdb disruptions allowed is negative"
                );
                return Err(e);
            }
            if allowed == 0 {
                let mut e = ApiError::too_many_requests(REFUSED, 0);
                let desired = pdb.pointer("/status/desiredHealthy").and_then(Value::as_i64).unwrap_or(0);
                let current = pdb.pointer("/status/currentHealthy").and_then(Value::as_i64).unwrap_or(0);
                budget_cause(
                    &mut e,
                    format!(
                        "The disruption budget {pdb_name} needs {desired} healthy pods and has {current} currently"
                    ),
                );
                return Err(e);
            }
            let now = format_time(s.now());
            pdb["status"]["disruptionsAllowed"] = json!(allowed - 1);
            if !pdb["status"].get("disruptedPods").is_some_and(Value::is_object) {
                pdb["status"]["disruptedPods"] = json!({});
            }
            pdb["status"]["disruptedPods"][name] = json!(now);
            if allowed - 1 == 0 {
                let cond = json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                                  "message": "", "lastTransitionTime": now, "observedGeneration": observed});
                let list = pdb["status"]["conditions"].as_array().cloned().unwrap_or_default();
                let mut list: Vec<Value> =
                    list.into_iter().filter(|c| str_at(c, "/type") != "DisruptionAllowed").collect();
                list.push(cond);
                pdb["status"]["conditions"] = Value::Array(list);
            }
            s.commit(&budget_res, (t.namespace.clone(), pdb_name), pdb, "MODIFIED");
        }
    }
    delete(s, t, name, &options).map(drop)
}

fn check_preconditions(obj: &Value, name: &str, options: &Value) -> Result<(), ApiError> {
    let uid = str_at(options, "/preconditions/uid");
    let have = str_at(obj, "/metadata/uid");
    if !uid.is_empty() && uid != have {
        return Err(ApiError::conflict(
            "pods",
            name,
            &format!("Precondition failed: UID in precondition: {uid}, UID in object meta: {have}"),
        ));
    }
    let rv = str_at(options, "/preconditions/resourceVersion");
    let have = str_at(obj, "/metadata/resourceVersion");
    if !rv.is_empty() && rv != have {
        return Err(ApiError::conflict(
            "pods",
            name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {have}"
            ),
        ));
    }
    Ok(())
}

/// `DELETE`, with `DeleteOptions` in `options` (grace period, preconditions). Returns the
/// object as it now is (terminating, or gone).
pub fn delete(s: &mut Store, t: &Target, name: &str, options: &Value) -> Result<Value, ApiError> {
    let key = t.key(name);
    let obj = s.get(&t.res, &key).cloned().ok_or_else(|| ApiError::not_found(&qualified(&t.res), name))?;
    check_preconditions(&obj, name, options)?;
    if crate::store::kind(&t.res) != crate::validation::Kind::Pod {
        return Ok(s.commit(&t.res, key, obj, "DELETED"));
    }
    let requested = options.get("gracePeriodSeconds").and_then(Value::as_i64);
    let own = obj.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(30);
    let mut grace = requested.unwrap_or(own).max(0);
    // As the pod strategy's CheckGracefulDelete: never scheduled or already finished, at once.
    let phase = str_at(&obj, "/status/phase");
    if str_at(&obj, "/spec/nodeName").is_empty() || matches!(phase, "Succeeded" | "Failed") {
        grace = 0;
    }
    let now = s.now();
    if grace == 0 {
        return Ok(s.commit(&t.res, key, obj, "DELETED"));
    }
    let until = now.checked_add(SignedDuration::from_secs(grace)).unwrap_or(now);
    let current = str_at(&obj, "/metadata/deletionTimestamp").parse::<Timestamp>().ok();
    if current.is_some_and(|c| c <= until) {
        return Ok(obj);
    }
    let mut obj = obj;
    obj["metadata"]["deletionTimestamp"] = json!(format_time(until));
    obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
    Ok(s.commit(&t.res, key, obj, "MODIFIED"))
}

/// Removes every pod whose grace period has run out on the fake's clock (the kubelet's part).
pub fn reap(s: &mut Store) {
    let now = s.now();
    let pods = ("/api/v1".to_string(), "pods".to_string());
    // Only the pods being deleted: every 20 ms over all pods held the store's lock for most of
    // the time with 140,000 pods, and the fake, not the scheduler, set the loop bench's pace.
    let Some(held) = s.objects.get(&pods) else { return };
    let due: Vec<(crate::store::Key, Value)> = s
        .terminating
        .iter()
        .filter_map(|k| held.get(k).map(|p| (k, p)))
        .filter(|(_, p)| {
            str_at(p, "/metadata/deletionTimestamp").parse::<Timestamp>().is_ok_and(|t| t <= now)
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in due {
        s.commit(&pods, k, v, "DELETED");
    }
}
