//! NVIDIA Grove's `grove.io/v1alpha1` `PodCliqueSet`, expanded as Grove's operator makes it (for
//! `simulate`): the PodGangs its PodCliqueSet controller writes and the pods its PodClique
//! controller creates, with Grove's names and labels; and the rules of Grove's PodCliqueSet
//! webhook that refuse what the operator would never run.
//!
//! Per replica `r` of the set (`spec.replicas`, 0 when unset, as Grove's CRD defaults it):
//! - the base PodGang `<set>-<r>`: a pod group `<set>-<r>-<clique>` per clique no scaling group
//!   holds, needing the clique's `minAvailable`; and for each scaling group `<set>-<r>-<group>`,
//!   its first `minAvailable` replicas `j`, a pod group `<set>-<r>-<group>-<j>-<clique>` per
//!   clique of the group;
//! - a scaled PodGang `<set>-<r>-<group>-<k>` for each replica `minAvailable + k` of a scaling
//!   group beyond its `minAvailable`, with that replica's pod groups;
//! - each clique's `replicas` pods, named by the API server from `<pod group>-` and labelled
//!   `grove.io/podgang`, `grove.io/podclique`, their replica and pod index, over the clique's
//!   labels; their spec the clique's `podSpec`, handed to our scheduler by the pod hook when it is
//!   left to `default-scheduler` (Grove's default backend). The scheduling gate Grove sets until
//!   the PodGang is written is left out: the simulation is of the pods once it is.
//!
//! Not modelled, and said so ([`check`]'s warnings): pack constraints (Grove translates a domain
//! name through its ClusterTopology, which the input does not hold), and the resource claims
//! Grove's resource sharing adds to the pods.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{MAX_EXPANDED_PODS, generated_name};
use crate::read::dialect::grove::{LABEL as PODGANG_LABEL, SUBGROUP_LABEL as CLIQUE_LABEL};
use crate::read::error::FieldError;

/// The API group of `PodCliqueSet`.
pub const GROUP: &str = "grove.io";
/// The kind.
pub const KIND: &str = "PodCliqueSet";
/// Grove's limit on the set's, scaling group's and clique's names together (its pods' names are
/// made of them): `maxCombinedResourceNameLength` in Grove's PodCliqueSet webhook.
const MAX_COMBINED_NAME: usize = 45;
/// The schedulers Grove has backends for (`OperatorConfiguration` `scheduler.profiles[].name`);
/// a clique naming any other is refused by Grove's webhook.
const GROVE_SCHEDULERS: &[&str] = &["default-scheduler", "kai-scheduler", "volcano", "lpx-scheduler"];

/// Whether `obj` is a Grove PodCliqueSet.
pub fn is_pcs(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some(KIND)
        && obj.get("apiVersion").and_then(Value::as_str).map(crate::read::dialect::group_of) == Some(GROUP)
}

#[derive(Deserialize)]
struct Pcs {
    #[serde(default)]
    metadata: Meta,
    spec: Spec,
}

#[derive(Default, Deserialize)]
struct Meta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
}

#[derive(Deserialize)]
struct Spec {
    #[serde(default)]
    replicas: i32,
    template: Template,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Template {
    #[serde(default)]
    cliques: Vec<Clique>,
    #[serde(default)]
    pod_clique_scaling_groups: Vec<ScalingGroup>,
    topology_constraint: Option<Value>,
    priority_class_name: Option<String>,
    #[serde(default)]
    resource_claim_templates: Vec<Value>,
    #[serde(default)]
    resource_sharing: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Clique {
    name: String,
    #[serde(default)]
    labels: Map<String, Value>,
    #[serde(default)]
    annotations: Map<String, Value>,
    topology_constraint: Option<Value>,
    #[serde(default)]
    resource_sharing: Vec<Value>,
    spec: CliqueSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CliqueSpec {
    #[serde(default)]
    role_name: String,
    replicas: i32,
    min_available: Option<i32>,
    #[serde(default)]
    pod_spec: Value,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScalingGroup {
    name: String,
    clique_names: Vec<String>,
    replicas: Option<i32>,
    min_available: Option<i32>,
    topology_constraint: Option<Value>,
    #[serde(default)]
    resource_sharing: Vec<Value>,
}

impl Clique {
    /// `replicas` as Grove's defaulting webhook leaves it (0 becomes 1).
    fn replicas(&self) -> u32 {
        u32::try_from(self.spec.replicas).ok().filter(|&r| r > 0).unwrap_or(1)
    }

    /// `minAvailable` as Grove's defaulting webhook leaves it: the replicas *written* when unset.
    fn min_available(&self) -> i32 {
        self.spec.min_available.unwrap_or(self.spec.replicas)
    }
}

impl ScalingGroup {
    fn replicas(&self) -> i32 {
        self.replicas.unwrap_or(1)
    }

    fn min_available(&self) -> i32 {
        self.min_available.unwrap_or(1)
    }
}

fn read(obj: &Value) -> Result<Pcs, Vec<FieldError>> {
    crate::read::error::decode(obj, "", crate::read::error::Wording::Crd)
}

/// What Grove's PodCliqueSet webhook and CRD refuse (errors, in Grove's field paths), and what
/// `simulate` does not model (warnings, naming the field).
pub fn check(obj: &Value) -> (Vec<FieldError>, Vec<String>) {
    let pcs = match read(obj) {
        Ok(p) => p,
        Err(e) => return (e, Vec::new()),
    };
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let t = &pcs.spec.template;
    let name = pcs.metadata.name.as_str();
    if name.is_empty() {
        errors.push(FieldError::new("metadata.name", "Required value"));
    }
    if pcs.spec.replicas < 0 {
        errors.push(FieldError::new("spec.replicas", "must be greater than or equal to 0"));
    }
    let base = "spec.template";
    if t.cliques.is_empty() {
        errors.push(FieldError::new(format!("{base}.cliques"), "at least one PodClique must be defined"));
    }
    let grouped: BTreeSet<&str> =
        t.pod_clique_scaling_groups.iter().flat_map(|g| g.clique_names.iter().map(String::as_str)).collect();
    let (mut names, mut roles) = (BTreeSet::new(), BTreeSet::new());
    let mut schedulers = BTreeSet::new();
    for (i, c) in t.cliques.iter().enumerate() {
        let at = format!("{base}.cliques[{i}]");
        if let Err(e) = crate::read::dialect::check_dns_label(&c.name) {
            errors.push(FieldError::new(format!("{at}.name"), e));
        }
        if !names.insert(c.name.as_str()) {
            errors.push(FieldError::new(format!("{at}.name"), format!("Duplicate value: {:?}", c.name)));
        }
        if !c.spec.role_name.is_empty() && !roles.insert(c.spec.role_name.as_str()) {
            errors.push(FieldError::new(
                format!("{at}.spec.roleName"),
                format!("Duplicate value: {:?}", c.spec.role_name),
            ));
        }
        if c.spec.replicas < 0 {
            errors.push(FieldError::new(format!("{at}.spec.replicas"), "must be greater than 0"));
        }
        let min = c.min_available();
        if min <= 0 {
            errors.push(FieldError::new(
                format!("{at}.spec.minAvailable"),
                format!("{min}: must be greater than 0"),
            ));
        } else if min > i32::try_from(c.replicas()).unwrap_or(i32::MAX) {
            errors.push(FieldError::new(
                format!("{at}.spec.minAvailable"),
                format!("{min}: minAvailable must not be greater than replicas"),
            ));
        }
        if !grouped.contains(c.name.as_str()) && name.len() + c.name.len() > MAX_COMBINED_NAME {
            errors.push(FieldError::new(
                format!("{at}.name"),
                format!(
                    "combined resource name length {} exceeds the {MAX_COMBINED_NAME}-character limit Grove keeps for pod names: shorten the PodCliqueSet {name:?} or the PodClique {:?}",
                    name.len() + c.name.len(),
                    c.name
                ),
            ));
        }
        let scheduler = c.spec.pod_spec.get("schedulerName").and_then(Value::as_str).unwrap_or("");
        schedulers.insert(scheduler);
        if !scheduler.is_empty() && !GROVE_SCHEDULERS.contains(&scheduler) {
            let hint = if scheduler == crate::read::labels::SCHEDULER_NAME {
                ": leave it unset (Grove gives the pods default-scheduler, and kube-gang's pod hook hands pods of a PodGang to gang-scheduler)"
            } else {
                ""
            };
            errors.push(FieldError::new(
                format!("{at}.spec.podSpec.schedulerName"),
                format!("{scheduler:?}: Grove has no scheduler backend of that name and refuses the PodCliqueSet{hint}"),
            ));
        }
        if c.topology_constraint.is_some() {
            warnings.push(not_modelled(&format!("{at}.topologyConstraint")));
        }
        if !c.resource_sharing.is_empty() {
            warnings.push(claims_not_modelled(&format!("{at}.resourceSharing")));
        }
    }
    if schedulers.len() > 1 {
        let all: Vec<&str> =
            schedulers.iter().map(|s| if s.is_empty() { "default-scheduler" } else { s }).collect();
        if all.iter().collect::<BTreeSet<_>>().len() > 1 {
            errors.push(FieldError::new(
                format!("{base}.cliques"),
                format!("the schedulerName for all pods have to be the same, got {}", all.join(", ")),
            ));
        }
    }
    let (mut groups, mut in_group) = (BTreeSet::new(), BTreeSet::new());
    for (i, g) in t.pod_clique_scaling_groups.iter().enumerate() {
        let at = format!("{base}.podCliqueScalingGroups[{i}]");
        if let Err(e) = crate::read::dialect::check_dns_label(&g.name) {
            errors.push(FieldError::new(format!("{at}.name"), e));
        }
        if !groups.insert(g.name.as_str()) {
            errors.push(FieldError::new(format!("{at}.name"), format!("Duplicate value: {:?}", g.name)));
        }
        for (j, c) in g.clique_names.iter().enumerate() {
            let path = format!("{at}.cliqueNames[{j}]");
            if !names.contains(c.as_str()) {
                errors.push(FieldError::new(path, format!("{c:?}: unidentified PodClique names found")));
            } else if !in_group.insert(c.as_str()) {
                errors.push(FieldError::new(
                    path,
                    format!("Duplicate value: {c:?} (a clique is in one scaling group at most)"),
                ));
            } else if name.len() + g.name.len() + c.len() > MAX_COMBINED_NAME {
                errors.push(FieldError::new(
                    path,
                    format!(
                        "combined resource name length {} exceeds the {MAX_COMBINED_NAME}-character limit Grove keeps for pod names: shorten the PodCliqueSet {name:?}, the scaling group {:?} or the PodClique {c:?}",
                        name.len() + g.name.len() + c.len(),
                        g.name
                    ),
                ));
            }
        }
        if g.replicas() <= 0 {
            errors.push(FieldError::new(
                format!("{at}.replicas"),
                format!("{}: must be greater than 0", g.replicas()),
            ));
        }
        if g.min_available() <= 0 {
            errors.push(FieldError::new(
                format!("{at}.minAvailable"),
                format!("{}: must be greater than 0", g.min_available()),
            ));
        } else if g.min_available() > g.replicas() {
            errors.push(FieldError::new(
                format!("{at}.minAvailable"),
                format!("{}: minAvailable must not be greater than replicas", g.min_available()),
            ));
        }
        if g.topology_constraint.is_some() {
            warnings.push(not_modelled(&format!("{at}.topologyConstraint")));
        }
        if !g.resource_sharing.is_empty() {
            warnings.push(claims_not_modelled(&format!("{at}.resourceSharing")));
        }
    }
    if let Some(tc) = &t.topology_constraint {
        if tc.get("packDomain").is_some() {
            errors.push(FieldError::new(
                format!("{base}.topologyConstraint.packDomain"),
                "packDomain is deprecated and cannot be used on new workloads; use pack.required",
            ));
        }
        warnings.push(not_modelled(&format!("{base}.topologyConstraint")));
    }
    if !t.resource_claim_templates.is_empty() || !t.resource_sharing.is_empty() {
        warnings.push(claims_not_modelled(&format!("{base}.resourceSharing")));
    }
    if errors.is_empty()
        && let Err(e) = pod_count(obj)
    {
        errors.extend(e);
    }
    (errors, warnings)
}

fn not_modelled(path: &str) -> String {
    format!(
        "{path}: not modelled: Grove translates its pack domains to node labels through its ClusterTopology, which the input does not hold; the PodGangs are simulated without them (the scheduler reads the keys Grove writes into each PodGang)"
    )
}

fn claims_not_modelled(path: &str) -> String {
    format!("{path}: not modelled: the ResourceClaims Grove adds to the pods are not in the simulation")
}

/// The pods one expansion writes (every replica of the set), or an error naming `spec.replicas`
/// past [`MAX_EXPANDED_PODS`].
pub fn pod_count(obj: &Value) -> Result<u64, Vec<FieldError>> {
    let pcs = read(obj)?;
    let t = &pcs.spec.template;
    let grouped: BTreeSet<&str> =
        t.pod_clique_scaling_groups.iter().flat_map(|g| g.clique_names.iter().map(String::as_str)).collect();
    let clique = |n: &str| t.cliques.iter().find(|c| c.name == n).map_or(0, |c| u64::from(c.replicas()));
    let mut per_replica: u64 = t
        .cliques
        .iter()
        .filter(|c| !grouped.contains(c.name.as_str()))
        .map(|c| u64::from(c.replicas()))
        .sum();
    for g in &t.pod_clique_scaling_groups {
        let one: u64 = g.clique_names.iter().map(|n| clique(n)).sum();
        per_replica =
            per_replica.saturating_add(u64::try_from(g.replicas()).unwrap_or(0).saturating_mul(one));
    }
    let n = u64::try_from(pcs.spec.replicas).unwrap_or(0).saturating_mul(per_replica);
    if n > MAX_EXPANDED_PODS {
        return Err(vec![FieldError::new(
            "spec.replicas",
            format!("the PodCliqueSet would run {n} pods; at most {MAX_EXPANDED_PODS} are expanded"),
        )]);
    }
    Ok(n)
}

/// One PodGang being built: its name and its pod groups (name, minReplicas, pod names).
struct Gang {
    name: String,
    groups: Vec<(String, u32, Vec<String>)>,
}

/// The PodGangs, then the pods, Grove's operator makes of the PodCliqueSet `obj` (see the module
/// documentation); nothing, and [`check`]'s errors, for a set Grove's webhook refuses.
pub fn expand(obj: &Value) -> Result<Vec<Value>, Vec<FieldError>> {
    let (errors, _) = check(obj);
    if !errors.is_empty() {
        return Err(errors);
    }
    let pcs = read(obj)?;
    let t = &pcs.spec.template;
    let set = pcs.metadata.name.as_str();
    let ns = if pcs.metadata.namespace.is_empty() { "default" } else { pcs.metadata.namespace.as_str() };
    let grouped: BTreeSet<&str> =
        t.pod_clique_scaling_groups.iter().flat_map(|g| g.clique_names.iter().map(String::as_str)).collect();
    // Each clique's pod spec, decoded once (the scheduler's view of it), with the scheduler the
    // pod hook gives a pod left to the default one.
    let mut specs = Vec::with_capacity(t.cliques.len());
    for (i, c) in t.cliques.iter().enumerate() {
        let path = format!("spec.template.cliques[{i}].spec.podSpec");
        let mut spec = crate::read::convert::scheduling_spec(Some(&c.spec.pod_spec), &path)?;
        if let Some(sp) = spec.as_object_mut() {
            let current = sp.get("schedulerName").and_then(Value::as_str).unwrap_or("");
            if current.is_empty() || current == super::DEFAULT_SCHEDULER {
                sp.insert("schedulerName".into(), Value::String(crate::read::labels::SCHEDULER_NAME.into()));
            }
        }
        specs.push(spec);
    }
    let clique_at = |n: &str| t.cliques.iter().position(|c| c.name == n);
    let mut gangs: Vec<Gang> = Vec::new();
    let mut pods: Vec<Value> = Vec::new();
    let make_group = |gang: &str, group: String, at: usize, pods: &mut Vec<Value>, r: i32| {
        let c = &t.cliques[at];
        let mut names = Vec::with_capacity(c.replicas() as usize);
        for i in 0..c.replicas() {
            let name = generated_name(&format!("{group}-"), &format!("{ns}/{group}#{i}"));
            let mut labels = Map::new();
            labels.insert("app.kubernetes.io/managed-by".into(), json!("grove-operator"));
            labels.insert("app.kubernetes.io/part-of".into(), json!(set));
            labels.extend(c.labels.clone());
            labels.insert(CLIQUE_LABEL.into(), json!(group));
            labels.insert("grove.io/podcliqueset-replica-index".into(), json!(r.to_string()));
            labels.insert(PODGANG_LABEL.into(), json!(gang));
            labels.insert("grove.io/podclique-pod-index".into(), json!(i.to_string()));
            let mut metadata = Map::new();
            metadata.insert("name".into(), json!(name));
            metadata.insert("namespace".into(), json!(ns));
            metadata.insert("labels".into(), Value::Object(labels));
            if !c.annotations.is_empty() {
                metadata.insert("annotations".into(), Value::Object(c.annotations.clone()));
            }
            pods.push(
                json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": specs[at].clone()}),
            );
            names.push(name);
        }
        let min = u32::try_from(c.min_available()).unwrap_or(0);
        (group, min, names)
    };
    for r in 0..pcs.spec.replicas.max(0) {
        let base = format!("{set}-{r}");
        let mut gang = Gang { name: base.clone(), groups: Vec::new() };
        for (at, c) in t.cliques.iter().enumerate() {
            if !grouped.contains(c.name.as_str()) {
                gang.groups.push(make_group(&base, format!("{base}-{}", c.name), at, &mut pods, r));
            }
        }
        let mut scaled = Vec::new();
        for g in &t.pod_clique_scaling_groups {
            let fqn = format!("{base}-{}", g.name);
            let min = g.min_available().max(0);
            for j in 0..g.replicas().max(0) {
                let into = if j < min {
                    None
                } else {
                    scaled.push(Gang { name: format!("{fqn}-{}", j - min), groups: Vec::new() });
                    scaled.len().checked_sub(1)
                };
                let gang_name = into.map_or(base.clone(), |k| scaled[k].name.clone());
                for n in &g.clique_names {
                    let Some(at) = clique_at(n) else { continue };
                    let group = make_group(&gang_name, format!("{fqn}-{j}-{n}"), at, &mut pods, r);
                    match into {
                        None => gang.groups.push(group),
                        Some(k) => scaled[k].groups.push(group),
                    }
                }
            }
        }
        gangs.push(gang);
        gangs.extend(scaled);
    }
    let mut out: Vec<Value> = gangs
        .into_iter()
        .map(|g| {
            let groups: Vec<Value> = g
                .groups
                .into_iter()
                .map(|(name, min, mut members)| {
                    members.sort();
                    let refs: Vec<Value> =
                        members.iter().map(|m| json!({"namespace": ns, "name": m})).collect();
                    json!({"name": name, "minReplicas": min, "podReferences": refs})
                })
                .collect();
            let mut spec = json!({"podgroups": groups});
            if let Some(p) = &t.priority_class_name {
                spec["priorityClassName"] = json!(p);
            }
            json!({"apiVersion": "scheduler.grove.io/v1alpha1", "kind": "PodGang",
                   "metadata": {"name": g.name, "namespace": ns,
                                "labels": {"app.kubernetes.io/managed-by": "grove-operator",
                                           "app.kubernetes.io/part-of": set}},
                   "spec": spec})
        })
        .collect();
    out.extend(pods);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pcs() -> Value {
        json!({"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet",
            "metadata": {"name": "serve", "namespace": "llm"},
            "spec": {"replicas": 1, "template": {
                "cliques": [
                    {"name": "frontend", "spec": {"roleName": "frontend", "replicas": 2, "minAvailable": 1,
                        "podSpec": {"containers": [{"name": "f", "image": "x"}]}}},
                    {"name": "pleader", "spec": {"roleName": "pleader", "replicas": 1,
                        "podSpec": {"containers": [{"name": "l", "image": "x"}]}}},
                    {"name": "pworker", "spec": {"roleName": "pworker", "replicas": 2,
                        "podSpec": {"containers": [{"name": "w", "image": "x"}]}}}],
                "podCliqueScalingGroups": [{"name": "prefill", "cliqueNames": ["pleader", "pworker"],
                                            "replicas": 2, "minAvailable": 1}]}}})
    }

    #[test]
    fn a_podcliqueset_becomes_a_base_podgang_and_one_per_scaled_replica() {
        assert!(is_pcs(&pcs()));
        let (errors, warnings) = check(&pcs());
        assert!(errors.is_empty() && warnings.is_empty(), "{errors:?} {warnings:?}");
        assert_eq!(pod_count(&pcs()).unwrap(), 2 + 2 * 3);
        let out = expand(&pcs()).unwrap();
        let gangs: Vec<&Value> = out.iter().filter(|o| o["kind"] == "PodGang").collect();
        let names: Vec<&str> = gangs.iter().map(|g| g["metadata"]["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["serve-0", "serve-0-prefill-0"]);
        let groups = |g: &Value| -> Vec<(String, u64, usize)> {
            g["spec"]["podgroups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p["name"].as_str().unwrap().to_string(),
                        p["minReplicas"].as_u64().unwrap(),
                        p["podReferences"].as_array().unwrap().len(),
                    )
                })
                .collect()
        };
        assert_eq!(
            groups(gangs[0]),
            [
                ("serve-0-frontend".to_string(), 1, 2),
                ("serve-0-prefill-0-pleader".to_string(), 1, 1),
                ("serve-0-prefill-0-pworker".to_string(), 2, 2),
            ]
        );
        assert_eq!(
            groups(gangs[1]),
            [
                ("serve-0-prefill-1-pleader".to_string(), 1, 1),
                ("serve-0-prefill-1-pworker".to_string(), 2, 2)
            ]
        );
        let pods: Vec<&Value> = out.iter().filter(|o| o["kind"] == "Pod").collect();
        assert_eq!(pods.len(), 8);
        // Every pod is in the gang and pod group its PodGang lists it in, and ours to schedule.
        for p in &pods {
            let name = p["metadata"]["name"].as_str().unwrap();
            let gang = p["metadata"]["labels"][PODGANG_LABEL].as_str().unwrap();
            let clique = p["metadata"]["labels"][CLIQUE_LABEL].as_str().unwrap();
            assert!(name.starts_with(&format!("{clique}-")) && name.len() == clique.len() + 6, "{name}");
            let g = gangs.iter().find(|g| g["metadata"]["name"] == gang).unwrap();
            let listed = g["spec"]["podgroups"].as_array().unwrap().iter().any(|pg| {
                pg["name"] == clique
                    && pg["podReferences"].as_array().unwrap().iter().any(|r| r["name"] == name)
            });
            assert!(listed, "{name} in {gang}/{clique}");
            assert_eq!(p["spec"]["schedulerName"], crate::read::labels::SCHEDULER_NAME);
            let (claims, errors) = crate::read::dialect::pod_claims_all(p);
            assert!(errors.is_empty() && claims.len() == 1, "{claims:?} {errors:?}");
        }
        // Each PodGang reads as a gang needing its pod groups' minimums.
        let base = crate::read::dialect::grove::read(gangs[0]).unwrap();
        assert_eq!(base.min_pods(), Some(4));
    }

    #[test]
    fn what_groves_webhook_refuses_is_refused_at_groves_fields() {
        let mut bad = pcs();
        bad["spec"]["template"]["cliques"][0]["spec"]["minAvailable"] = json!(3);
        bad["spec"]["template"]["cliques"][1]["spec"]["podSpec"]["schedulerName"] = json!("gang-scheduler");
        bad["spec"]["template"]["podCliqueScalingGroups"][0]["cliqueNames"][1] = json!("nope");
        bad["spec"]["template"]["podCliqueScalingGroups"][0]["minAvailable"] = json!(3);
        let (errors, _) = check(&bad);
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.template.cliques[0].spec.minAvailable",
                "spec.template.cliques[1].spec.podSpec.schedulerName",
                "spec.template.cliques",
                "spec.template.podCliqueScalingGroups[0].cliqueNames[1]",
                "spec.template.podCliqueScalingGroups[0].minAvailable",
            ],
            "{errors:?}"
        );
        assert!(errors[1].message.contains("leave it unset"), "{}", errors[1].message);
        // Too many pods to expand: refused at the replicas, before anything is built.
        let mut big = pcs();
        big["spec"]["replicas"] = json!(20_000);
        assert_eq!(expand(&big).unwrap_err()[0].path, "spec.replicas");
        // A pack constraint is warned about, not silently dropped.
        let mut packed = pcs();
        packed["spec"]["template"]["topologyConstraint"] = json!({"pack": {"required": "rack"}});
        let (errors, warnings) = check(&packed);
        assert!(errors.is_empty(), "{errors:?}");
        assert!(warnings[0].starts_with("spec.template.topologyConstraint: not modelled"), "{warnings:?}");
    }
}
