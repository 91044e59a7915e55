//! Request bodies checked the way kube-apiserver checks them, for the fields the scheduler and
//! the plugin write. Three stages, in the API server's order:
//!
//! 1. **Decoding** (400 `BadRequest`): `metav1.Time` fields must parse as Go's `time.RFC3339`
//!    (any fraction of a second accepted), `metav1.MicroTime` fields as
//!    `2006-01-02T15:04:05.000000Z07:00` (exactly six fractional digits); then the body must
//!    decode into the k8s-openapi type of its kind (a custom resource: any JSON object).
//! 2. **Object meta** (422 `Invalid`): names and `generateName` as DNS-1123 subdomains (labels for
//!    namespaces; a trailing `-` of a `generateName` is allowed, a trailing `.` is not), label keys
//!    as qualified names, label values, annotation keys and their total size (256 KiB).
//! 3. **The kind's rules** (422 `Invalid`): Events as `pkg/apis/core/validation/events.go` checks
//!    them (the field paths are the internal type's, as the API server reports them: `note` is
//!    `message`, `regarding` is `involvedObject`); `metav1.Condition`s as apimachinery's
//!    `ValidateConditions`; pod condition types; Lease durations; the `Gang` against its CRD's
//!    OpenAPI schema ([`crate::schema`]); on update, each kind's update rules ([`update`]: a
//!    ResourceClaim's in [`crate::dra`]).
//!
//! Sources: `k8s.io/apimachinery/pkg/util/validation` (names, labels),
//! `k8s.io/apimachinery/pkg/api/validation` (object meta, `maskTrailingDash`),
//! `k8s.io/apimachinery/pkg/apis/meta/v1/validation` (conditions),
//! `k8s.io/kubernetes/pkg/apis/core/validation/events.go` (events).

use serde_json::Value;

use crate::status::{ApiError, FieldError};

const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;
/// Event limits (`events.go`).
pub const EVENT_NOTE_MAX: usize = 1024;
const EVENT_REPORTING_INSTANCE_MAX: usize = 128;
const EVENT_ACTION_MAX: usize = 128;
const EVENT_REASON_MAX: usize = 128;
/// `metav1.Condition` limits.
const CONDITION_REASON_MAX: usize = 1024;
const CONDITION_MESSAGE_MAX: usize = 32 * 1024;

use crate::names::alnum;
pub use crate::names::{dns1123_label, dns1123_subdomain, label_value, qualified_name};
pub use crate::times::{RFC3339, RFC3339_MICRO, check_time};

/// Which rule a timestamp field follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stamp {
    Time,
    Micro,
}

/// How the fake treats a resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pod,
    Node,
    Namespace,
    /// `events.k8s.io/v1`
    Event,
    /// `core/v1` (the legacy API)
    CoreEvent,
    Lease,
    PriorityClass,
    PodDisruptionBudget,
    /// kube-gang's `Gang` CRD.
    Gang,
    /// `core/v1` PodTemplate.
    PodTemplate,
    /// cluster-autoscaler's `autoscaling.x-k8s.io/v1` ProvisioningRequest CRD (schema checks in
    /// [`crate::provisioning`]).
    ProvisioningRequest,
    /// `core/v1` Secret ([`crate::config_objects`]).
    Secret,
    /// `admissionregistration.k8s.io/v1` MutatingWebhookConfiguration.
    MutatingWebhookConfiguration,
    /// `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration.
    ValidatingWebhookConfiguration,
    /// `core/v1` PersistentVolumeClaim ([`crate::volumes`]).
    PersistentVolumeClaim,
    /// `core/v1` PersistentVolume ([`crate::volumes`]).
    PersistentVolume,
    /// `storage.k8s.io/v1` StorageClass.
    StorageClass,
    /// `storage.k8s.io/v1` CSINode.
    CsiNode,
    /// `resource.k8s.io` ResourceClaim (`v1`, `v1beta2`, `v1beta1`; updates in [`crate::dra`]).
    ResourceClaim,
    /// `resource.k8s.io` ResourceSlice (cluster-scoped, no status).
    ResourceSlice,
    /// `resource.k8s.io` DeviceClass (cluster-scoped, no status).
    DeviceClass,
    /// Volcano's `scheduling.volcano.sh/v1beta1` PodGroup CRD: no status subresource (its status
    /// is written with the object), checked against the parts of its schema the scheduler writes
    /// ([`crate::schema::volcano_podgroup`]).
    VolcanoPodGroup,
    /// Grove's `scheduler.grove.io/v1alpha1` PodGang CRD (status subresource), checked against
    /// the parts of its schema the scheduler writes ([`crate::schema::grove_podgang`]) and
    /// `metav1.Condition`'s rules on its conditions.
    GrovePodGang,
    /// Any other custom resource: metadata checked, the rest taken as it comes.
    Custom,
}

impl Kind {
    /// The kind served at `(prefix, plural)`.
    pub fn of(prefix: &str, plural: &str) -> Kind {
        match (prefix, plural) {
            ("/api/v1", "pods") => Kind::Pod,
            ("/api/v1", "nodes") => Kind::Node,
            ("/api/v1", "namespaces") => Kind::Namespace,
            ("/api/v1", "events") => Kind::CoreEvent,
            ("/apis/events.k8s.io/v1", "events") => Kind::Event,
            ("/apis/coordination.k8s.io/v1", "leases") => Kind::Lease,
            ("/apis/scheduling.k8s.io/v1", "priorityclasses") => Kind::PriorityClass,
            ("/apis/policy/v1", "poddisruptionbudgets") => Kind::PodDisruptionBudget,
            ("/apis/kube-gang.io/v1alpha1", "gangs") => Kind::Gang,
            ("/api/v1", "podtemplates") => Kind::PodTemplate,
            ("/apis/autoscaling.x-k8s.io/v1", "provisioningrequests") => Kind::ProvisioningRequest,
            ("/api/v1", "secrets") => Kind::Secret,
            ("/apis/admissionregistration.k8s.io/v1", "mutatingwebhookconfigurations") => {
                Kind::MutatingWebhookConfiguration
            }
            ("/apis/admissionregistration.k8s.io/v1", "validatingwebhookconfigurations") => {
                Kind::ValidatingWebhookConfiguration
            }
            ("/api/v1", "persistentvolumeclaims") => Kind::PersistentVolumeClaim,
            ("/api/v1", "persistentvolumes") => Kind::PersistentVolume,
            ("/apis/storage.k8s.io/v1", "storageclasses") => Kind::StorageClass,
            ("/apis/storage.k8s.io/v1", "csinodes") => Kind::CsiNode,
            (
                "/apis/resource.k8s.io/v1"
                | "/apis/resource.k8s.io/v1beta2"
                | "/apis/resource.k8s.io/v1beta1",
                "resourceclaims",
            ) => Kind::ResourceClaim,
            (
                "/apis/resource.k8s.io/v1"
                | "/apis/resource.k8s.io/v1beta2"
                | "/apis/resource.k8s.io/v1beta1",
                "resourceslices",
            ) => Kind::ResourceSlice,
            (
                "/apis/resource.k8s.io/v1"
                | "/apis/resource.k8s.io/v1beta2"
                | "/apis/resource.k8s.io/v1beta1",
                "deviceclasses",
            ) => Kind::DeviceClass,
            ("/apis/scheduling.volcano.sh/v1beta1", "podgroups") => Kind::VolcanoPodGroup,
            ("/apis/scheduler.grove.io/v1alpha1", "podgangs") => Kind::GrovePodGang,
            _ => Kind::Custom,
        }
    }

    /// A built-in kind (strategic merge patch applies); custom resources take JSON and merge
    /// patches only.
    pub fn built_in(self) -> bool {
        !matches!(
            self,
            Kind::Gang
                | Kind::ProvisioningRequest
                | Kind::VolcanoPodGroup
                | Kind::GrovePodGang
                | Kind::Custom
        )
    }

    /// Whether the kind has a `/status` subresource that owns `.status`.
    pub fn has_status(self) -> bool {
        !matches!(
            self,
            Kind::Event
                | Kind::CoreEvent
                | Kind::Lease
                | Kind::PriorityClass
                | Kind::PodTemplate
                | Kind::Secret
                | Kind::MutatingWebhookConfiguration
                | Kind::ValidatingWebhookConfiguration
                | Kind::StorageClass
                | Kind::CsiNode
                | Kind::ResourceSlice
                | Kind::DeviceClass
                | Kind::VolcanoPodGroup
        )
    }

    /// Whether a `/status` write keeps all of the stored metadata (`ResetObjectMetaForStatus`:
    /// labels, annotations, finalizers, owner references). Otherwise it may change labels and
    /// annotations, as the pod and node status strategies allow.
    pub fn status_keeps_metadata(self) -> bool {
        matches!(self, Kind::ResourceClaim)
    }

    /// `Kind.group` as `NewInvalid` qualifies it.
    fn qualified(self, fallback: &str) -> String {
        match self {
            Kind::Pod => "Pod".into(),
            Kind::Node => "Node".into(),
            Kind::Namespace => "Namespace".into(),
            Kind::Event => "Event.events.k8s.io".into(),
            Kind::CoreEvent => "Event".into(),
            Kind::Lease => "Lease.coordination.k8s.io".into(),
            Kind::PriorityClass => "PriorityClass.scheduling.k8s.io".into(),
            Kind::PodDisruptionBudget => "PodDisruptionBudget.policy".into(),
            Kind::Gang => "Gang.kube-gang.io".into(),
            Kind::PodTemplate => "PodTemplate".into(),
            Kind::ProvisioningRequest => "ProvisioningRequest.autoscaling.x-k8s.io".into(),
            Kind::Secret => "Secret".into(),
            Kind::MutatingWebhookConfiguration => {
                "MutatingWebhookConfiguration.admissionregistration.k8s.io".into()
            }
            Kind::ValidatingWebhookConfiguration => {
                "ValidatingWebhookConfiguration.admissionregistration.k8s.io".into()
            }
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim".into(),
            Kind::PersistentVolume => "PersistentVolume".into(),
            Kind::StorageClass => "StorageClass.storage.k8s.io".into(),
            Kind::CsiNode => "CSINode.storage.k8s.io".into(),
            Kind::ResourceClaim => "ResourceClaim.resource.k8s.io".into(),
            Kind::ResourceSlice => "ResourceSlice.resource.k8s.io".into(),
            Kind::DeviceClass => "DeviceClass.resource.k8s.io".into(),
            Kind::VolcanoPodGroup => "PodGroup.scheduling.volcano.sh".into(),
            Kind::GrovePodGang => "PodGang.scheduler.grove.io".into(),
            Kind::Custom => fallback.into(),
        }
    }

    /// The kind's name for decoding errors (`Pod in version "v1" cannot be handled as a Pod`).
    fn type_name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::Node => "Node",
            Kind::Namespace => "Namespace",
            Kind::Event | Kind::CoreEvent => "Event",
            Kind::Lease => "Lease",
            Kind::PriorityClass => "PriorityClass",
            Kind::PodDisruptionBudget => "PodDisruptionBudget",
            Kind::Gang => "Gang",
            Kind::PodTemplate => "PodTemplate",
            Kind::ProvisioningRequest => "ProvisioningRequest",
            Kind::Secret => "Secret",
            Kind::MutatingWebhookConfiguration => "MutatingWebhookConfiguration",
            Kind::ValidatingWebhookConfiguration => "ValidatingWebhookConfiguration",
            Kind::PersistentVolumeClaim => "PersistentVolumeClaim",
            Kind::PersistentVolume => "PersistentVolume",
            Kind::StorageClass => "StorageClass",
            Kind::CsiNode => "CSINode",
            Kind::ResourceClaim => "ResourceClaim",
            Kind::ResourceSlice => "ResourceSlice",
            Kind::DeviceClass => "DeviceClass",
            Kind::VolcanoPodGroup => "PodGroup",
            Kind::GrovePodGang => "PodGang",
            Kind::Custom => "object",
        }
    }

    /// Timestamp fields and their rule, as paths with `[]` for every element of a list.
    fn stamps(self) -> &'static [(&'static str, Stamp)] {
        match self {
            Kind::Event => &[
                ("eventTime", Stamp::Micro),
                ("series.lastObservedTime", Stamp::Micro),
                ("deprecatedFirstTimestamp", Stamp::Time),
                ("deprecatedLastTimestamp", Stamp::Time),
            ],
            Kind::CoreEvent => &[
                ("eventTime", Stamp::Micro),
                ("series.lastObservedTime", Stamp::Micro),
                ("firstTimestamp", Stamp::Time),
                ("lastTimestamp", Stamp::Time),
            ],
            Kind::Lease => &[("spec.acquireTime", Stamp::Micro), ("spec.renewTime", Stamp::Micro)],
            Kind::Pod => &[
                ("status.conditions[].lastTransitionTime", Stamp::Time),
                ("status.conditions[].lastProbeTime", Stamp::Time),
                ("status.startTime", Stamp::Time),
            ],
            Kind::Node | Kind::PodDisruptionBudget => &[
                ("status.conditions[].lastTransitionTime", Stamp::Time),
                ("status.conditions[].lastHeartbeatTime", Stamp::Time),
            ],
            // A custom resource's times are its schema's `format: date-time` ([`crate::schema`]).
            Kind::Gang => &[],
            Kind::ProvisioningRequest => &[("status.conditions[].lastTransitionTime", Stamp::Time)],
            Kind::ResourceClaim => &[
                ("status.allocation.allocationTimestamp", Stamp::Time),
                ("status.devices[].conditions[].lastTransitionTime", Stamp::Time),
            ],
            // `v1beta1` nests a device's fields under `basic`.
            Kind::ResourceSlice => &[
                ("spec.devices[].taints[].timeAdded", Stamp::Time),
                ("spec.devices[].basic.taints[].timeAdded", Stamp::Time),
            ],
            Kind::Namespace
            | Kind::PriorityClass
            | Kind::PodTemplate
            | Kind::Secret
            | Kind::MutatingWebhookConfiguration
            | Kind::ValidatingWebhookConfiguration
            | Kind::PersistentVolumeClaim
            | Kind::PersistentVolume
            | Kind::StorageClass
            | Kind::CsiNode
            | Kind::DeviceClass
            | Kind::VolcanoPodGroup
            | Kind::GrovePodGang
            | Kind::Custom => &[],
        }
    }
}

/// Every value at `path` (`a.b[].c`), with its concrete path (`a.b[2].c`).
fn at<'a>(v: &'a Value, path: &str) -> Vec<(String, &'a Value)> {
    let mut found = vec![(String::new(), v)];
    for seg in path.split('.') {
        let (name, each) = match seg.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (seg, false),
        };
        let mut next = Vec::new();
        for (p, v) in found {
            let Some(child) = v.get(name) else { continue };
            let p = if p.is_empty() { name.to_string() } else { format!("{p}.{name}") };
            if each {
                for (i, c) in child.as_array().into_iter().flatten().enumerate() {
                    next.push((format!("{p}[{i}]"), c));
                }
            } else {
                next.push((p, child));
            }
        }
        found = next;
    }
    found
}

/// What the API server stores for a built-in kind: `metav1.Time` re-encoded to whole seconds in
/// UTC, `metav1.MicroTime` to six digits in UTC (Go types decode and encode them; custom resources
/// are stored as sent). Call after [`decode`] has accepted `obj`.
pub fn normalize(kind: Kind, obj: &mut Value) {
    if !kind.built_in() {
        return;
    }
    if kind == Kind::Secret {
        crate::config_objects::normalize_secret(obj);
    }
    let mut stamps: Vec<(&str, Stamp)> =
        vec![("metadata.creationTimestamp", Stamp::Time), ("metadata.deletionTimestamp", Stamp::Time)];
    stamps.extend_from_slice(kind.stamps());
    for (path, stamp) in stamps {
        let found: Vec<String> = at(obj, path).into_iter().map(|(p, _)| p).collect();
        for concrete in found {
            let pointer = format!("/{}", concrete.replace(['.', '['], "/").replace(']', ""));
            let Some(slot) = obj.pointer_mut(&pointer) else { continue };
            let Some(t) = slot.as_str().and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok()) else {
                continue;
            };
            *slot = Value::String(match stamp {
                Stamp::Time => crate::times::format_time(t),
                Stamp::Micro => crate::times::format_micro(t),
            });
        }
    }
}

/// Stage 1: timestamps and the typed decode. The error is the 400 the API server sends.
pub fn decode(kind: Kind, version: &str, obj: &Value) -> Result<(), ApiError> {
    let name = kind.type_name();
    let fail = |why: String| {
        ApiError::bad_request(format!("{name} in version {version:?} cannot be handled as a {name}: {why}"))
    };
    let mut stamps: Vec<(&str, Stamp)> =
        vec![("metadata.creationTimestamp", Stamp::Time), ("metadata.deletionTimestamp", Stamp::Time)];
    stamps.extend_from_slice(kind.stamps());
    for (path, stamp) in stamps {
        for (_, v) in at(obj, path) {
            match v {
                Value::Null => {}
                Value::String(s) => check_time(s, stamp == Stamp::Micro).map_err(fail)?,
                other => return Err(fail(format!("{path}: expected a timestamp string, got {other}"))),
            }
        }
    }
    fn typed<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<(), String> {
        T::deserialize(obj).map(drop).map_err(|e| e.to_string())
    }
    use k8s_openapi::api;
    let decoded = match kind {
        Kind::Pod => typed::<api::core::v1::Pod>(obj),
        Kind::Node => typed::<api::core::v1::Node>(obj),
        Kind::Namespace => typed::<api::core::v1::Namespace>(obj),
        Kind::Event => typed::<api::events::v1::Event>(obj),
        Kind::CoreEvent => typed::<api::core::v1::Event>(obj),
        Kind::Lease => typed::<api::coordination::v1::Lease>(obj),
        Kind::PriorityClass => typed::<api::scheduling::v1::PriorityClass>(obj),
        Kind::PodDisruptionBudget => typed::<api::policy::v1::PodDisruptionBudget>(obj),
        // A custom resource decodes as any JSON object; its schema is checked with the rest
        // (422, [`crate::schema`]).
        Kind::Gang => {
            if obj.is_object() {
                Ok(())
            } else {
                Err("expected an object".into())
            }
        }
        Kind::PodTemplate => typed::<api::core::v1::PodTemplate>(obj),
        Kind::ProvisioningRequest => crate::provisioning::decode(obj),
        Kind::Secret => {
            crate::config_objects::decode_secret(obj).and_then(|()| typed::<api::core::v1::Secret>(obj))
        }
        Kind::MutatingWebhookConfiguration => crate::config_objects::decode_webhook_configuration(obj)
            .and_then(|()| typed::<api::admissionregistration::v1::MutatingWebhookConfiguration>(obj)),
        Kind::ValidatingWebhookConfiguration => crate::config_objects::decode_webhook_configuration(obj)
            .and_then(|()| typed::<api::admissionregistration::v1::ValidatingWebhookConfiguration>(obj)),
        Kind::PersistentVolumeClaim => typed::<api::core::v1::PersistentVolumeClaim>(obj),
        Kind::PersistentVolume => typed::<api::core::v1::PersistentVolume>(obj),
        Kind::StorageClass => typed::<api::storage::v1::StorageClass>(obj),
        Kind::CsiNode => typed::<api::storage::v1::CSINode>(obj),
        Kind::ResourceClaim => match version {
            "v1" => typed::<api::resource::v1::ResourceClaim>(obj),
            "v1beta2" => typed::<api::resource::v1beta2::ResourceClaim>(obj),
            _ => typed::<api::resource::v1beta1::ResourceClaim>(obj),
        },
        Kind::ResourceSlice => match version {
            "v1" => typed::<api::resource::v1::ResourceSlice>(obj),
            "v1beta2" => typed::<api::resource::v1beta2::ResourceSlice>(obj),
            _ => typed::<api::resource::v1beta1::ResourceSlice>(obj),
        },
        Kind::DeviceClass => match version {
            "v1" => typed::<api::resource::v1::DeviceClass>(obj),
            "v1beta2" => typed::<api::resource::v1beta2::DeviceClass>(obj),
            _ => typed::<api::resource::v1beta1::DeviceClass>(obj),
        },
        Kind::VolcanoPodGroup | Kind::GrovePodGang | Kind::Custom => {
            if obj.is_object() {
                Ok(())
            } else {
                Err("expected an object".into())
            }
        }
    };
    decoded.map_err(fail)
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Stage 2: `ValidateObjectMeta` for the fields we write.
fn object_meta(kind: Kind, obj: &Value, errs: &mut Vec<FieldError>) {
    let name = str_at(obj, "/metadata/name");
    let generate = str_at(obj, "/metadata/generateName");
    let rule = |s: &str, prefix: bool| -> Vec<String> {
        if kind == Kind::Namespace {
            dns1123_label(s)
        } else {
            // `maskTrailingDash`: a generateName may end with '-' (a suffix follows), not '.'.
            let masked = match s.strip_suffix('-') {
                Some(head) if prefix && s.len() > 1 => format!("{}a", &head[..head.len().saturating_sub(1)]),
                _ => s.to_string(),
            };
            dns1123_subdomain(&masked)
        }
    };
    if name.is_empty() && generate.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    }
    if !name.is_empty() {
        errs.extend(rule(name, false).into_iter().map(|m| FieldError::invalid("metadata.name", name, m)));
    }
    if !generate.is_empty() {
        errs.extend(
            rule(generate, true)
                .into_iter()
                .map(|m| FieldError::invalid("metadata.generateName", generate, m)),
        );
    }
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            errs.extend(qualified_name(k).into_iter().map(|m| FieldError::invalid("metadata.labels", k, m)));
            match v.as_str() {
                Some(v) => errs.extend(
                    label_value(v)
                        .into_iter()
                        .map(|m| FieldError::invalid(format!("metadata.labels.{k}"), v, m)),
                ),
                None => errs.push(FieldError::invalid(
                    format!("metadata.labels.{k}"),
                    &v.to_string(),
                    "must be a string",
                )),
            }
        }
    }
    if let Some(annotations) = obj.pointer("/metadata/annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            errs.extend(
                qualified_name(&k.to_lowercase())
                    .into_iter()
                    .map(|m| FieldError::invalid("metadata.annotations", k, m)),
            );
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > TOTAL_ANNOTATION_SIZE {
            errs.push(FieldError::too_long("metadata.annotations", TOTAL_ANNOTATION_SIZE));
        }
    }
}

/// `ValidateConditions` for a list of `metav1.Condition`.
fn conditions(list: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in list.as_array().into_iter().flatten().enumerate() {
        let p = format!("{path}[{i}]");
        let ty = str_at(c, "/type");
        errs.extend(qualified_name(ty).into_iter().map(|m| FieldError::invalid(format!("{p}.type"), ty, m)));
        if !seen.insert(ty.to_string()) {
            errs.push(FieldError::duplicate(format!("{p}.type"), ty));
        }
        let status = str_at(c, "/status");
        if !matches!(status, "True" | "False" | "Unknown") {
            errs.push(FieldError::not_supported(
                format!("{p}.status"),
                status,
                &["False", "True", "Unknown"],
            ));
        }
        if c.get("observedGeneration").and_then(Value::as_i64).is_some_and(|g| g < 0) {
            let g = c["observedGeneration"].to_string();
            errs.push(FieldError::invalid(
                format!("{p}.observedGeneration"),
                &g,
                "must be greater than or equal to zero",
            ));
        }
        if str_at(c, "/lastTransitionTime").is_empty() {
            errs.push(FieldError::required(format!("{p}.lastTransitionTime"), "must be set"));
        }
        let reason = str_at(c, "/reason");
        if reason.is_empty() {
            errs.push(FieldError::required(format!("{p}.reason"), "must be set"));
        } else {
            let b = reason.as_bytes();
            let ok = b[0].is_ascii_alphabetic()
                && b.iter().all(|&c| alnum(c) || matches!(c, b'_' | b',' | b':'))
                && (alnum(b[b.len() - 1]) || b[b.len() - 1] == b'_');
            if !ok {
                errs.push(FieldError::invalid(format!("{p}.reason"), reason, "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"));
            }
            if reason.len() > CONDITION_REASON_MAX {
                errs.push(FieldError::too_long(format!("{p}.reason"), CONDITION_REASON_MAX));
            }
        }
        if str_at(c, "/message").len() > CONDITION_MESSAGE_MAX {
            errs.push(FieldError::too_long(format!("{p}.message"), CONDITION_MESSAGE_MAX));
        }
    }
}

/// `events.go`: the legacy rules every Event meets, and for `events.k8s.io/v1` the strict ones.
/// The body is in the served version; `strict` maps its fields onto the internal names.
fn event(kind: Kind, obj: &Value, namespace: &str, errs: &mut Vec<FieldError>) {
    let strict = kind == Kind::Event;
    let (regarding_ns, note) = if strict {
        (str_at(obj, "/regarding/namespace"), str_at(obj, "/note"))
    } else {
        (str_at(obj, "/involvedObject/namespace"), str_at(obj, "/message"))
    };
    let event_time = str_at(obj, "/eventTime");
    if event_time.is_empty() {
        if regarding_ns.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errs.push(FieldError::invalid(
                    "involvedObject.namespace",
                    regarding_ns,
                    "does not match event.namespace",
                ));
            }
        } else if namespace != regarding_ns {
            errs.push(FieldError::invalid(
                "involvedObject.namespace",
                regarding_ns,
                "does not match event.namespace",
            ));
        }
    } else {
        if regarding_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(FieldError::invalid(
                "involvedObject.namespace",
                regarding_ns,
                "does not match event.namespace",
            ));
        }
        let controller = str_at(obj, "/reportingController");
        if controller.is_empty() {
            errs.push(FieldError::required("reportingController", ""));
        }
        errs.extend(
            qualified_name(controller)
                .into_iter()
                .map(|m| FieldError::invalid("reportingController", controller, m)),
        );
        let limits = [
            ("reportingInstance", str_at(obj, "/reportingInstance"), EVENT_REPORTING_INSTANCE_MAX),
            ("action", str_at(obj, "/action"), EVENT_ACTION_MAX),
            ("reason", str_at(obj, "/reason"), EVENT_REASON_MAX),
        ];
        for (field, value, max) in limits {
            if value.is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            if value.len() > max {
                errs.push(FieldError::invalid(field, "", format!("can have at most {max} characters")));
            }
        }
        if note.len() > EVENT_NOTE_MAX {
            errs.push(FieldError::invalid(
                "message",
                "",
                format!("can have at most {EVENT_NOTE_MAX} characters"),
            ));
        }
    }
    errs.extend(
        dns1123_subdomain(namespace).into_iter().map(|m| FieldError::invalid("namespace", namespace, m)),
    );
    if !strict {
        return;
    }
    if let Some(series) = obj.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errs.push(FieldError::invalid("series.count", "", "should be at least 2"));
        }
        if str_at(series, "/lastObservedTime").is_empty() {
            errs.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    if event_time.is_empty() {
        errs.push(FieldError::required("eventTime", ""));
    }
    let ty = str_at(obj, "/type");
    if ty != "Normal" && ty != "Warning" {
        errs.push(FieldError::invalid("type", "", format!("has invalid value: {ty}")));
    }
    for (wire, internal) in
        [("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp", "lastTimestamp")]
    {
        if !str_at(obj, &format!("/{wire}")).is_empty() {
            errs.push(FieldError::invalid(internal, "", "needs to be unset"));
        }
    }
    if obj.get("deprecatedCount").and_then(Value::as_i64).unwrap_or(0) != 0 {
        errs.push(FieldError::invalid("count", "", "needs to be unset"));
    }
    if !str_at(obj, "/deprecatedSource/component").is_empty()
        || !str_at(obj, "/deprecatedSource/host").is_empty()
    {
        errs.push(FieldError::invalid("source", "", "needs to be unset"));
    }
}

/// `ValidateEventUpdate` for `events.k8s.io/v1` (the core/v1 API checks no more than on create):
/// what an event says — `regarding`, `related`, reason, note, times, reporter — is immutable;
/// only its series and metadata change. Reported under the internal names, as the API server
/// reports them. (`related` has no rule of its own on create: `events.go` and the declarative
/// `zz_generated.validations.go` of events/v1 leave it to decoding.)
fn event_update(current: &Value, new: &Value, errs: &mut Vec<FieldError>) {
    for (wire, internal) in [
        ("regarding", "involvedObject"),
        ("reason", "reason"),
        ("note", "message"),
        ("deprecatedSource", "source"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("type", "type"),
        ("eventTime", "eventTime"),
        ("action", "action"),
        ("related", "related"),
        ("reportingController", "reportingController"),
        ("reportingInstance", "reportingInstance"),
    ] {
        let (was, now) = (current.get(wire).filter(|v| !v.is_null()), new.get(wire).filter(|v| !v.is_null()));
        if was != now {
            let value = now.map_or_else(|| "null".to_string(), Value::to_string);
            errs.push(FieldError::invalid(internal, &value, "field is immutable"));
        }
    }
}

/// The update rules of a kind (`self == oldSelf` in a CRD's schema): `current` is what is stored,
/// `new` what would replace it through the main resource or, `sub` `Some("status")`, its status.
pub fn update(
    kind: Kind,
    fallback_kind: &str,
    sub: Option<&str>,
    current: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    match kind {
        Kind::ResourceClaim if sub == Some("status") => {
            crate::dra::claim_status_update(current, new, &mut errs)
        }
        Kind::ResourceClaim => crate::dra::claim_update(current, new, &mut errs),
        Kind::ProvisioningRequest => crate::provisioning::immutable(current, new, &mut errs),
        Kind::Pod => errs.extend(crate::pod_update::errors(current, new)),
        Kind::Event => event_update(current, new, &mut errs),
        Kind::Secret => {
            let mut merged = new.clone();
            crate::config_objects::normalize_secret(&mut merged);
            crate::config_objects::secret_update(current, &merged, &mut errs);
        }
        Kind::PersistentVolumeClaim => crate::volumes::claim_update(current, new, &mut errs),
        Kind::PersistentVolume => crate::volumes::volume_update(current, new, &mut errs),
        Kind::StorageClass => crate::volumes::class_update(current, new, &mut errs),
        _ => {}
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&kind.qualified(fallback_kind), str_at(new, "/metadata/name"), &errs))
    }
}

/// Stages 2 and 3 on an object about to be stored in `namespace` (empty: cluster-scoped). The
/// error is the 422 the API server sends.
pub fn validate(kind: Kind, fallback_kind: &str, obj: &Value, namespace: &str) -> Result<(), ApiError> {
    let mut errs = Vec::new();
    object_meta(kind, obj, &mut errs);
    match kind {
        Kind::Event | Kind::CoreEvent => event(kind, obj, namespace, &mut errs),
        Kind::VolcanoPodGroup => crate::schema::check(crate::schema::volcano_podgroup(), obj, "", &mut errs),
        Kind::GrovePodGang => {
            crate::schema::check(crate::schema::grove_podgang(), obj, "", &mut errs);
            if let Some(list) = obj.pointer("/status/conditions").filter(|l| l.is_array()) {
                conditions(list, "status.conditions", &mut errs);
            }
            let mut seen = std::collections::BTreeSet::new();
            errs.retain(|e| seen.insert((e.field.clone(), e.kind)));
        }
        Kind::Gang => {
            crate::schema::check(crate::schema::gang(), obj, "", &mut errs);
            // Stricter than the CRD's schema, which carries no patterns for conditions: our
            // writes meet `metav1.Condition`'s own rules too.
            if let Some(list) = obj.pointer("/status/conditions").filter(|l| l.is_array()) {
                conditions(list, "status.conditions", &mut errs);
            }
            // A field both refuse (a condition's status) is reported once, as the schema words it.
            let mut seen = std::collections::BTreeSet::new();
            errs.retain(|e| seen.insert((e.field.clone(), e.kind)));
        }
        Kind::ProvisioningRequest => {
            crate::provisioning::validate(obj, &mut errs);
            if let Some(list) = obj.pointer("/status/conditions") {
                conditions(list, "status.conditions", &mut errs);
            }
        }
        Kind::Pod => {
            // `validatePodConditions`: types other than the system ones are qualified names.
            for (i, c) in
                obj.pointer("/status/conditions").and_then(Value::as_array).into_iter().flatten().enumerate()
            {
                let ty = str_at(c, "/type");
                if !matches!(ty, "PodScheduled" | "Ready" | "Initialized" | "ContainersReady") {
                    errs.extend(
                        qualified_name(ty)
                            .into_iter()
                            .map(|m| FieldError::invalid(format!("status.conditions[{i}].type"), ty, m)),
                    );
                }
            }
        }
        Kind::Secret => {
            // Checked as stored: `stringData` merged into `data` first, as the API server does.
            let mut merged = obj.clone();
            crate::config_objects::normalize_secret(&mut merged);
            crate::config_objects::validate_secret(&merged, &mut errs);
        }
        Kind::MutatingWebhookConfiguration => {
            crate::config_objects::validate_webhook_configuration(obj, true, &mut errs)
        }
        Kind::ValidatingWebhookConfiguration => {
            crate::config_objects::validate_webhook_configuration(obj, false, &mut errs)
        }
        Kind::PersistentVolumeClaim => crate::volumes::claim(obj, &mut errs),
        Kind::PersistentVolume => crate::volumes::volume(obj, &mut errs),
        Kind::Lease => {
            for f in ["leaseDurationSeconds", "leaseTransitions"] {
                if let Some(n) = obj.pointer(&format!("/spec/{f}")).and_then(Value::as_i64) {
                    let min = if f == "leaseDurationSeconds" { 1 } else { 0 };
                    if n < min {
                        let why = if min == 1 {
                            "must be greater than 0"
                        } else {
                            "must be greater than or equal to 0"
                        };
                        errs.push(FieldError::invalid(format!("spec.{f}"), &n.to_string(), why));
                    }
                }
            }
        }
        _ => {}
    }
    if errs.is_empty() {
        Ok(())
    } else {
        let name = str_at(obj, "/metadata/name");
        let name = if name.is_empty() { str_at(obj, "/metadata/generateName") } else { name };
        Err(ApiError::invalid(&kind.qualified(fallback_kind), name, &errs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn micro_time_takes_exactly_six_fractional_digits() {
        assert!(check_time("2026-11-23T15:06:39.123456Z", true).is_ok());
        assert!(check_time("2026-11-23T15:06:39.123456+02:00", true).is_ok());
        for bad in [
            "2026-11-23T15:06:39.123Z",
            "2026-11-23T15:06:39Z",
            "2026-11-23T15:06:39.1234567Z",
            "2026-11-23 15:06:39.123456Z",
        ] {
            let e = check_time(bad, true).unwrap_err();
            assert!(e.contains(RFC3339_MICRO), "{bad}: {e}");
        }
        assert_eq!(
            check_time("2026-11-23T15:06:39.123Z", true).unwrap_err(),
            "parsing time \"2026-11-23T15:06:39.123Z\" as \"2006-01-02T15:04:05.000000Z07:00\": cannot parse \".123Z\" as \".000000\""
        );
    }

    #[test]
    fn time_takes_any_fraction_or_none_but_needs_a_zone() {
        for good in [
            "2026-11-23T15:06:39Z",
            "2026-11-23T15:06:39.1Z",
            "2026-11-23T15:06:39.123456789Z",
            "2024-02-29T00:00:00-07:00",
        ] {
            assert!(check_time(good, false).is_ok(), "{good}");
        }
        for bad in [
            "2026-11-23T15:06:39",
            "2026-11-23T15:06:39.Z",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-11-23T24:00:00Z",
            "1700000000",
        ] {
            assert!(check_time(bad, false).is_err(), "{bad}");
        }
    }

    #[test]
    fn built_in_kinds_store_times_as_the_api_server_encodes_them() {
        let mut pod = json!({"status": {"conditions": [{"type": "PodScheduled", "lastTransitionTime": "2026-11-23T16:06:39.987+01:00"}]}});
        normalize(Kind::Pod, &mut pod);
        assert_eq!(pod["status"]["conditions"][0]["lastTransitionTime"], "2026-11-23T15:06:39Z");
        let mut lease = json!({"spec": {"renewTime": "2026-11-23T15:06:39.123456Z"}});
        normalize(Kind::Lease, &mut lease);
        assert_eq!(lease["spec"]["renewTime"], "2026-11-23T15:06:39.123456Z");
        let mut gang = json!({"status": {"waitingSince": "2026-11-23T15:06:39.5Z"}});
        normalize(Kind::Gang, &mut gang);
        assert_eq!(
            gang["status"]["waitingSince"], "2026-11-23T15:06:39.5Z",
            "custom resources are stored as sent"
        );
    }

    #[test]
    fn names_follow_dns_1123_per_kind() {
        assert!(dns1123_subdomain("train-0.187a3b").is_empty());
        assert!(!dns1123_subdomain("train-0.").is_empty());
        assert!(!dns1123_subdomain("Train").is_empty());
        assert_eq!(dns1123_subdomain(&"a".repeat(254))[0], "must be no more than 253 characters");
        assert!(dns1123_label("ml").is_empty());
        assert!(!dns1123_label("ml.team").is_empty(), "a namespace is a label: no dots");
        assert!(!dns1123_label(&"a".repeat(64)).is_empty());
    }

    #[test]
    fn generate_name_may_end_with_a_dash_but_not_a_dot() {
        let ok = json!({"metadata": {"generateName": "train-0-"}});
        assert!(validate(Kind::Pod, "", &ok, "ml").is_ok());
        let dot = json!({"metadata": {"generateName": "train-0."}});
        let e = validate(Kind::Pod, "", &dot, "ml").unwrap_err().to_status();
        assert_eq!(e["details"]["causes"][0]["field"], "metadata.generateName");
        let ns = json!({"metadata": {"name": "a.b"}});
        assert!(validate(Kind::Namespace, "", &ns, "").is_err());
    }

    #[test]
    fn label_keys_and_values_and_annotation_size() {
        assert!(qualified_name("kube-gang.io/gang").is_empty());
        assert!(qualified_name("app").is_empty());
        assert!(!qualified_name("/app").is_empty());
        assert!(!qualified_name("a/b/c").is_empty());
        assert!(!qualified_name("Kube_Gang.io/gang").is_empty(), "prefix must be a lowercase subdomain");
        assert!(!qualified_name(&"x".repeat(64)).is_empty());
        assert!(label_value("").is_empty());
        assert!(label_value("My_value-1.2").is_empty());
        assert!(!label_value("-x").is_empty());
        assert!(!label_value(&"x".repeat(64)).is_empty());
        let obj = json!({"metadata": {"name": "p", "labels": {"ok": "v", "bad key": "v", "k": "bad value"},
                                       "annotations": {"big": "x".repeat(TOTAL_ANNOTATION_SIZE)}}});
        let s = validate(Kind::Pod, "", &obj, "ml").unwrap_err().to_status();
        let fields: Vec<&str> =
            s["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
        assert_eq!(fields, ["metadata.labels", "metadata.labels.k", "metadata.annotations"]);
    }

    fn good_event() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
               "metadata": {"name": "w-0.187a3b", "namespace": "ml"},
               "eventTime": "2026-11-23T15:06:39.123456Z", "type": "Warning", "reason": "FailedScheduling",
               "action": "Scheduling", "note": "gang ml/g: room for 1 of 2",
               "reportingController": "kube-gang.io/gang-scheduler", "reportingInstance": "gang-scheduler-7d9",
               "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "ml", "name": "w-0", "uid": "u"}})
    }

    #[test]
    fn a_well_formed_event_passes_every_stage() {
        let e = good_event();
        decode(Kind::Event, "v1", &e).unwrap();
        validate(Kind::Event, "", &e, "ml").unwrap();
    }

    #[test]
    fn event_required_fields_and_limits_name_their_paths() {
        let mut e = good_event();
        for f in ["reportingController", "reportingInstance", "action", "reason", "type"] {
            e.as_object_mut().unwrap().remove(f);
        }
        e["note"] = json!("é".repeat(513)); // 1026 bytes, 513 characters: the limit counts bytes
        e["regarding"]["namespace"] = json!("");
        let s = validate(Kind::Event, "", &e, "ml").unwrap_err().to_status();
        let causes: Vec<(String, String)> = s["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["field"].as_str().unwrap().to_string(), c["reason"].as_str().unwrap().to_string()))
            .collect();
        let want = [
            ("involvedObject.namespace", "FieldValueInvalid"),
            ("reportingController", "FieldValueRequired"),
            ("reportingController", "FieldValueInvalid"),
            ("reportingInstance", "FieldValueRequired"),
            ("action", "FieldValueRequired"),
            ("reason", "FieldValueRequired"),
            ("message", "FieldValueInvalid"),
            ("type", "FieldValueInvalid"),
        ];
        let want: Vec<(String, String)> = want.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        assert_eq!(causes, want);
        let mut long = good_event();
        long["reason"] = json!("R".repeat(129));
        long["action"] = json!("A".repeat(129));
        long["reportingInstance"] = json!("i".repeat(129));
        let s = validate(Kind::Event, "", &long, "ml").unwrap_err().to_status();
        assert_eq!(s["details"]["causes"].as_array().unwrap().len(), 3, "{s}");
        let mut at_limit = good_event();
        at_limit["note"] = json!("n".repeat(EVENT_NOTE_MAX));
        assert!(validate(Kind::Event, "", &at_limit, "ml").is_ok());
    }

    #[test]
    fn an_event_time_in_the_wrong_format_is_a_bad_request() {
        let mut e = good_event();
        e["eventTime"] = json!("2026-11-23T15:06:39.123Z");
        let s = decode(Kind::Event, "v1", &e).unwrap_err();
        assert_eq!((s.code, s.reason), (400, "BadRequest"));
        assert!(
            s.message.starts_with("Event in version \"v1\" cannot be handled as a Event: parsing time"),
            "{}",
            s.message
        );
        let mut lease = json!({"metadata": {"name": "l"}, "spec": {"renewTime": "2026-11-23T15:06:39Z"}});
        assert!(decode(Kind::Lease, "v1", &lease).is_err());
        lease["spec"]["renewTime"] = json!("2026-11-23T15:06:39.000000Z");
        assert!(decode(Kind::Lease, "v1", &lease).is_ok());
    }

    #[test]
    fn a_body_of_the_wrong_shape_is_a_bad_request() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": "none"}});
        assert_eq!(decode(Kind::Pod, "v1", &pod).unwrap_err().code, 400);
        // A custom resource decodes as JSON; its schema refuses a wrong type with a 422.
        let gang = json!({"metadata": {"name": "g"}, "spec": {"minMember": "two"}});
        assert!(decode(Kind::Gang, "v1alpha1", &gang).is_ok());
        let s = validate(Kind::Gang, "", &gang, "ml").unwrap_err();
        assert_eq!(s.code, 422);
        assert_eq!(s.to_status()["details"]["causes"][0]["reason"], "FieldValueTypeInvalid");
        assert_eq!(decode(Kind::Gang, "v1alpha1", &json!([1])).unwrap_err().code, 400);
    }

    #[test]
    fn metav1_conditions_are_checked_field_by_field() {
        let good = json!({"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": "m",
                          "lastTransitionTime": "2026-11-23T15:06:39Z"});
        let obj = json!({"metadata": {"name": "g"}, "spec": {"minMember": 1}, "status": {"conditions": [good.clone()]}});
        assert!(validate(Kind::Gang, "", &obj, "ml").is_ok());
        let bad = json!({"type": "Scheduled", "status": "Maybe", "reason": "gang waits", "observedGeneration": -1,
                         "message": "m".repeat(CONDITION_MESSAGE_MAX + 1)});
        let obj = json!({"metadata": {"name": "g"}, "spec": {"minMember": 1}, "status": {"conditions": [good, bad]}});
        let s = validate(Kind::Gang, "", &obj, "ml").unwrap_err().to_status();
        let mut fields: Vec<&str> =
            s["details"]["causes"].as_array().unwrap().iter().map(|c| c["field"].as_str().unwrap()).collect();
        fields.sort_unstable();
        // Each field once, whether the schema or metav1.Condition's rules refuse it (the type
        // twice: the schema's list-map key, and the condition's own rule).
        assert_eq!(
            fields,
            [
                "status.conditions[1]",
                "status.conditions[1].lastTransitionTime",
                "status.conditions[1].message",
                "status.conditions[1].observedGeneration",
                "status.conditions[1].reason",
                "status.conditions[1].status",
                "status.conditions[1].type",
            ]
        );
        let status = s["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["field"] == "status.conditions[1].status");
        assert_eq!(
            status.unwrap()["message"],
            "Unsupported value: \"Maybe\": supported values: \"True\", \"False\", \"Unknown\""
        );
        let empty_reason = json!({"metadata": {"name": "g"}, "spec": {"minMember": 1}, "status": {"conditions": [{"type": "A", "status": "True", "message": "", "lastTransitionTime": "2026-11-23T15:06:39Z"}]}});
        let s = validate(Kind::Gang, "", &empty_reason, "ml").unwrap_err().to_status();
        assert_eq!(s["details"]["causes"][0]["field"], "status.conditions[0].reason");
    }
}
