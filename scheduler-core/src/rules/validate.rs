//! Validation: every rule a gang spec must satisfy, returned as field-path errors. The webhook, the
//! CLI (`kubectl gang validate`) and the scheduler call these same functions.

use serde_json::Value;

use std::collections::{BTreeMap, BTreeSet};

use crate::error::FieldError;
use crate::model::Gang;

/// How deep a subgroup tree may nest below the root.
pub const MAX_SUBGROUP_DEPTH: usize = 4;
/// How many subgroups one gang may have.
pub const MAX_SUBGROUPS: usize = 64;

/// The result of validating one object: errors deny it, warnings are shown to the user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

impl Verdict {
    /// No errors (warnings allowed).
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Validates any object: a `Gang`, any dialect's PodGroup, a Pod with gang labels or annotations, or
/// a workload that opted in or carries gang labels. `old` is the previous version on UPDATE.
/// Unrelated kinds get an empty verdict. Every problem is reported, each with its field path.
pub fn validate(new: &Value, old: Option<&Value>) -> Verdict {
    let mut v = Verdict::default();
    if !new.is_object() {
        v.errors.push(FieldError::new("", "not a Kubernetes object"));
        return v;
    }
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or("");
    let api_version = new.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if let Some(read) = crate::dialect::read_object(new) {
        match read {
            Ok(crate::dialect::GangObject::Gang(g)) => {
                v.errors.extend(gang_tree_errors(&g));
                if let Some(old) = old.and_then(|o| match crate::dialect::read_object(o) {
                    Some(Ok(crate::dialect::GangObject::Gang(g))) => Some(g),
                    _ => None,
                }) {
                    v.errors.extend(update_errors(&old, &g));
                }
                for (path, asked, leaves) in crate::dialect::kai::pod_floor_gaps(new) {
                    v.warnings.push(format!(
                        "{path}: KAI counts {asked} pods here, but gang-scheduler's tree counts satisfied subgroups and enforces only the {leaves} pods the leaf minimums below it need; raise the leaves' minMember to require more"
                    ));
                }
                if g.mode == crate::model::GangMode::NonStrict && g.timeout.is_none() {
                    v.warnings.push(
                        "a NonStrict gang without a timeout holds the nodes it reserves until it fits; set spec.scheduleTimeoutSeconds"
                            .into(),
                    );
                }
            }
            Ok(crate::dialect::GangObject::Workload(_)) => {}
            Ok(crate::dialect::GangObject::UpstreamGroup(g)) => {
                if g.min == Some(0) {
                    let field = if g.kind == "PodGroup" { "minCount" } else { "minGroupCount" };
                    v.errors.push(FieldError::new(
                        format!("spec.schedulingPolicy.gang.{field}"),
                        "must be at least 1",
                    ));
                }
            }
            Err(e) => v.errors.extend(e),
        }
        return v;
    }
    if api_version == "v1" && kind == "Pod" {
        validate_pod(new, &mut v);
        return v;
    }
    if let Some(w) = crate::workload::unnamed_gang_workload(new) {
        v.warnings.push(w);
    } else if let Some(shape) = crate::workload::inspect(new) {
        validate_workload(new, shape, &mut v);
    }
    v
}

/// Where a gang rule's CRD path lives on a pod whose annotations define the gang.
fn annotation_field(dialect: crate::model::Dialect, crd_path: &str) -> String {
    use crate::dialect::koordinator;
    use crate::names::{
        ANNOTATION_GANG_GROUP, ANNOTATION_MIN_MEMBER, ANNOTATION_TIMEOUT, ANNOTATION_TOPOLOGY_KEY,
    };
    let koord = dialect == crate::model::Dialect::Koordinator;
    let (key, rest) = if let Some(rest) = crd_path.strip_prefix("spec.gangGroup") {
        (if koord { koordinator::GROUPS } else { ANNOTATION_GANG_GROUP }, rest)
    } else if crd_path == "spec.topologyKey" {
        (ANNOTATION_TOPOLOGY_KEY, "")
    } else if crd_path == "spec.scheduleTimeoutSeconds" {
        (if koord { koordinator::WAITING_TIME } else { ANNOTATION_TIMEOUT }, "")
    } else if crd_path == "spec.minMember" {
        (if koord { koordinator::MIN_AVAILABLE } else { ANNOTATION_MIN_MEMBER }, "")
    } else {
        return crd_path.to_string();
    };
    format!("metadata.annotations[{key}]{rest}")
}

fn validate_pod(pod: &Value, v: &mut Verdict) {
    // Every claim error (each dialect's, and conflicts), and the checks below on the claims that
    // could be read.
    let (claims, claim_errors) = crate::dialect::pod_claims_all(pod);
    v.errors.extend(claim_errors);
    for c in &claims {
        match crate::dialect::annotation_gang(c, pod) {
            Some(Ok(g)) => {
                // The annotation gang's shape: topology key, gang group, timeout, as on a Gang.
                for e in gang_tree_errors(&g) {
                    if e.path != "spec.minMember" {
                        v.errors.push(FieldError::new(annotation_field(c.dialect, &e.path), e.message));
                    }
                }
                if g.min_member == 0 && c.dialect != crate::model::Dialect::KubeGangAnnotations {
                    v.errors.push(FieldError::new(c.path.clone(), "the gang's minimum must be at least 1"));
                }
                if let Some(total) = g.total_member
                    && g.min_member > total
                {
                    v.errors.push(FieldError::new(
                        "metadata.annotations",
                        format!(
                            "min-member {} exceeds total-member {total}: the gang can never be satisfied",
                            g.min_member
                        ),
                    ));
                }
            }
            Some(Err(e)) => v.errors.extend(e),
            None => {}
        }
    }
    if let Some(min) =
        pod.pointer("/metadata/annotations").and_then(|a| a.get(crate::names::ANNOTATION_MIN_MEMBER))
        && min.as_str() == Some("0")
    {
        v.errors.push(FieldError::new(
            format!("metadata.annotations[{}]", crate::names::ANNOTATION_MIN_MEMBER),
            "must be at least 1",
        ));
    }
    let scheduler = pod.pointer("/spec/schedulerName").and_then(Value::as_str).unwrap_or("");
    if !claims.is_empty()
        && scheduler != crate::SCHEDULER_NAME
        && !scheduler.is_empty()
        && scheduler != "default-scheduler"
    {
        v.warnings.push(format!(
            "spec.schedulerName is {scheduler:?}: this gang member will not be placed by {}",
            crate::SCHEDULER_NAME
        ));
    }
}

fn validate_workload(
    obj: &Value,
    shape: Result<crate::workload::WorkloadShape, Vec<FieldError>>,
    v: &mut Verdict,
) {
    let shape = match shape {
        Ok(s) => s,
        Err(e) => {
            // Only a workload that asked for a gang (or a Volcano Job, a gang by itself) is ours
            // to reject.
            if crate::workload::is_opted_in(obj, None) || has_gang_labels(obj) || is_volcano_job(obj) {
                v.errors.extend(e);
            }
            return;
        }
    };
    if !shape.volcano() && !crate::workload::is_opted_in(obj, None) && !has_gang_labels(obj) {
        return;
    }
    for staged in crate::workload::staged_creation(obj, &shape) {
        if staged.never {
            v.errors.push(FieldError::new(staged.path, staged.message));
        } else {
            v.warnings.push(format!("{}: {}", staged.path, staged.message));
        }
    }
    let total = shape.group_size.unwrap_or_else(|| shape.roles.iter().map(|r| r.pods).sum());
    for role in &shape.roles {
        let Some(template) = obj.pointer(&role.template) else { continue };
        let annotations = template.pointer("/metadata/annotations");
        let path = crate::workload::path_of(&role.template);
        if let Some(min) = annotations.and_then(|a| a.get(crate::names::ANNOTATION_MIN_MEMBER)) {
            let field = format!("{path}.metadata.annotations[{}]", crate::names::ANNOTATION_MIN_MEMBER);
            match min.as_str().map(|s| s.trim().parse::<u32>()) {
                Some(Ok(0)) => v.errors.push(FieldError::new(field, "must be at least 1")),
                Some(Ok(n)) if n > total => v.errors.push(FieldError::new(
                    field,
                    format!(
                        "{n} exceeds the {total} pods the {} runs at once: the gang can never be satisfied",
                        shape.kind
                    ),
                )),
                Some(Ok(_)) => {}
                _ => v.errors.push(FieldError::new(field, format!("{min} is not a positive integer"))),
            }
        }
        if let Some(Err(e)) = annotations
            .and_then(|a| a.get(crate::names::ANNOTATION_TIMEOUT))
            .and_then(Value::as_str)
            .map(crate::dialect::parse_duration)
        {
            v.errors.push(FieldError::new(
                format!("{path}.metadata.annotations[{}]", crate::names::ANNOTATION_TIMEOUT),
                e,
            ));
        }
    }
    if shape.kind == "Job"
        && obj.pointer("/spec/completions").and_then(Value::as_u64).is_some_and(|c| c > u64::from(total))
    {
        v.warnings.push(format!(
            "spec.completions exceeds spec.parallelism: the gang covers the {total} pods that run at once, not every completion"
        ));
    }
}

fn is_volcano_job(obj: &Value) -> bool {
    obj.get("kind").and_then(Value::as_str) == Some("Job")
        && obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .is_some_and(|v| crate::dialect::group_of(v) == "batch.volcano.sh")
}

/// Whether any pod template of the workload names a gang, in any dialect.
fn has_gang_labels(obj: &Value) -> bool {
    let Some(Ok(shape)) = crate::workload::inspect(obj) else { return false };
    shape.roles.iter().any(|r| {
        obj.pointer(&r.template)
            .is_some_and(|t| !crate::workload::template_claims(t, &shape.namespace).is_empty())
    })
}

/// Rules between the old and new version of a gang: the subgroup tree of an existing gang is fixed
/// (its members' labels name it), so renaming or re-parenting subgroups is rejected.
fn update_errors(old: &Gang, new: &Gang) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let old_tree: BTreeMap<&str, Option<&str>> =
        old.subgroups.iter().map(|s| (s.name.as_str(), s.parent.as_deref())).collect();
    let new_tree: BTreeMap<&str, Option<&str>> =
        new.subgroups.iter().map(|s| (s.name.as_str(), s.parent.as_deref())).collect();
    if old_tree != new_tree {
        errors.push(FieldError::new(
            "spec.subGroups",
            "the subgroup tree (names and parents) is immutable: members are labelled with it; change minimums only, or delete and recreate the gang",
        ));
    }
    if old.mode != new.mode {
        errors.push(FieldError::new(
            "spec.mode",
            format!(
                "field is immutable (was \"{:?}\"): reservations already held follow the old mode; delete and recreate the gang",
                old.mode
            ),
        ));
    }
    errors
}

/// The rules on a gang's shape, on the canonical model: minimums, the subgroup tree (names, parents,
/// cycles, depth, reachability of every minimum), topology keys and the gang group. Paths are those of
/// the `Gang` CRD (`spec.subGroups[2].parent`); other dialects map them in their own validation.
pub fn gang_tree_errors(gang: &Gang) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if gang.min_member < 1 {
        errors.push(FieldError::new("spec.minMember", "must be at least 1"));
    }
    if gang.subgroups.len() > MAX_SUBGROUPS {
        errors.push(FieldError::new(
            "spec.subGroups",
            format!("has {} subgroups; at most {MAX_SUBGROUPS} are allowed", gang.subgroups.len()),
        ));
    }
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, s) in gang.subgroups.iter().enumerate() {
        let path = format!("spec.subGroups[{i}]");
        // A subgroup name is a pod label value and a DNS-1123 label (KAI lowercases parents; upstream
        // PodGroup names are DNS names): the stricter of the two.
        if let Err(e) = crate::dialect::check_dns_label(&s.name) {
            errors.push(FieldError::new(format!("{path}.name"), e));
        }
        if let Some(first) = seen.insert(&s.name, i) {
            errors.push(FieldError::new(
                format!("{path}.name"),
                format!("duplicate subgroup name {:?} (also spec.subGroups[{first}])", s.name),
            ));
        }
        if s.min_member < 1 {
            errors.push(FieldError::new(format!("{path}.minMember"), "must be at least 1"));
        }
        if let Some(key) = &s.topology_key
            && let Err(e) = check_label_key(key)
        {
            errors.push(FieldError::new(format!("{path}.topologyKey"), e));
        }
    }
    let names: BTreeSet<&str> = gang.subgroups.iter().map(|s| s.name.as_str()).collect();
    let mut tree_ok = true;
    for (i, s) in gang.subgroups.iter().enumerate() {
        let Some(parent) = &s.parent else { continue };
        let path = format!("spec.subGroups[{i}].parent");
        if parent == &s.name {
            errors.push(FieldError::new(path, format!("subgroup {:?} names itself as parent", s.name)));
            tree_ok = false;
        } else if !names.contains(parent.as_str()) {
            errors
                .push(FieldError::new(path, format!("not found: {parent:?} is not a subgroup of this gang")));
            tree_ok = false;
        }
    }
    if tree_ok {
        // Walk up from each subgroup: a cycle never reaches the root; depth is bounded.
        for (i, s) in gang.subgroups.iter().enumerate() {
            let mut depth = 0;
            let mut cur = s.parent.as_deref();
            while let Some(p) = cur {
                depth += 1;
                if depth > gang.subgroups.len() {
                    errors.push(FieldError::new(
                        format!("spec.subGroups[{i}].parent"),
                        format!("subgroup {:?} is part of a parent cycle", s.name),
                    ));
                    tree_ok = false;
                    break;
                }
                cur = gang.subgroups.iter().find(|x| x.name == p).and_then(|x| x.parent.as_deref());
            }
            if tree_ok && depth >= MAX_SUBGROUP_DEPTH {
                errors.push(FieldError::new(
                    format!("spec.subGroups[{i}].parent"),
                    format!(
                        "subgroup {:?} is nested {} levels deep; at most {MAX_SUBGROUP_DEPTH} are allowed",
                        s.name,
                        depth + 1
                    ),
                ));
                tree_ok = false;
            }
        }
    }
    if tree_ok {
        let children =
            |parent: Option<&str>| gang.subgroups.iter().filter(|c| c.parent.as_deref() == parent).count();
        if !gang.subgroups.is_empty() {
            let top = children(None);
            if u64::from(gang.min_member) > top as u64 {
                errors.push(FieldError::new(
                    "spec.minMember",
                    format!(
                        "counts satisfied top-level subgroups when subgroups are set: {} can never be satisfied by {top} top-level subgroup(s)",
                        gang.min_member
                    ),
                ));
            }
        }
        for (i, s) in gang.subgroups.iter().enumerate() {
            let n = children(Some(&s.name));
            if n > 0 && u64::from(s.min_member) > n as u64 {
                errors.push(FieldError::new(
                    format!("spec.subGroups[{i}].minMember"),
                    format!("counts satisfied child subgroups: {} can never be satisfied by {n} child subgroup(s)", s.min_member),
                ));
            }
        }
        if let (Some(total), Some(min)) = (gang.total_member, gang.min_pods())
            && min > u64::from(total)
        {
            errors.push(FieldError::new(
                "spec.minMember",
                format!("needs at least {min} pods but the gang expects only {total} members: it can never be satisfied"),
            ));
        }
    }
    if let Some(key) = &gang.topology_key
        && let Err(e) = check_label_key(key)
    {
        errors.push(FieldError::new("spec.topologyKey", e));
    }
    if let Some(e) = gang.timeout.and_then(timeout_error) {
        errors.push(FieldError::new("spec.scheduleTimeoutSeconds", e));
    }
    for (i, other) in gang.gang_group.iter().enumerate() {
        if other == &gang.key {
            errors.push(FieldError::new(
                format!("spec.gangGroup[{i}]"),
                "a gang cannot name itself in its gang group",
            ));
        }
    }
    errors
}

/// The longest a gang may wait for its members: 30 days. A timeout beyond it is a mistake (a unit
/// slip) more often than a plan, and a gang that must wait longer is better recreated.
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Why a gang timeout is out of range, if it is: zero times the gang out at once.
pub fn timeout_error(d: std::time::Duration) -> Option<String> {
    if d.is_zero() {
        Some("must be greater than 0: a zero timeout fails the gang the moment it starts waiting".into())
    } else if d > MAX_TIMEOUT {
        Some(format!("{} s exceeds the 30-day maximum ({} s)", d.as_secs(), MAX_TIMEOUT.as_secs()))
    } else {
        None
    }
}

/// A Kubernetes label value: at most 63 characters, alphanumerics, `-`, `_`, `.`, starting and
/// ending with an alphanumeric. Subgroup names are written into pod labels, so they must be one.
pub fn check_label_value(v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err("must not be empty".into());
    }
    if v.len() > 63 {
        return Err(format!("{v:?} is longer than 63 characters"));
    }
    let ok_inner = v.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !ok_inner || !ends(v.chars().next()) || !ends(v.chars().last()) {
        return Err(format!(
            "{v:?} is not a valid label value (alphanumerics, '-', '_', '.', starting and ending with an alphanumeric)"
        ));
    }
    Ok(())
}

/// A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (as a label value, but not empty).
pub fn check_label_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    if let Some(p) = prefix {
        let valid = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !part.starts_with('-')
                    && !part.ends_with('-')
            });
        if !valid {
            return Err(format!("{k:?} is not a valid label key: prefix {p:?} is not a DNS subdomain"));
        }
    }
    check_label_value(name).map_err(|e| format!("{k:?} is not a valid label key: {e}"))
}
