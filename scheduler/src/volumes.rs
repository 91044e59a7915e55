//! The volume binder: what kube-scheduler's binder does before a pod is bound (`BindPodVolumes`),
//! for each claim a plan binds first ([`scheduler_core::Plan::volumes`]) — a static PV chosen: its
//! `spec.claimRef` (with `pv.kubernetes.io/bound-by-controller`), then the claim's
//! `spec.volumeName`, as the PV controller expects to find them; provisioning: the claim's
//! `volume.kubernetes.io/selected-node`, which its provisioner acts on.
//!
//! The pods those claims belong to are not among the plan's bindings: the core withholds every
//! member of their gang until each claim of theirs is bound (the PV controller done, or the
//! provisioner's PV bound), and binds them in a later cycle — so a gang is never half-bound
//! because of a volume, and a write that fails costs a retry only: the next cycle decides again
//! from what the watch shows. Each write carries the `resourceVersion` of the object it was
//! computed from (a 409 when another binder or the PV controller changed it first), and one
//! computed from a version the watch still shows was sent already is not sent again.

use std::collections::{BTreeMap, BTreeSet};

use futures::StreamExt;
use scheduler_core::cluster::{PV, PVC};
use scheduler_core::model::ObjectKey;
use scheduler_core::model::volume::{BOUND_BY_CONTROLLER, SELECTED_NODE};
use scheduler_core::object::{ObjectRef, at};
use scheduler_core::plan::VolumeBinding;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::apply::{Http, may_send};
use crate::index::Index;
use crate::lease::Standing;

const MERGE: &str = "application/merge-patch+json";

/// One write to a PV or a PVC, and the version of the object it was computed from.
#[derive(Clone, Debug, PartialEq)]
pub struct VolumeWrite {
    pub object: ObjectRef,
    pub resource_version: String,
    pub http: Http,
}

/// What binding one claim takes: its writes, sent in order, each only once the one before it was
/// made (a claim's `volumeName` after its PV's `claimRef`).
pub type Steps = Vec<VolumeWrite>;

fn str_of<'a>(v: &'a Value, pointer: &str) -> &'a str {
    at(v, pointer).and_then(Value::as_str).unwrap_or("")
}

fn version(v: &Value) -> String {
    str_of(v, "/metadata/resourceVersion").to_string()
}

/// The writes that bind `b`'s claim as the plan says, given the objects as the watch shows them
/// (`get`); none when they say it already, or when an object is not known yet (the next cycle
/// decides again).
pub fn steps(b: &VolumeBinding, get: impl Fn(&ObjectRef) -> Option<Value>) -> Steps {
    let ObjectKey { namespace, name } = &b.claim;
    let claim_ref = ObjectRef::of_kind(&PVC, namespace.as_str(), name.as_str());
    let Some(claim) = get(&claim_ref) else { return Vec::new() };
    let path = format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}");
    let claim_version = version(&claim);
    let Some(pv) = &b.volume else {
        if str_of(&claim, &format!("/metadata/annotations/{}", SELECTED_NODE.replace('/', "~1"))) == b.node {
            return Vec::new();
        }
        let patch =
            json!({"metadata": {"resourceVersion": claim_version, "annotations": {SELECTED_NODE: b.node}}});
        return vec![VolumeWrite {
            object: claim_ref,
            resource_version: claim_version,
            http: Http { method: "PATCH", path, content_type: MERGE, body: patch },
        }];
    };
    let volume_ref = ObjectRef::of_kind(&PV, "", pv.as_str());
    let Some(volume) = get(&volume_ref) else { return Vec::new() };
    let uid = str_of(&claim, "/metadata/uid");
    let mut out = Vec::new();
    let bound_here = str_of(&volume, "/spec/claimRef/namespace") == namespace.as_str()
        && str_of(&volume, "/spec/claimRef/name") == name.as_str()
        && [uid, ""].contains(&str_of(&volume, "/spec/claimRef/uid"));
    if !bound_here {
        let volume_version = version(&volume);
        // `GetBindVolumeToClaim`: the claim's reference, and the controller's mark.
        let patch = json!({
            "metadata": {"resourceVersion": volume_version, "annotations": {BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": namespace,
                                  "name": name, "uid": uid, "resourceVersion": claim_version}},
        });
        out.push(VolumeWrite {
            object: volume_ref,
            resource_version: volume_version,
            http: Http {
                method: "PATCH",
                path: format!("/api/v1/persistentvolumes/{pv}"),
                content_type: MERGE,
                body: patch,
            },
        });
    }
    if str_of(&claim, "/spec/volumeName") != pv.as_str() {
        let patch = json!({"metadata": {"resourceVersion": claim_version}, "spec": {"volumeName": pv}});
        out.push(VolumeWrite {
            object: claim_ref,
            resource_version: claim_version,
            http: Http { method: "PATCH", path, content_type: MERGE, body: patch },
        });
    }
    out
}

/// What one round of writes came to.
#[derive(Debug, Default)]
pub struct Bound {
    pub made: usize,
    pub failed: usize,
    /// The objects as the API server answered the writes made (the versions they made), for
    /// the index to hold before the watch delivers them: the next cycle sees what was written.
    pub objects: Vec<(ObjectRef, Value)>,
}

/// Binds the claims a plan binds first, remembering what it sent until the watch shows it.
#[derive(Debug, Default)]
pub struct Binder {
    /// Object → the `resourceVersion` the last write to it was computed from.
    sent: BTreeMap<ObjectRef, String>,
}

impl Binder {
    pub fn new() -> Self {
        Binder::default()
    }

    /// Whether `w` was sent already, computed from the version the watch still shows.
    pub(crate) fn sent_from(&self, w: &VolumeWrite) -> bool {
        self.sent.get(&w.object) == Some(&w.resource_version)
    }

    /// Each claim's steps (a claim shared by members once), less what was sent from a version the
    /// watch still shows.
    pub fn plan(&mut self, volumes: &[VolumeBinding], index: &Index) -> Vec<Steps> {
        let current = |r: &ObjectRef| index.get(r).map(version);
        // What the watch shows changed since is forgotten: the write's effect, or a reason to
        // write again, is there now.
        self.sent.retain(|r, v| current(r).as_ref() == Some(v));
        let mut seen: BTreeSet<&ObjectKey> = BTreeSet::new();
        volumes
            .iter()
            .filter(|b| seen.insert(&b.claim))
            .map(|b| steps(b, |r| index.get(r).cloned()))
            .filter(|s| {
                !s.is_empty() && !s.iter().any(|w| self.sent.get(&w.object) == Some(&w.resource_version))
            })
            .collect()
    }

    /// Sends `plan` (see [`Binder::plan`]): claims `concurrency` at a time, each claim's writes in
    /// order, stopping at the first that is not made. Only while this replica may act.
    pub async fn send(
        &mut self,
        client: &kube::Client,
        standing: &watch::Receiver<Standing>,
        plan: Vec<Steps>,
        concurrency: usize,
    ) -> Bound {
        let results: Vec<Vec<(ObjectRef, String, Option<Value>)>> = futures::stream::iter(plan)
            .map(|steps| async move {
                let mut done = Vec::new();
                for w in steps {
                    let made = match may_send(client, standing, &w.http).await {
                        Some(Ok(answer)) => Some(answer),
                        Some(Err(e)) => {
                            tracing::info!(object = %w.object.describe(), error = %e, "claim write failed; the next cycle decides again");
                            None
                        }
                        None => None,
                    };
                    let stop = made.is_none();
                    done.push((w.object, w.resource_version, made));
                    if stop {
                        break;
                    }
                }
                done
            })
            .buffer_unordered(concurrency.max(1))
            .collect()
            .await;
        let mut out = Bound::default();
        for (object, version, made) in results.into_iter().flatten() {
            match made {
                Some(answer) => {
                    out.made += 1;
                    if answer.pointer("/metadata/resourceVersion").is_some() {
                        out.objects.push((ObjectRef::of(&answer), answer));
                    }
                    self.sent.insert(object, version);
                }
                None => out.failed += 1,
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(annotations: Value, volume_name: Option<&str>) -> Value {
        let mut c = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "ml", "uid": "c1", "resourceVersion": "7", "annotations": annotations},
            "spec": {"accessModes": ["ReadWriteOnce"]}});
        if let Some(v) = volume_name {
            c["spec"]["volumeName"] = json!(v);
        }
        c
    }

    fn volume(claim_ref: Option<Value>) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1", "resourceVersion": "9"}, "spec": {}});
        if let Some(r) = claim_ref {
            v["spec"]["claimRef"] = r;
        }
        v
    }

    fn binding(volume: Option<&str>) -> VolumeBinding {
        VolumeBinding {
            pod: ObjectKey::new("ml", "w-0"),
            node: "n1".into(),
            claim: ObjectKey::new("ml", "data"),
            volume: volume.map(String::from),
        }
    }

    fn lookup(objects: Vec<Value>) -> impl Fn(&ObjectRef) -> Option<Value> {
        move |r: &ObjectRef| objects.iter().find(|o| ObjectRef::of(o) == *r).cloned()
    }

    #[test]
    fn a_static_pv_is_bound_claim_ref_first_then_the_claims_volume_name() {
        let s = steps(&binding(Some("pv-1")), lookup(vec![claim(json!({}), None), volume(None)]));
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].http.path, "/api/v1/persistentvolumes/pv-1");
        assert_eq!(s[0].http.body["spec"]["claimRef"]["uid"], "c1");
        assert_eq!(s[0].http.body["metadata"]["resourceVersion"], "9");
        assert_eq!(s[0].http.body["metadata"]["annotations"][BOUND_BY_CONTROLLER], "yes");
        assert_eq!(s[1].http.path, "/api/v1/namespaces/ml/persistentvolumeclaims/data");
        assert_eq!(s[1].http.body["spec"]["volumeName"], "pv-1");
        assert_eq!(s[1].http.body["metadata"]["resourceVersion"], "7");
        // The PV already points at the claim (a round cut short): the claim's side only.
        let pointed = volume(Some(json!({"namespace": "ml", "name": "data", "uid": "c1"})));
        let s = steps(&binding(Some("pv-1")), lookup(vec![claim(json!({}), None), pointed.clone()]));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].object, ObjectRef::of_kind(&PVC, "ml", "data"));
        // Both sides done: nothing.
        assert!(
            steps(&binding(Some("pv-1")), lookup(vec![claim(json!({}), Some("pv-1")), pointed])).is_empty()
        );
        // Not known yet: nothing, for now.
        assert!(steps(&binding(Some("pv-1")), lookup(vec![claim(json!({}), None)])).is_empty());
    }

    #[test]
    fn provisioning_is_asked_once_for_the_node() {
        let s = steps(&binding(None), lookup(vec![claim(json!({}), None)]));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].http.body["metadata"]["annotations"][SELECTED_NODE], "n1");
        let asked = claim(json!({SELECTED_NODE: "n1"}), None);
        assert!(steps(&binding(None), lookup(vec![asked])).is_empty());
        // The claim names another node: the write says what the plan says.
        let elsewhere = claim(json!({SELECTED_NODE: "n2"}), None);
        assert_eq!(steps(&binding(None), lookup(vec![elsewhere])).len(), 1);
    }
}
