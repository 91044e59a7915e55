//! scheduler-plugins coscheduling: `scheduling.x-k8s.io/v1alpha1` `PodGroup` and the pod label
//! `scheduling.x-k8s.io/pod-group` (older releases: `pod-group.scheduling.sigs.k8s.io`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::Deserialize;
use serde_json::Value;

use super::{Claim, Meta, count_field, label_path, min_resources, typed};
use crate::read::error::FieldError;
use crate::read::model::{Dialect, Gang, GangKey, Source};

/// The API group.
pub const GROUP: &str = "scheduling.x-k8s.io";
/// Pod label naming the PodGroup.
pub const LABEL: &str = "scheduling.x-k8s.io/pod-group";
/// The label's name before scheduler-plugins v0.28.
pub const LEGACY_LABEL: &str = "pod-group.scheduling.sigs.k8s.io";

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodGroup {
    #[serde(default)]
    spec: Spec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    #[serde(default)]
    min_member: i32,
    min_resources: Option<BTreeMap<String, Quantity>>,
    schedule_timeout_seconds: Option<i32>,
}

pub(crate) fn claim(meta: &Meta<'_>, _pod: &Value) -> Result<Option<Claim>, FieldError> {
    let found = [LABEL, LEGACY_LABEL].into_iter().find_map(|l| meta.labels.get(l).map(|v| (l, v)));
    Ok(found.map(|(label, name)| Claim {
        dialect: Dialect::Coscheduling,
        gang: GangKey::new(meta.namespace, name),
        subgroup: None,
        path: label_path(label),
    }))
}

/// Reads a coscheduling PodGroup.
pub fn read(obj: &Value) -> Result<Gang, Vec<FieldError>> {
    read_as(obj, Dialect::Coscheduling)
}

/// Reads a PodGroup of scheduler-plugins' shape for `dialect` (Koordinator ships the same type
/// under its older group).
pub(crate) fn read_as(obj: &Value, dialect: Dialect) -> Result<Gang, Vec<FieldError>> {
    let meta = Meta::of(obj);
    let pg: PodGroup = typed(obj)?;
    let mut errors = Vec::new();
    let min = count_field("spec.minMember", pg.spec.min_member).map_err(|e| errors.push(e)).unwrap_or(0);
    let mut gang = Gang::new(meta.key(), min, Source { dialect, kind: "PodGroup".into() });
    gang.created = meta.created();
    gang.uid = meta.uid();
    match min_resources("spec.minResources", pg.spec.min_resources.as_ref()) {
        Ok(r) => gang.min_resources = r,
        Err(e) => errors.extend(e),
    }
    if let Some(t) = pg.spec.schedule_timeout_seconds {
        match u64::try_from(t) {
            Ok(t) => gang.timeout = Some(Duration::from_secs(t)),
            Err(_) => errors.push(FieldError::new(
                "spec.scheduleTimeoutSeconds",
                format!("must not be negative, got {t}"),
            )),
        }
    }
    if errors.is_empty() { Ok(gang) } else { Err(errors) }
}
