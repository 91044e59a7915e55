//! Every gang dialect in use today, read into one model.
//!
//! Each dialect module knows two things: which pods claim membership of one of its gangs
//! ([`Claim`]s, from labels, annotations or `spec.schedulingGroup`), and how its gang objects
//! (CRDs) or CRD-less annotations become a canonical [`Gang`]. Adding a dialect takes four
//! places: its module here (reader, claim reader, constants); a row in [`GANG_KINDS`] for each
//! kind of gang object (API, versions, plural, where the state goes, which webhooks see it —
//! from which `cluster::READ`, the webhook's gang lookup and the status writes follow, and to
//! which `tests/tests/manifests.rs` holds the RBAC, webhook rules and admission policy); its
//! claim reader in [`pod_claims`]'s list and its markers in [`CLAIM_MARKERS`] (held to the pod
//! hooks' `matchConditions`); and a variant of [`crate::read::model::Dialect`] (whose exhaustive
//! matches — `is_crd_less`, `as_str` — the compiler then points at). A dialect of annotations
//! only has no row; its annotation form goes in [`annotation_gang`].
//!
//! | dialect | gang object | pod membership |
//! |---|---|---|
//! | kube-gang | `kube-gang.io/v1alpha1` `Gang`, or pod annotations | label `kube-gang.io/gang` (+ `kube-gang.io/subgroup`) |
//! | upstream | `scheduling.k8s.io` `Workload` / `PodGroup` / `CompositePodGroup` | `spec.schedulingGroup.podGroupName`, 1.35: `spec.workloadRef` |
//! | coscheduling | `scheduling.x-k8s.io/v1alpha1` `PodGroup` | label `scheduling.x-k8s.io/pod-group` |
//! | Volcano | `scheduling.volcano.sh/v1beta1` `PodGroup` | annotation `scheduling.k8s.io/group-name` |
//! | Koordinator | `scheduling.sigs.k8s.io/v1alpha1` `PodGroup`, or pod annotations `gang.scheduling.koordinator.sh/*` | annotation `gang.scheduling.koordinator.sh/name`, or label `pod-group.scheduling.sigs.k8s.io` |
//! | KAI | `scheduling.run.ai/v2alpha2` `PodGroup` | annotation `pod-group-name` (+ label `kai.scheduler/subgroup-name`) |
//! | Grove | `scheduler.grove.io/v1alpha1` `PodGang` | label `grove.io/podgang` (+ label `grove.io/podclique`) |

pub mod coscheduling;
pub mod grove;
pub mod kai;
pub mod koordinator;
pub mod kubegang;
pub mod upstream;
pub mod volcano;

use std::collections::BTreeMap;

use serde_json::Value;

pub(crate) use crate::read::duration::parse as parse_duration;
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Gang, GangKey, Time};
pub(crate) use crate::read::object::group_of;

/// A pod's claim to belong to a gang, as one dialect reads it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Claim {
    pub dialect: Dialect,
    pub gang: GangKey,
    /// The leaf subgroup the pod names, if any.
    pub subgroup: Option<String>,
    /// Where the claim was read from (`metadata.labels[kube-gang.io/gang]`), for messages.
    pub path: String,
}

/// A gang-defining object, read.
#[derive(Clone, Debug, PartialEq)]
// Read and matched at once, never held in bulk: a box per object would cost more than the size.
#[allow(clippy::large_enum_variant)]
pub enum GangObject {
    /// A complete gang.
    Gang(Gang),
    /// One node of an upstream `scheduling.k8s.io` hierarchy; trees are assembled from these once
    /// every object is known (see [`upstream::assemble`]).
    UpstreamGroup(upstream::Group),
    /// An upstream `scheduling.k8s.io` Workload: its pod groups become gangs as pods name them
    /// (1.35 `workloadRef`), or are templates only (1.36+).
    Workload(upstream::Workload),
}

/// Every gang claim a pod makes, in every dialect. A pod that claims two different gangs is an
/// error naming both; the same gang named by two dialects (Koordinator annotations on a
/// coscheduling pod, say) is one claim per dialect and not a conflict. An upstream claim
/// (`spec.schedulingGroup`, `spec.workloadRef`) comes last and conflicts with none when read:
/// whether it names a gang depends on its PodGroup's policy (a basic one is no gang — from
/// Kubernetes 1.38 the Job controller names one on every Job's pods), so the conflict is decided
/// where the PodGroup is known ([`upstream_conflicts`] says at admission what will be decided).
pub fn pod_claims(pod: &Value) -> Result<Vec<Claim>, Vec<FieldError>> {
    let (claims, errors) = pod_claims_all(pod);
    if errors.is_empty() { Ok(claims) } else { Err(errors) }
}

/// Where a pod can name its gang: a label, an annotation, or a field of its spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Marker {
    Label(&'static str),
    Annotation(&'static str),
    /// A field of `spec` (`schedulingGroup`).
    Spec(&'static str),
}

/// Every marker one of the claim readers ([`pod_claims_all`]) reads a claim from. A pod that
/// carries none claims no gang; the webhook's pod hooks are reached only by pods that carry one
/// (`manifests/base/webhook-configurations.yaml`, `matchConditions`), which the manifest test holds
/// to this list, and the list to the readers (`every_claim_marker_is_read`).
/// `kube-gang.io/min-member` is not one (a claim needs the gang label) but also lets a pod through,
/// so that an annotation gang without its label is explained.
pub const CLAIM_MARKERS: &[Marker] = &[
    Marker::Label(crate::read::labels::LABEL_GANG),
    Marker::Annotation(crate::read::labels::ANNOTATION_GANG_FROM),
    Marker::Label(coscheduling::LABEL),
    Marker::Label(coscheduling::LEGACY_LABEL),
    Marker::Label(kai::ANNOTATION),
    Marker::Annotation(volcano::ANNOTATION),
    Marker::Annotation(kai::ANNOTATION),
    Marker::Annotation(koordinator::NAME),
    Marker::Label(grove::LABEL),
    Marker::Spec("schedulingGroup"),
    Marker::Spec("workloadRef"),
];

/// Every claim that could be read and every error (unreadable claims, conflicts), both at once:
/// validation reports all of them.
pub fn pod_claims_all(pod: &Value) -> (Vec<Claim>, Vec<FieldError>) {
    claims_of(&Meta::of(pod), pod)
}

/// [`pod_claims_all`] of the pod a workload's pod `template` makes in `namespace`, read where the
/// template is: nothing copied (a template's metadata may be megabytes of annotations, and every
/// admission decision reads each template's claims).
pub fn template_claims_all(template: &Value, namespace: &str) -> (Vec<Claim>, Vec<FieldError>) {
    claims_of(&Meta::of_template(template, namespace), template)
}

/// The claims of the object `pod` (a pod, or a pod template: both keep the spec fields a claim
/// reads under `spec`) whose metadata is `meta`.
fn claims_of(meta: &Meta<'_>, pod: &Value) -> (Vec<Claim>, Vec<FieldError>) {
    let mut claims = Vec::new();
    let mut errors = Vec::new();
    for read in [
        kubegang::claim,
        coscheduling::claim,
        volcano::claim,
        koordinator::claim,
        kai::claim,
        grove::claim,
        upstream::claim,
    ] {
        match read(meta, pod) {
            Ok(Some(c)) => claims.push(c),
            Ok(None) => {}
            Err(e) => errors.push(e),
        }
    }
    if let Some(first) = claims.first() {
        for other in claims[1..].iter().filter(|c| c.dialect != Dialect::Upstream) {
            if other.gang != first.gang {
                errors.push(FieldError::new(
                    other.path.clone(),
                    format!(
                        "pod is claimed by two gangs: {} {} ({}) and {} {} ({})",
                        first.dialect, first.gang, first.path, other.dialect, other.gang, other.path
                    ),
                ));
            }
        }
    }
    (claims, errors)
}

/// What admission says of a pod (or template) whose upstream claim names another gang than its
/// other claims: a warning each, since only the PodGroup's policy decides it. A basic PodGroup
/// (as Kubernetes 1.38's Job controller makes for every Job that asks for no gang) is no gang and
/// the other claim stands; a gang one makes the pod claimed by two gangs, which the scheduler
/// reports and settles for the other claim.
pub fn upstream_conflicts(claims: &[Claim]) -> Vec<String> {
    let Some(up) = claims.iter().find(|c| c.dialect == Dialect::Upstream) else { return Vec::new() };
    claims
        .iter()
        .filter(|c| c.dialect != Dialect::Upstream && c.gang != up.gang)
        .take(1)
        .map(|c| {
            format!(
                "{}: names upstream pod group {} while {} names {} gang {}: if {} has the basic policy \
                 (as the Job controller makes from Kubernetes 1.38) it is no gang and {} {} stands; if it \
                 has the gang policy the pod is claimed by two gangs, which gang-scheduler reports and \
                 settles for {} {}",
                up.path, up.gang, c.path, c.dialect, c.gang, up.gang, c.dialect, c.gang, c.dialect, c.gang
            )
        })
        .collect()
}

/// Reads a gang-defining object of any dialect. `None`: not a gang object.
pub fn read_object(obj: &Value) -> Option<Result<GangObject, Vec<FieldError>>> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    read_as(group_of(api_version), kind, obj)
}

/// A kind of object that defines gangs, and every fact about it the front doors and the
/// manifests need: its API, the dialect it is written in, how it is read, where the scheduler
/// writes a gang's state, and which of our webhooks see it.
#[derive(Debug)]
pub struct GangKind {
    pub group: &'static str,
    pub kind: &'static str,
    /// The versions read, preferred first: a cluster serving two is watched at both, and the
    /// copy of the preferred one kept (`cluster::READ` has a row per version).
    pub versions: &'static [&'static str],
    /// The resource name (`kubectl get <plural>`, RBAC, webhook rules).
    pub plural: &'static str,
    pub dialect: Dialect,
    read: fn(&Value) -> Result<GangObject, Vec<FieldError>>,
    /// The subresource the scheduler patches with a gang's phase and conditions (its RBAC grants
    /// `patch` on it); `None`: the object belongs to another project's controller, and the state
    /// goes on the gang's pods (annotation `kube-gang.io/state`, `Gang::keeps_state_on_pods`).
    pub status: Option<&'static str>,
    /// The phase the scheduler moves a waiting object of this kind to, when the project's own
    /// controllers create the gang's pods only after their scheduler has admitted the object
    /// (Volcano's `Inqueue`): written by a merge patch of the object itself (Volcano's PodGroup
    /// has no status subresource), only while the object is `Pending` and opted in
    /// ([`volcano::awaits_enqueue`]). Its RBAC grants `patch` on the resource for it alone.
    pub enqueue: Option<&'static str>,
    /// The status subresource the scheduler reports scheduling to in the project's own terms
    /// (Grove's PodGang: `phase`, a `Scheduled` condition, `placementScore`), the gang's state
    /// staying on its pods; its RBAC grants `patch` on it.
    pub reports: Option<&'static str>,
    /// Whether our validating webhook and ValidatingAdmissionPolicy admit objects of this kind
    /// (only our own: the others are their projects' to validate).
    pub validated: bool,
    /// Whether the webhook's gang lookup watches it: its pods name subgroups, which admission
    /// holds to the leaves of the gang's tree (its ClusterRole grants get/list/watch on it).
    pub lookup: bool,
}

/// Every kind of object that defines gangs, in one table: what reads them ([`read_as`]), what
/// tells them from other objects ([`is_gang_kind`]), what names a gang's object to the user and
/// in events ([`object_group`]), what the scheduler and the plugin watch (`cluster::READ`), what
/// the webhook's lookup watches, where the scheduler writes state — and, held to it by
/// `tests/tests/manifests.rs`, the RBAC, webhook rules and ValidatingAdmissionPolicy of
/// `manifests/`. Adding a gang-object dialect is its reader module and a row here.
pub const GANG_KINDS: &[GangKind] = &[
    GangKind {
        group: crate::read::labels::GROUP,
        kind: "Gang",
        versions: &[crate::read::labels::VERSION],
        plural: "gangs",
        dialect: Dialect::KubeGang,
        read: |o| kubegang::read(o).map(GangObject::Gang),
        status: Some("gangs/status"),
        enqueue: None,
        reports: None,
        validated: true,
        lookup: true,
    },
    GangKind {
        group: coscheduling::GROUP,
        kind: "PodGroup",
        versions: &["v1alpha1"],
        plural: "podgroups",
        dialect: Dialect::Coscheduling,
        read: |o| coscheduling::read(o).map(GangObject::Gang),
        status: None,
        enqueue: None,
        reports: None,
        validated: false,
        lookup: false,
    },
    GangKind {
        group: volcano::GROUP,
        kind: "PodGroup",
        versions: &["v1beta1"],
        plural: "podgroups",
        dialect: Dialect::Volcano,
        read: |o| volcano::read(o).map(GangObject::Gang),
        status: None,
        enqueue: Some(volcano::PHASE_INQUEUE),
        reports: None,
        validated: false,
        lookup: false,
    },
    GangKind {
        group: kai::GROUP,
        kind: "PodGroup",
        versions: &["v2alpha2"],
        plural: "podgroups",
        dialect: Dialect::Kai,
        read: |o| kai::read(o).map(GangObject::Gang),
        status: None,
        enqueue: None,
        reports: None,
        validated: false,
        lookup: true,
    },
    GangKind {
        group: koordinator::GROUP,
        kind: "PodGroup",
        versions: &["v1alpha1"],
        plural: "podgroups",
        dialect: Dialect::Koordinator,
        read: |o| koordinator::read(o).map(GangObject::Gang),
        status: None,
        enqueue: None,
        reports: None,
        validated: false,
        lookup: false,
    },
    GangKind {
        group: grove::GROUP,
        kind: grove::KIND,
        versions: &["v1alpha1"],
        plural: "podgangs",
        dialect: Dialect::Grove,
        read: |o| grove::read(o).map(GangObject::Gang),
        status: None,
        enqueue: None,
        reports: Some("podgangs/status"),
        validated: false,
        lookup: true,
    },
    // PodGroups, preferred version first: 1.37 serves v1beta1 and v1alpha3 (either may be enabled
    // alone), 1.36 v1alpha2 only.
    GangKind {
        group: upstream::GROUP,
        kind: "PodGroup",
        versions: &["v1beta1", "v1alpha3", "v1alpha2"],
        plural: "podgroups",
        dialect: Dialect::Upstream,
        read: |o| upstream::read(o).map(GangObject::UpstreamGroup),
        status: None,
        enqueue: None,
        reports: None,
        validated: false,
        lookup: false,
    },
    GangKind {
        group: upstream::GROUP,
        kind: "CompositePodGroup",
        versions: &["v1alpha3"],
        plural: "compositepodgroups",
        dialect: Dialect::Upstream,
        read: |o| upstream::read(o).map(GangObject::UpstreamGroup),
        status: None,
        enqueue: None,
        reports: None,
        validated: false,
        lookup: false,
    },
    // 1.35's Workload, which its pods point at; from 1.36 on a Workload only holds templates
    // (read by admission, `validate` and `simulate`; not watched).
    GangKind {
        group: upstream::GROUP,
        kind: "Workload",
        versions: &["v1alpha1"],
        plural: "workloads",
        dialect: Dialect::Upstream,
        read: |o| upstream::read_workload(o).map(GangObject::Workload),
        status: None,
        enqueue: None,
        reports: None,
        validated: false,
        lookup: false,
    },
];

/// Reads a gang-defining object whose API group and kind are known already (the identity it
/// was filed under). `None`: not a gang object.
pub fn read_as(group: &str, kind: &str, obj: &Value) -> Option<Result<GangObject, Vec<FieldError>>> {
    GANG_KINDS.iter().find(|k| k.group == group && k.kind == kind).map(|k| (k.read)(obj))
}

/// What a gang object asks for that the cycle does not evaluate, each naming its field (a Grove
/// PodGang's `reuseReservationRef`, a Volcano PodGroup's `networkTopology`): warnings for `validate` and `simulate`, never silence.
pub fn object_warnings(obj: &Value) -> Vec<String> {
    let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    match (group_of(api_version), kind) {
        (grove::GROUP, grove::KIND) => grove::warnings(obj),
        (volcano::GROUP, "PodGroup") => volcano::warnings(obj),
        (kai::GROUP, "PodGroup") => kai::warnings(obj),
        (upstream::GROUP, "PodGroup" | "Workload") => upstream::warnings(obj),
        (koordinator::GROUP, "PodGroup") => koordinator::network_topology_warnings(
            obj.pointer("/metadata/annotations").and_then(Value::as_object),
        ),
        _ => Vec::new(),
    }
}

/// Whether objects of this API group and kind define gangs (without reading one).
pub fn is_gang_kind(group: &str, kind: &str) -> bool {
    GANG_KINDS.iter().any(|k| k.group == group && k.kind == kind)
}

/// The API group of the object a gang of `dialect` was read from, an object of `kind`; `None`
/// for a gang its pods' annotations define (kube-gang's CRD-less gangs, Koordinator's annotation
/// gangs), which has no object of its own.
pub fn object_group(dialect: Dialect, kind: &str) -> Option<&'static str> {
    GANG_KINDS.iter().find(|k| k.dialect == dialect && k.kind == kind).map(|k| k.group)
}

/// Whether the scheduler writes the state of a gang of `dialect` read from an object of `kind`
/// to that object's status (the table's `status`); otherwise it goes on the gang's pods.
pub fn writes_status(dialect: Dialect, kind: &str) -> bool {
    GANG_KINDS.iter().any(|k| k.dialect == dialect && k.kind == kind && k.status.is_some())
}

/// Whether the scheduler reports scheduling to the status of a gang object of `dialect` and
/// `kind` in its project's terms (the table's `reports`).
pub fn reports_status(dialect: Dialect, kind: &str) -> bool {
    GANG_KINDS.iter().any(|k| k.dialect == dialect && k.kind == kind && k.reports.is_some())
}

/// The phase the scheduler moves a waiting gang object of `dialect` and `kind` to (the table's
/// `enqueue`), if its project's controllers wait for one before they create pods.
pub fn enqueue_phase(dialect: Dialect, kind: &str) -> Option<&'static str> {
    GANG_KINDS.iter().find(|k| k.dialect == dialect && k.kind == kind).and_then(|k| k.enqueue)
}

/// A gang defined by the annotations of its pods (kube-gang CRD-less, Koordinator): built from the
/// first pod that claims it. `None` when the claim's dialect has no annotation form.
pub fn annotation_gang(claim: &Claim, pod: &Value) -> Option<Result<Gang, Vec<FieldError>>> {
    annotation_gang_of(claim, &Meta::of(pod))
}

/// [`annotation_gang`] of the pod a workload's pod `template` makes in `namespace`, read where
/// the template is (see [`template_claims_all`]).
pub fn template_annotation_gang(
    claim: &Claim,
    template: &Value,
    namespace: &str,
) -> Option<Result<Gang, Vec<FieldError>>> {
    annotation_gang_of(claim, &Meta::of_template(template, namespace))
}

/// What a pod's Kueue topology annotations ask that its gang does not take (see
/// [`kubegang::kueue_topology_warnings`]), each naming the annotation. A gang defined by an object
/// takes its levels from that object, never from its pods.
pub fn topology_warnings(claim: &Claim, pod: &Value) -> Vec<String> {
    topology_warnings_of(claim, &Meta::of(pod))
}

/// [`topology_warnings`] of the pod a workload's pod `template` makes in `namespace`.
pub fn template_topology_warnings(claim: &Claim, template: &Value, namespace: &str) -> Vec<String> {
    topology_warnings_of(claim, &Meta::of_template(template, namespace))
}

fn topology_warnings_of(claim: &Claim, meta: &Meta<'_>) -> Vec<String> {
    use crate::read::labels::{KUEUE_PODSET_PREFERRED_TOPOLOGY, KUEUE_PODSET_REQUIRED_TOPOLOGY};
    if claim.dialect == Dialect::KubeGangAnnotations {
        return kubegang::kueue_topology_warnings(meta);
    }
    let koordinator = match claim.dialect {
        Dialect::Koordinator => koordinator::network_topology_warnings(meta.annotations.0),
        Dialect::Coscheduling => koordinator::member_network_warnings(meta.annotations.0),
        _ => Vec::new(),
    };
    koordinator
        .into_iter()
        .chain([KUEUE_PODSET_REQUIRED_TOPOLOGY, KUEUE_PODSET_PREFERRED_TOPOLOGY].into_iter().filter_map(
            |key| {
                let level = meta.annotations.get(key).filter(|v| !v.is_empty())?;
                Some(format!(
                    "{}: {level:?} is not used: gang {}'s levels are its {:?} object's",
                    annotation_path(key),
                    claim.gang,
                    claim.dialect
                ))
            },
        ))
        .collect()
}

fn annotation_gang_of(claim: &Claim, meta: &Meta<'_>) -> Option<Result<Gang, Vec<FieldError>>> {
    match claim.dialect {
        Dialect::KubeGangAnnotations => Some(kubegang::annotation_gang(meta, claim)),
        Dialect::Koordinator => Some(koordinator::annotation_gang(meta, claim)),
        _ => None,
    }
}

/// The metadata every reader needs, borrowed from a raw object: nothing is copied, labels and
/// annotations are looked up where they are (this runs for every pod a cluster lists).
#[derive(Debug)]
pub(crate) struct Meta<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub labels: Strings<'a>,
    pub annotations: Strings<'a>,
    creation_timestamp: Option<&'a str>,
    uid: Option<&'a str>,
}

/// A map of strings in a raw object (labels, annotations); entries that are not strings are
/// not there.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Strings<'a>(Option<&'a serde_json::Map<String, Value>>);

impl<'a> Strings<'a> {
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.0?.get(key).and_then(Value::as_str)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }
}

impl<'a> Meta<'a> {
    pub fn of(obj: &'a Value) -> Self {
        let m = obj.get("metadata");
        let s = |k: &str| m.and_then(|m| m.get(k)).and_then(Value::as_str);
        let map = |k: &str| Strings(m.and_then(|m| m.get(k)).and_then(Value::as_object));
        Meta {
            namespace: s("namespace").filter(|n| !n.is_empty()).unwrap_or("default"),
            name: s("name").unwrap_or(""),
            labels: map("labels"),
            annotations: map("annotations"),
            creation_timestamp: s("creationTimestamp"),
            uid: s("uid").filter(|u| !u.is_empty()),
        }
    }

    /// The metadata of the pod a workload's pod `template` makes: the template's own, in the
    /// workload's `namespace` (`default` when empty, as for a pod).
    pub fn of_template(template: &'a Value, namespace: &'a str) -> Self {
        Meta { namespace: if namespace.is_empty() { "default" } else { namespace }, ..Meta::of(template) }
    }

    /// `metadata.creationTimestamp` (the epoch when absent or unreadable).
    pub fn created(&self) -> Time {
        self.creation_timestamp.and_then(|t| Time::parse_rfc3339(t).ok()).unwrap_or_default()
    }

    /// `metadata.uid`, if set.
    pub fn uid(&self) -> Option<String> {
        self.uid.map(str::to_string)
    }

    pub fn key(&self) -> GangKey {
        GangKey::new(self.namespace, self.name)
    }
}

/// Field path of a label.
pub(crate) fn label_path(key: &str) -> String {
    format!("metadata.labels[{key}]")
}

/// Field path of an annotation.
pub(crate) fn annotation_path(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

/// Deserialises a dialect's typed object (a custom resource), each error naming its exact field in
/// the API server's words for a CRD.
pub(crate) fn typed<'de, T: serde::Deserialize<'de>>(obj: &'de Value) -> Result<T, Vec<FieldError>> {
    crate::read::error::decode(obj, "", crate::read::error::Wording::Crd)
}

/// A DNS-1123 label (RFC 1123, as Kubernetes checks names): at most 63 characters, lowercase
/// alphanumerics and `-`, starting and ending with an alphanumeric.
pub fn check_dns_label(v: &str) -> Result<(), String> {
    if crate::read::model::is_dns_label(v) {
        Ok(())
    } else {
        Err(format!(
            "{v:?} is not a valid DNS-1123 label: at most 63 lowercase alphanumerics or '-', starting and ending with an alphanumeric"
        ))
    }
}

/// A non-negative count from an annotation or field, with a message naming the value.
pub(crate) fn parse_count(path: &str, v: &str) -> Result<u32, FieldError> {
    v.trim().parse::<u32>().map_err(|_| FieldError::new(path, format!("{v:?} is not a non-negative integer")))
}

/// An `i32` spec field that must be a non-negative count.
pub(crate) fn count_field(path: &str, v: i32) -> Result<u32, FieldError> {
    u32::try_from(v).map_err(|_| FieldError::new(path, format!("must not be negative, got {v}")))
}

/// Resource minimums from a `minResources`-style map of quantities.
pub(crate) fn min_resources(
    path: &str,
    list: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Result<crate::read::resources::Resources, Vec<FieldError>> {
    match list {
        Some(l) => crate::read::resources::resource_list(path, l),
        None => Ok(crate::read::resources::Resources::default()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_of_a_workload_named_late_is_in_the_gang_its_controller_label_names() {
        let pod = |labels: serde_json::Value, from: &str| {
            serde_json::json!({"metadata": {"name": "p", "namespace": "ml", "labels": labels,
                "annotations": {crate::read::labels::ANNOTATION_GANG_FROM: from, crate::read::labels::ANNOTATION_MIN_MEMBER: "2"}}})
        };
        let job = crate::read::labels::JOB_NAME;
        let claims = pod_claims(&pod(serde_json::json!({job: "train-x7kzq"}), job)).unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].gang, crate::read::model::GangKey::new("ml", "train-x7kzq"));
        assert_eq!(claims[0].dialect, crate::read::model::Dialect::KubeGangAnnotations);
        // The gang label wins.
        let both = pod(serde_json::json!({job: "train-x7kzq", crate::read::labels::LABEL_GANG: "mine"}), job);
        assert_eq!(pod_claims(&both).unwrap()[0].gang.name, "mine");
        // A pod without the label (not made by the controller): no gang.
        assert!(pod_claims(&pod(serde_json::json!({}), job)).unwrap().is_empty());
        // A label no workload controller writes a name in: refused, naming the annotation.
        let e = pod_claims(&pod(serde_json::json!({"app": "x"}), "app")).unwrap_err();
        assert_eq!(e[0].path, "metadata.annotations[kube-gang.io/gang-from]");
        // LeaderWorkerSet: one gang per group, as with the gang label.
        let lws = pod(
            serde_json::json!({crate::read::labels::LWS_NAME: "vllm-abcde", crate::read::labels::LWS_GROUP_INDEX: "1"}),
            crate::read::labels::LWS_NAME,
        );
        assert_eq!(pod_claims(&lws).unwrap()[0].gang.name, "vllm-abcde-1");
    }

    #[test]
    fn one_table_says_which_objects_define_gangs_and_where_each_gang_object_lives() {
        for k in GANG_KINDS {
            assert!(is_gang_kind(k.group, k.kind), "{}/{}", k.group, k.kind);
            // Read by its own reader: an empty object is refused (no name), never taken for another kind.
            assert!(read_as(k.group, k.kind, &serde_json::json!({})).is_some(), "{}/{}", k.group, k.kind);
            assert_eq!(object_group(k.dialect, k.kind), Some(k.group), "{:?} {}", k.dialect, k.kind);
        }
        // Where the state goes: the object's status where the table says so, else the pods.
        for k in GANG_KINDS {
            let g = crate::read::model::Gang::new(
                crate::read::model::GangKey::new("ml", "g"),
                1,
                crate::read::model::Source { dialect: k.dialect, kind: k.kind.into() },
            );
            assert_eq!(g.keeps_state_on_pods(), !writes_status(k.dialect, k.kind), "{}/{}", k.group, k.kind);
        }
        // Every (group, kind) is in the table once.
        let mut seen = std::collections::BTreeSet::new();
        assert!(GANG_KINDS.iter().all(|k| seen.insert((k.group, k.kind))));
        // Koordinator's PodGroup is an object (events and `status` name it); its annotation gangs,
        // like kube-gang's CRD-less ones, have none.
        assert_eq!(object_group(Dialect::Koordinator, "PodGroup"), Some("scheduling.sigs.k8s.io"));
        assert_eq!(object_group(Dialect::Koordinator, "Pod"), None);
        assert_eq!(object_group(Dialect::KubeGangAnnotations, "Pod"), None);
        assert!(!is_gang_kind("batch", "Job"));
        assert!(read_as("scheduling.x-k8s.io", "Gang", &serde_json::json!({})).is_none());
    }
    use serde_json::json;

    #[test]
    fn a_pod_claimed_by_two_gangs_names_both() {
        let pod = json!({"metadata": {"namespace": "ml", "name": "p",
            "labels": {"kube-gang.io/gang": "a", "scheduling.x-k8s.io/pod-group": "b"}}});
        let errs = pod_claims(&pod).unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(errs[0].message.contains("ml/a") && errs[0].message.contains("ml/b"), "{}", errs[0]);
        assert_eq!(errs[0].path, "metadata.labels[scheduling.x-k8s.io/pod-group]");
    }

    #[test]
    fn an_upstream_claim_beside_another_gang_is_left_to_the_podgroup_s_policy() {
        // A Job opted in to kube-gang, its pod as Kubernetes 1.38's Job controller makes it.
        let pod = json!({"metadata": {"namespace": "ml", "name": "p", "labels": {"kube-gang.io/gang": "train"}},
            "spec": {"schedulingGroup": {"podGroupName": "train-x7k2p"}}});
        let claims = pod_claims(&pod).unwrap();
        let read: Vec<(Dialect, &str)> = claims.iter().map(|c| (c.dialect, c.gang.name.as_str())).collect();
        assert_eq!(read, [(Dialect::KubeGang, "train"), (Dialect::Upstream, "train-x7k2p")]);
        let w = upstream_conflicts(&claims);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].starts_with("spec.schedulingGroup.podGroupName: names upstream pod group ml/train-x7k2p"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("kube-gang gang ml/train"), "{}", w[0]);
        // Naming the same gang, or only one: nothing to say.
        let same = json!({"metadata": {"namespace": "ml", "name": "p", "labels": {"kube-gang.io/gang": "train"}},
            "spec": {"schedulingGroup": {"podGroupName": "train"}}});
        assert!(upstream_conflicts(&pod_claims(&same).unwrap()).is_empty());
        // Two non-upstream gangs beside an upstream claim still conflict.
        let three = json!({"metadata": {"namespace": "ml", "name": "p",
            "labels": {"kube-gang.io/gang": "a", "scheduling.x-k8s.io/pod-group": "b"}},
            "spec": {"schedulingGroup": {"podGroupName": "c"}}});
        assert_eq!(pod_claims(&three).unwrap_err().len(), 1);
    }

    #[test]
    fn the_same_gang_in_two_dialects_is_not_a_conflict() {
        let pod = json!({"metadata": {"name": "p",
            "labels": {"scheduling.x-k8s.io/pod-group": "g"},
            "annotations": {"gang.scheduling.koordinator.sh/name": "g"}}});
        let claims = pod_claims(&pod).unwrap();
        assert_eq!(claims.len(), 2);
        assert!(claims.iter().all(|c| c.gang == GangKey::new("default", "g")));
    }

    #[test]
    fn every_claim_marker_is_read() {
        for m in CLAIM_MARKERS {
            let pod = match m {
                Marker::Label(k) => json!({"metadata": {"name": "p", "labels": {*k: "g"}}}),
                // The gang is named by the label it names: a pod made by the workload's controller.
                Marker::Annotation(k) if *k == crate::read::labels::ANNOTATION_GANG_FROM => {
                    let label = crate::read::labels::JOB_NAME;
                    json!({"metadata": {"name": "p", "annotations": {*k: label}, "labels": {label: "g"}}})
                }
                Marker::Annotation(k) => json!({"metadata": {"name": "p", "annotations": {*k: "g"}}}),
                Marker::Spec("schedulingGroup") => {
                    json!({"metadata": {"name": "p"}, "spec": {"schedulingGroup": {"podGroupName": "g"}}})
                }
                Marker::Spec(f) => {
                    json!({"metadata": {"name": "p"}, "spec": {*f: {"name": "w", "podGroup": "g"}}})
                }
            };
            let (claims, errors) = pod_claims_all(&pod);
            assert_eq!((claims.len(), errors.len()), (1, 0), "{m:?}: {pod}");
        }
        let none = json!({"metadata": {"name": "p", "labels": {"app": "x"}, "annotations": {"a": "b"}},
                          "spec": {"containers": []}});
        assert_eq!(pod_claims_all(&none), (vec![], vec![]));
    }

    #[test]
    fn unrelated_objects_are_not_gang_objects() {
        assert!(read_object(&json!({"apiVersion": "v1", "kind": "ConfigMap"})).is_none());
        assert!(read_object(&json!({"apiVersion": "batch/v1", "kind": "Job"})).is_none());
        assert!(read_object(&json!("not an object")).is_none());
    }
}
