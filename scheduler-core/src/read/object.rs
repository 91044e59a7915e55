//! Which object this is: an object's identity (API version and group, kind, namespace, name, uid),
//! read from its JSON once, where it enters the cluster view ([`crate::cluster::Cluster::push`],
//! [`crate::cluster::Live::push`]), and carried from there instead of being read again.

use serde_json::Value;

/// The identity of one Kubernetes object.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// `v1`, `scheduling.volcano.sh/v1beta1`, …
    pub api_version: String,
    /// The API group of `api_version` (`""` for the core group).
    pub group: String,
    pub kind: String,
    /// `""` for cluster-scoped objects (and for namespaced ones that do not say).
    pub namespace: String,
    pub name: String,
    /// `metadata.uid`, where the object has one (objects read from the API do; files may not).
    pub uid: Option<String>,
}

/// Where the cluster view files an object, by its API version and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Filed {
    Node,
    Pod,
    Namespace,
    PriorityClass,
    /// A `policy/v1` PodDisruptionBudget.
    Budget,
    /// Anything else: a gang object of some dialect, or a kind the cluster view does not use.
    Other,
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> &'a str {
    at(v, ptr).and_then(Value::as_str).unwrap_or("")
}

/// An array index, read as serde_json reads one in a pointer: digits, no sign, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// [`Value::pointer`] without its allocations: serde_json unescapes every token into a new
/// `String`, two per token — on the load path, several per object, 140,000 objects at a time. A
/// pointer with an escape (`~0`, `~1`) is left to serde_json.
pub fn at<'a>(v: &'a Value, pointer: &str) -> Option<&'a Value> {
    if pointer.is_empty() || pointer.contains('~') {
        return v.pointer(pointer);
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/').try_fold(v, |target, token| match target {
        Value::Object(map) => map.get(token),
        Value::Array(list) => index(token).and_then(|i| list.get(i)),
        _ => None,
    })
}

impl ObjectRef {
    /// The identity an object states (fields it lacks are empty).
    pub fn of(obj: &Value) -> Self {
        let mut r = ObjectRef::new(
            str_at(obj, "/apiVersion"),
            str_at(obj, "/kind"),
            str_at(obj, "/metadata/namespace"),
            str_at(obj, "/metadata/name"),
        );
        r.uid = at(obj, "/metadata/uid").and_then(Value::as_str).map(str::to_string);
        r
    }

    /// An identity from its parts (no uid).
    pub fn new(api_version: &str, kind: &str, namespace: &str, name: &str) -> Self {
        ObjectRef {
            api_version: api_version.to_string(),
            group: group_of(api_version).to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: None,
        }
    }

    /// Where the cluster view files it.
    pub fn filed(&self) -> Filed {
        match (self.api_version.as_str(), self.kind.as_str()) {
            ("v1", "Node") => Filed::Node,
            ("v1", "Pod") => Filed::Pod,
            ("v1", "Namespace") => Filed::Namespace,
            (_, "PriorityClass") if self.group == "scheduling.k8s.io" => Filed::PriorityClass,
            ("policy/v1", "PodDisruptionBudget") => Filed::Budget,
            _ => Filed::Other,
        }
    }

    /// The namespace a pod lives in: the API server puts a pod that names none in `default`.
    pub fn pod_namespace(&self) -> &str {
        if self.namespace.is_empty() { "default" } else { &self.namespace }
    }
}

/// The API group of an `apiVersion` (`scheduling.volcano.sh/v1beta1` → `scheduling.volcano.sh`;
/// `v1` → the core group, `""`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn at_finds_what_pointer_finds() {
        let v = json!({"metadata": {"name": "p", "a/b": 1, "m~n": 2, "": 3},
                       "items": [{"x": 1}, {"x": 2}], "n": null});
        for p in [
            "",
            "/",
            "/metadata",
            "/metadata/name",
            "/metadata/a~1b",
            "/metadata/m~0n",
            "/metadata/",
            "/items/1/x",
            "/items/01",
            "/items/+1",
            "/items/2",
            "/items/-1",
            "/n/x",
            "/missing",
            "metadata",
            "/metadata/name/x",
        ] {
            assert_eq!(at(&v, p), v.pointer(p), "{p:?}");
        }
    }

    #[test]
    fn identity_is_read_once_from_the_object() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "w-0", "uid": "u1"}});
        let r = ObjectRef::of(&pod);
        assert_eq!((r.group.as_str(), r.name.as_str(), r.uid.as_deref()), ("", "w-0", Some("u1")));
        assert_eq!((r.filed(), r.pod_namespace()), (Filed::Pod, "default"));
        let pg = ObjectRef::of(&json!({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"namespace": "ml", "name": "g"}}));
        assert_eq!((pg.group.as_str(), pg.filed(), pg.uid), ("scheduling.volcano.sh", Filed::Other, None));
        let pc = ObjectRef::new("scheduling.k8s.io/v1", "PriorityClass", "", "high");
        assert_eq!(pc.filed(), Filed::PriorityClass);
        assert_eq!(ObjectRef::new("example.com/v1", "PriorityClass", "", "x").filed(), Filed::Other);
        assert_eq!(ObjectRef::of(&json!("not an object")), ObjectRef::default());
    }
}
