//! LeaderWorkerSet (`leaderworkerset.x-k8s.io/v1`) as its controller and pod webhook make it:
//! `replicas` groups of `size` pods — the leader `<set>-<g>` (from `leaderTemplate`, else the
//! worker template) and workers `<set>-<g>-<w>`, `w` from 1 — each group one gang. What the set
//! asks beyond that takes effect as LWS makes it take effect, on the pods:
//!
//! - `leaderworkerset.sigs.k8s.io/exclusive-topology: <key>` (on the set): the leader gets a
//!   required pod affinity to its own group and a required anti-affinity to every other group,
//!   both on `<key>` (LWS's `SetExclusiveAffinities`), so a group has a domain to itself. LWS
//!   creates the workers only once the leader is scheduled, with a nodeSelector on the leader's
//!   domain: staged creation, which a gang of the whole group never survives
//!   ([`super::staged_creation`] says so). The workers expanded here carry the leader's terms in
//!   place of that nodeSelector (the same domain, which the leader's node does not give yet);
//! - `spec.leaderWorkerTemplate.subGroupPolicy` cuts each group into subgroups of `subGroupSize`
//!   pods (`LeaderWorker`: the leader in the first; `LeaderExcluded`: the leader in none), written
//!   as the `subgroup-index` and `subgroup-key` labels, and with
//!   `leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology: <key>` each subgroup gets a
//!   domain of `<key>` to itself the same way. A group is still all-or-nothing as a whole: the
//!   subgroups place it, they do not lower its minimum.
//!
//! The set's own webhook refuses a subgroup size that does not cut the group (`size` or
//! `size - 1` divisible by it, not above `size`, and `size - 1` for `LeaderExcluded`) and a
//! subgroup exclusive-topology without subgroups; so does [`check`], with its words.
//! Read from kubernetes-sigs/lws `api/leaderworkerset/v1`, `pkg/webhooks` and `pkg/controllers`.

use serde_json::{Map, Value, json};
use sha1::{Digest, Sha1};

use crate::read::error::FieldError;
use crate::read::labels::{
    LWS_EXCLUSIVE_TOPOLOGY, LWS_GROUP_INDEX, LWS_GROUP_KEY, LWS_LEADER_NAME, LWS_NAME, LWS_SIZE,
    LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY, LWS_SUBGROUP_INDEX, LWS_SUBGROUP_KEY, LWS_SUBGROUP_POLICY_TYPE,
    LWS_SUBGROUP_SIZE, LWS_WORKER_INDEX,
};
use crate::read::object::At;

const POLICY: &str = "/spec/leaderWorkerTemplate/subGroupPolicy";
const POLICY_PATH: &str = "spec.leaderWorkerTemplate.subGroupPolicy";

/// The most groups LWS's webhook accepts (`spec.replicas`).
pub const MAX_REPLICAS: u32 = 1_000_000;

/// How a group is cut into subgroups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubGroups {
    /// Pods per subgroup.
    pub size: u32,
    /// `LeaderExcluded`: the leader belongs to no subgroup.
    pub leader_excluded: bool,
}

impl SubGroups {
    /// The subgroup of the pod with worker index `w` (0: the leader) in a group of `group_size`,
    /// as LWS's pod webhook numbers them: when the leader is the extra pod (`size - 1` divisible
    /// and `size` not), workers count from 1 so the leader joins the first subgroup.
    pub fn of(&self, group_size: u32, w: u32) -> Option<u32> {
        let s = self.size.max(1);
        if w == 0 {
            return (!self.leader_excluded).then_some(0);
        }
        let leader_extra = group_size.saturating_sub(1).is_multiple_of(s) && !group_size.is_multiple_of(s);
        Some(if leader_extra { (w - 1) / s } else { w / s })
    }
}

/// The set's subgroup policy, `None` when it has none or it is refused ([`check`] says why).
pub fn subgroups(obj: &Value, group_size: u32) -> Option<SubGroups> {
    let mut errors = Vec::new();
    let policy = read_policy(obj, group_size, &mut errors);
    policy.filter(|_| errors.is_empty())
}

/// What LWS's webhook refuses in `obj` (`size`: `leaderWorkerTemplate.size`, already read), in
/// its words, with our field paths: the subgroup size, its policy type (the CRD's enum), a
/// subgroup exclusive-topology without a policy, and `replicas` above LWS's bound.
pub fn check(obj: &Value, replicas: u32, size: u32, errors: &mut Vec<FieldError>) {
    if replicas > MAX_REPLICAS {
        errors.push(FieldError::new(
            "spec.replicas",
            format!("replicas must be equal or less than {MAX_REPLICAS}"),
        ));
    }
    if size < 1 {
        errors
            .push(FieldError::new("spec.leaderWorkerTemplate.size", "size must be equal or greater than 1"));
        return;
    }
    if read_policy(obj, size, errors).is_none()
        && annotation(obj, LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY).is_some()
        && obj.at(POLICY).is_none_or(Value::is_null)
    {
        errors.push(FieldError::new(
            format!("metadata.annotations[{LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY}]"),
            "cannot have subgroup-exclusive-topology without subGroupSize set",
        ));
    }
}

fn read_policy(obj: &Value, size: u32, errors: &mut Vec<FieldError>) -> Option<SubGroups> {
    let policy = obj.at(POLICY).filter(|p| !p.is_null())?;
    if !policy.is_object() {
        errors.push(FieldError::new(POLICY_PATH, format!("must be an object, got {policy}")));
        return None;
    }
    let leader_excluded = match policy.get("subGroupPolicyType") {
        None | Some(Value::Null) => false,
        Some(Value::String(t)) if t == "LeaderWorker" => false,
        Some(Value::String(t)) if t == "LeaderExcluded" => true,
        Some(other) => {
            errors.push(FieldError::new(
                format!("{POLICY_PATH}.subGroupPolicyType"),
                format!("Unsupported value: {other}: supported values: \"LeaderWorker\", \"LeaderExcluded\""),
            ));
            return None;
        }
    };
    let at = format!("{POLICY_PATH}.subGroupSize");
    let sub = match policy.get("subGroupSize") {
        None | Some(Value::Null) => {
            errors.push(FieldError::new(at, "Required value: subgroups need a size"));
            return None;
        }
        Some(v) => match v.as_i64().and_then(|n| i32::try_from(n).ok()) {
            Some(n) => n,
            None => {
                errors.push(FieldError::new(at, format!("must be a 32-bit integer, got {v}")));
                return None;
            }
        },
    };
    let before = errors.len();
    if sub < 1 {
        errors.push(FieldError::new(&at, "subGroupSize must be equal or greater than 1"));
        return None;
    }
    let (s, n) = (i64::from(sub), i64::from(size));
    if n % s != 0 && (n - 1) % s != 0 {
        errors.push(FieldError::new(&at, "size or size - 1 must be divisible by subGroupSize"));
    }
    if n < s {
        errors.push(FieldError::new(&at, "subGroupSize cannot be larger than size"));
    }
    if leader_excluded && (n - 1) % s != 0 {
        errors
            .push(FieldError::new(&at, "size-1 must be divisible by subGroupSize when using LeaderExcluded"));
    }
    let size = u32::try_from(sub).ok()?;
    (errors.len() == before).then_some(SubGroups { size, leader_excluded })
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.at("/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// Lower-case hex SHA-1 of `s`: LWS's `utils.Sha1Hash`, which names groups and subgroups.
fn sha1_hex(s: &str) -> String {
    let digest = Sha1::digest(s.as_bytes());
    let mut out = String::with_capacity(40);
    for b in digest.iter() {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// What every pod of one LeaderWorkerSet gets alike, read once per expansion: its name,
/// namespace and group size, its subgroup policy and its exclusive-placement keys.
pub(super) struct Set<'a> {
    name: &'a str,
    namespace: &'a str,
    size: u32,
    policy: Option<SubGroups>,
    exclusive: Option<&'a str>,
    sub_exclusive: Option<&'a str>,
}

impl<'a> Set<'a> {
    pub fn of(obj: &'a Value, name: &'a str, namespace: &'a str, size: u32) -> Self {
        let policy = subgroups(obj, size);
        Set {
            name,
            namespace,
            size,
            policy,
            exclusive: annotation(obj, LWS_EXCLUSIVE_TOPOLOGY),
            sub_exclusive: annotation(obj, LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY).filter(|_| policy.is_some()),
        }
    }

    /// Group `g`'s leader (`<set>-<g>`) and key (SHA-1 of `<namespace>/<leader>`).
    pub fn group(&self, g: u32) -> (String, String) {
        let leader = format!("{}-{g}", self.name);
        let key = sha1_hex(&format!("{}/{leader}", self.namespace));
        (leader, key)
    }

    /// Name, labels, annotations and exclusive-placement terms of the pod with worker index
    /// `worker` (0: the leader) of group `g` (its leader and key from [`Set::group`]) onto
    /// `metadata` and `spec` (the template's, copied), as LWS writes them.
    pub fn stamp(
        &self,
        (g, leader, group_key): (u32, &str, &str),
        worker: u32,
        metadata: &mut Map<String, Value>,
        spec: &mut Value,
    ) {
        let name = if worker == 0 { leader.to_string() } else { format!("{leader}-{worker}") };
        let subgroup = self
            .policy
            .and_then(|p| p.of(self.size, worker))
            .map(|i| (i, sha1_hex(&format!("{leader}/{i}"))));

        metadata.insert("name".into(), Value::String(name));
        metadata.insert("namespace".into(), Value::String(self.namespace.to_string()));
        let mut labels = take_object(metadata, "labels");
        labels.insert(LWS_NAME.into(), json!(super::label_value_for(self.name)));
        labels.insert(LWS_GROUP_INDEX.into(), json!(g.to_string()));
        labels.insert(LWS_WORKER_INDEX.into(), json!(worker.to_string()));
        labels.insert(LWS_GROUP_KEY.into(), json!(group_key));
        if let Some((i, key)) = &subgroup {
            labels.insert(LWS_SUBGROUP_INDEX.into(), json!(i.to_string()));
            labels.insert(LWS_SUBGROUP_KEY.into(), json!(key));
        }
        metadata.insert("labels".into(), Value::Object(labels));

        let mut annotations = take_object(metadata, "annotations");
        annotations.insert(LWS_SIZE.into(), json!(self.size.to_string()));
        if let Some(key) = self.exclusive {
            annotations.insert(LWS_EXCLUSIVE_TOPOLOGY.into(), json!(key));
        }
        if let Some(p) = self.policy {
            let kind = if p.leader_excluded { "LeaderExcluded" } else { "LeaderWorker" };
            annotations.insert(LWS_SUBGROUP_POLICY_TYPE.into(), json!(kind));
            annotations.insert(LWS_SUBGROUP_SIZE.into(), json!(p.size.to_string()));
            if let Some(key) = self.sub_exclusive {
                annotations.insert(LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY.into(), json!(key));
            }
        }
        if worker > 0 {
            annotations.insert(LWS_LEADER_NAME.into(), json!(leader));
        }
        metadata.insert("annotations".into(), Value::Object(annotations));

        if let Some(key) = self.exclusive {
            exclusive_terms(spec, group_key, key, LWS_GROUP_KEY);
        }
        if let (Some((_, sub_key)), Some(key)) = (&subgroup, self.sub_exclusive) {
            exclusive_terms(spec, sub_key, key, LWS_SUBGROUP_KEY);
        }
    }
}

fn take_object(metadata: &mut Map<String, Value>, key: &str) -> Map<String, Value> {
    match metadata.remove(key) {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// LWS's exclusive placement on `topology`: a required affinity to the pods whose `label` is
/// `unique`, and a required anti-affinity to the pods that carry `label` with another value —
/// unless the pod already has a required term of each on that key (what LWS checks first).
fn exclusive_terms(spec: &mut Value, unique: &str, topology: &str, label: &str) {
    let has = |spec: &Value, kind: &str| {
        spec.at(&format!("/affinity/{kind}/requiredDuringSchedulingIgnoredDuringExecution"))
            .and_then(Value::as_array)
            .is_some_and(|terms| {
                terms.iter().any(|t| t.get("topologyKey").and_then(Value::as_str) == Some(topology))
            })
    };
    if has(spec, "podAffinity") && has(spec, "podAntiAffinity") {
        return;
    }
    let together = json!({
        "labelSelector": {"matchExpressions": [{"key": label, "operator": "In", "values": [unique]}]},
        "topologyKey": topology,
    });
    let apart = json!({
        "labelSelector": {"matchExpressions": [
            {"key": label, "operator": "Exists"},
            {"key": label, "operator": "NotIn", "values": [unique]},
        ]},
        "topologyKey": topology,
    });
    for (kind, term) in [("podAffinity", together), ("podAntiAffinity", apart)] {
        let Some(terms) = required_terms(spec, kind) else { continue };
        terms.push(term);
    }
}

/// `spec.affinity.<kind>.requiredDuringSchedulingIgnoredDuringExecution`, made on the way.
fn required_terms<'a>(spec: &'a mut Value, kind: &str) -> Option<&'a mut Vec<Value>> {
    let mut cur = spec;
    for key in ["affinity", kind, "requiredDuringSchedulingIgnoredDuringExecution"] {
        let map = cur.as_object_mut()?;
        let entry = map.entry(key.to_string()).or_insert(Value::Null);
        if entry.is_null() {
            *entry = if key.starts_with("required") { json!([]) } else { json!({}) };
        }
        cur = entry;
    }
    cur.as_array_mut()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(size: u32, policy: Value, annotations: Value) -> Value {
        json!({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
               "metadata": {"name": "vllm", "namespace": "serve", "annotations": annotations},
               "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "subGroupPolicy": policy}}})
    }

    fn errors_of(obj: &Value, size: u32) -> Vec<String> {
        let mut errors = Vec::new();
        check(obj, 1, size, &mut errors);
        errors.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn subgroups_are_numbered_as_the_lws_pod_webhook_numbers_them() {
        let lw = |size| SubGroups { size, leader_excluded: false };
        // size 4, subgroups of 2: (leader, w1) (w2, w3).
        let got: Vec<_> = (0..4).map(|w| lw(2).of(4, w)).collect();
        assert_eq!(got, [Some(0), Some(0), Some(1), Some(1)]);
        // size 5, subgroups of 2: the leader is the extra pod of the first: (leader, w1, w2) (w3, w4).
        let got: Vec<_> = (0..5).map(|w| lw(2).of(5, w)).collect();
        assert_eq!(got, [Some(0), Some(0), Some(0), Some(1), Some(1)]);
        // LeaderExcluded, size 5, subgroups of 2: (w1, w2) (w3, w4), the leader in none.
        let ex = SubGroups { size: 2, leader_excluded: true };
        let got: Vec<_> = (0..5).map(|w| ex.of(5, w)).collect();
        assert_eq!(got, [None, Some(0), Some(0), Some(1), Some(1)]);
    }

    #[test]
    fn refused_as_the_lws_webhook_refuses() {
        let at = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize";
        let e = errors_of(&set(5, json!({"subGroupSize": 3}), json!({})), 5);
        assert_eq!(e, [format!("{at}: size or size - 1 must be divisible by subGroupSize")]);
        let e = errors_of(
            &set(4, json!({"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}), json!({})),
            4,
        );
        assert_eq!(e, [format!("{at}: size-1 must be divisible by subGroupSize when using LeaderExcluded")]);
        let e = errors_of(&set(2, json!({"subGroupSize": 4}), json!({})), 2);
        assert!(e.contains(&format!("{at}: subGroupSize cannot be larger than size")), "{e:?}");
        let e = errors_of(&set(2, json!({"subGroupSize": 0}), json!({})), 2);
        assert_eq!(e, [format!("{at}: subGroupSize must be equal or greater than 1")]);
        let e =
            errors_of(&set(2, json!({"subGroupPolicyType": "Everyone", "subGroupSize": 1}), json!({})), 2);
        assert!(e[0].contains("Unsupported value: \"Everyone\""), "{e:?}");
        let e = errors_of(&set(2, Value::Null, json!({LWS_SUBGROUP_EXCLUSIVE_TOPOLOGY: "rack"})), 2);
        assert_eq!(e.len(), 1);
        assert!(e[0].contains("cannot have subgroup-exclusive-topology without subGroupSize set"), "{e:?}");
        assert!(
            errors_of(&set(0, Value::Null, json!({})), 0)[0].contains("size must be equal or greater than 1")
        );
        // What LWS accepts: size 5 in twos (the leader is the extra pod), LeaderExcluded of 4 in twos.
        assert!(errors_of(&set(5, json!({"subGroupSize": 2}), json!({})), 5).is_empty());
        let ok = set(5, json!({"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}), json!({}));
        assert!(errors_of(&ok, 5).is_empty());
        assert_eq!(subgroups(&ok, 5), Some(SubGroups { size: 2, leader_excluded: true }));
    }

    #[test]
    fn group_keys_are_the_sha1_lws_writes() {
        // `echo -n serve/vllm-0 | sha1sum`
        assert_eq!(sha1_hex("serve/vllm-0"), "a544dd34d715dc2f908eec65599ac46944517752");
    }

    #[test]
    fn exclusive_terms_are_added_once() {
        let mut spec = json!({"containers": []});
        exclusive_terms(&mut spec, "k1", "rack", LWS_GROUP_KEY);
        exclusive_terms(&mut spec, "k1", "rack", LWS_GROUP_KEY);
        let aff =
            spec.pointer("/affinity/podAffinity/requiredDuringSchedulingIgnoredDuringExecution").unwrap();
        let anti =
            spec.pointer("/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution").unwrap();
        assert_eq!(aff.as_array().unwrap().len(), 1);
        assert_eq!(anti.as_array().unwrap().len(), 1);
        assert_eq!(anti[0]["labelSelector"]["matchExpressions"][1]["values"], json!(["k1"]));
    }
}
