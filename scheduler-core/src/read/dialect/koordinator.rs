//! Koordinator: CRD-less gangs from pod annotations `gang.scheduling.koordinator.sh/{name,
//! min-available, total-number, mode, waiting-time, groups}`, or the `PodGroup` Koordinator ships
//! (`scheduling.sigs.k8s.io/v1alpha1`, scheduler-plugins' type under its older group; pods join by
//! label `pod-group.scheduling.sigs.k8s.io`) with the same `mode`, `groups` and `total-number`
//! annotations on the PodGroup.

use serde_json::Value;

use super::{Claim, Meta, annotation_path, parse_count, parse_duration};

/// The API group of Koordinator's `PodGroup`.
pub const GROUP: &str = "scheduling.sigs.k8s.io";
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Gang, GangKey, GangMode, Source};

/// Annotation naming the gang.
pub const NAME: &str = "gang.scheduling.koordinator.sh/name";
/// Minimum members.
pub const MIN_AVAILABLE: &str = "gang.scheduling.koordinator.sh/min-available";
/// Expected total members.
pub const TOTAL_NUMBER: &str = "gang.scheduling.koordinator.sh/total-number";
/// `Strict` or `NonStrict`.
pub const MODE: &str = "gang.scheduling.koordinator.sh/mode";
/// How long the gang may wait (a Go duration).
pub const WAITING_TIME: &str = "gang.scheduling.koordinator.sh/waiting-time";
/// JSON list of `namespace/name` gangs scheduled together.
pub const GROUPS: &str = "gang.scheduling.koordinator.sh/groups";
/// The gang's network-topology gather rules (a JSON `gatherStrategy` list of layers of the
/// cluster's `ClusterNetworkTopology`), on its PodGroup or its pods.
pub const NETWORK_TOPOLOGY_SPEC: &str = "gang.scheduling.koordinator.sh/network-topology-spec";
/// A pod's rank for network-topology placement.
pub const NETWORK_TOPOLOGY_INDEX: &str = "gang.scheduling.koordinator.sh/network-topology-index";

/// What Koordinator's network-topology annotations ask that is not evaluated, naming each: its
/// gather rules are layers of a `ClusterNetworkTopology` (`scheduling.koordinator.sh`), which is
/// not read yet, so the gang is placed without them — said, never silent. `annotations`: the
/// object's `metadata.annotations` (a PodGroup's or a pod's).
pub fn network_topology_warnings(annotations: Option<&serde_json::Map<String, Value>>) -> Vec<String> {
    let Some(a) = annotations else { return Vec::new() };
    [NETWORK_TOPOLOGY_SPEC, NETWORK_TOPOLOGY_INDEX]
        .into_iter()
        .filter(|k| a.contains_key(*k))
        .map(|k| {
            format!(
                "metadata.annotations[{k}]: not evaluated: Koordinator's network-topology layers \
                 (ClusterNetworkTopology) are not read; the gang is placed without them (set \
                 kube-gang.io/topology-required or -preferred to a node label for the same effect)"
            )
        })
        .collect()
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    Ok(meta.annotations.get(NAME).map(|name| Claim {
        dialect: Dialect::Koordinator,
        gang: GangKey::new(meta.namespace, name),
        subgroup: None,
        path: annotation_path(NAME),
    }))
}

/// Reads Koordinator's PodGroup: `minMember`, `scheduleTimeoutSeconds`, `minResources`, and the gang
/// annotations Koordinator reads on it (`mode`, `groups`, `total-number`).
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let mut errors = Vec::new();
    let mut gang = super::coscheduling::read_as(obj, Dialect::Koordinator)?;
    let key = gang.key.clone();
    extras(&meta, &key, &mut gang, &mut errors);
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}

/// `total-number`, `mode`, `waiting-time` and `groups`, read onto `gang`.
fn extras(meta: &Meta<'_>, key: &GangKey, gang: &mut Gang, errors: &mut Vec<FieldError>) {
    let a = &meta.annotations;
    if let Some(v) = a.get(TOTAL_NUMBER) {
        match parse_count(&annotation_path(TOTAL_NUMBER), v) {
            Ok(n) => gang.total_member = Some(n),
            Err(e) => errors.push(e),
        }
    }
    match a.get(MODE) {
        None | Some("Strict") => {}
        Some("NonStrict") => gang.mode = GangMode::NonStrict,
        Some(other) => errors.push(FieldError::new(
            annotation_path(MODE),
            format!("Unsupported value: {other:?}: supported values: \"NonStrict\", \"Strict\""),
        )),
    }
    if let Some(v) = a.get(WAITING_TIME) {
        match parse_duration(v) {
            Ok(d) => gang.timeout = Some(d),
            Err(e) => errors.push(FieldError::new(annotation_path(WAITING_TIME), e)),
        }
    }
    if let Some(v) = a.get(GROUPS) {
        match serde_json::from_str::<Vec<String>>(v) {
            Ok(list) => {
                for (i, s) in list.iter().enumerate() {
                    match GangKey::parse(s, meta.namespace) {
                        Some(k) if &k != key => gang.gang_group.push(k),
                        Some(_) => {}
                        None => errors.push(FieldError::new(
                            format!("{}[{i}]", annotation_path(GROUPS)),
                            format!("{s:?} is not namespace/name"),
                        )),
                    }
                }
            }
            Err(e) => errors
                .push(FieldError::new(annotation_path(GROUPS), format!("not a JSON list of strings: {e}"))),
        }
    }
}

pub(crate) fn annotation_gang(meta: &Meta<'_>, claim: &Claim) -> Result<Gang, Vec<FieldError>> {
    let mut errors = Vec::new();
    let a = &meta.annotations;
    let min = match a.get(MIN_AVAILABLE) {
        Some(v) => parse_count(&annotation_path(MIN_AVAILABLE), v).map_err(|e| errors.push(e)).unwrap_or(0),
        None => {
            errors.push(FieldError::new(
                annotation_path(MIN_AVAILABLE),
                "required with gang.scheduling.koordinator.sh/name",
            ));
            0
        }
    };
    let mut gang =
        Gang::new(claim.gang.clone(), min, Source { dialect: Dialect::Koordinator, kind: "Pod".into() });
    gang.created = meta.created();
    extras(meta, &claim.gang, &mut gang, &mut errors);
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}
