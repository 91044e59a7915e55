//! Names: what the API server makes of `generateName`, the gang a workload named only after
//! admission cannot name, and label values shortened to the 63 characters a label allows.

use super::*;

/// How many random characters the API server appends to `generateName`, from which alphabet, and
/// how much of the prefix it keeps (apimachinery `names.SimpleNameGenerator`: `maxNameLength` 63
/// minus 5; `utilrand.String`'s consonants and digits, no vowels, no look-alikes).
const GENERATED_SUFFIX_LEN: usize = 5;
const GENERATED_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
const MAX_GENERATED_PREFIX: usize = 63 - GENERATED_SUFFIX_LEN;

/// The name the API server would give an object with `generateName: prefix`: the prefix (cut to
/// 58 characters) and 5 characters of its alphabet. The API server draws them at random; here they
/// come from an FNV-1a hash of `seed`, so the same input always gets the same name (`simulate`).
pub fn generated_name(prefix: &str, seed: &str) -> String {
    let mut cut = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut h = seed
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    let mut name = prefix[..cut].to_string();
    for _ in 0..GENERATED_SUFFIX_LEN {
        name.push(char::from(GENERATED_ALPHABET[(h % GENERATED_ALPHABET.len() as u64) as usize]));
        h /= GENERATED_ALPHABET.len() as u64;
    }
    name
}

/// True when mutating admission could not have known the object's name: it has a `generateName`
/// and either no name (what the mutating webhook and `kubectl gang validate -f` see) or a name the
/// API server generated from it (what the validating webhook sees: the API server names the object
/// after mutating admission and before validating admission, `registry/generic/registry/store.go`).
/// A user who sets both a name and a `generateName` gets the name; such a name is taken as
/// generated only when it is the prefix plus 5 characters of the generator's alphabet.
pub fn named_after_mutation(obj: &Value) -> bool {
    let Some(meta) = obj.get("metadata") else { return false };
    let Some(prefix) = meta.get("generateName").and_then(Value::as_str).filter(|p| !p.is_empty()) else {
        return false;
    };
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    if name.is_empty() {
        return true;
    }
    let mut cut = prefix.len().min(MAX_GENERATED_PREFIX);
    while !prefix.is_char_boundary(cut) {
        cut -= 1;
    }
    name.strip_prefix(&prefix[..cut]).is_some_and(|suffix| {
        suffix.len() == GENERATED_SUFFIX_LEN && suffix.bytes().all(|b| GENERATED_ALPHABET.contains(&b))
    })
}

/// The warning for a workload that asks for a gang (it is ours: opted in) whose name mutating
/// admission did not know ([`WorkloadShape::named_late`]) and whose pod templates do not name
/// their gang in any dialect: no gang named after it can be injected, so its pods run without
/// one. `None` for anything else: a workload with a name, a Volcano Job (its controller names its
/// PodGroup after the name the API server gave it), templates that name their own gang, a
/// suspended Job or one Kueue creates suspended ([`super::kueue_suspends`]; injected when it is
/// unsuspended).
pub fn unnamed_gang(obj: &Value, shape: &WorkloadShape) -> Option<String> {
    if !shape.named_late || shape.volcano() || late_name_label(obj, shape).is_some() {
        return None;
    }
    // A suspended Job (Kueue's way) gets its gang in the update that unsuspends it, when its name
    // is known and its template still mutable (`template_still_mutable`): nothing to warn about.
    if shape.kind == "Job"
        && shape.group == "batch"
        && (obj.at("/spec/suspend").and_then(Value::as_bool) == Some(true) || super::kueue_suspends(obj))
    {
        return None;
    }
    let unnamed = shape
        .roles
        .iter()
        .any(|r| obj.at(&r.template).is_some_and(|t| template_claims(t, &shape.namespace).is_empty()));
    if !unnamed {
        return None;
    }
    let prefix = obj.at("/metadata/generateName").and_then(Value::as_str).unwrap_or("");
    let suspend = if shape.kind == "Job" && shape.group == "batch" {
        ", or create the Job suspended (its gang is injected when it is unsuspended)"
    } else {
        ""
    };
    Some(format!(
        "metadata.generateName: {prefix:?} is turned into a name by the API server only after the mutating webhook has run, so no gang named after the {} can be injected and its pods are scheduled one by one, not as a gang; set metadata.name, or name a gang in the pod template{suspend}",
        shape.kind
    ))
}

/// For a workload whose name mutating admission did not know ([`WorkloadShape::named_late`]),
/// the pod label in which its controller writes its name on every pod it creates: the gang is
/// injected as `kube-gang.io/gang-from: <label>` (with the usual minimum), and each pod's gang is
/// named after that label's value — the name the API server gave the workload, found the way
/// KAI's podgrouper and Volcano's controller find a pod's workload, with no lookup. `None` for a
/// kind whose controller writes no such label (StatefulSet, Deployment, RayJob's cluster), a
/// Volcano Job (its own controller names its PodGroup), and a suspended Job or one Kueue creates
/// suspended (named in the update that unsuspends it, [`super::template_still_mutable`]).
pub fn late_name_label(obj: &Value, shape: &WorkloadShape) -> Option<&'static str> {
    if !shape.named_late || shape.volcano() {
        return None;
    }
    let job = shape.kind == "Job" && shape.group == "batch";
    if job && (obj.at("/spec/suspend").and_then(Value::as_bool) == Some(true) || super::kueue_suspends(obj)) {
        return None;
    }
    controller_name_label(&shape.group, &shape.kind)
}

/// The pod label in which the controller of a workload of `group`/`kind` writes the workload's
/// name on every pod it creates (what [`late_name_label`] names a gang from, and what `simulate`'s
/// expansion writes on the pods); `None` for a kind whose controller writes none.
pub fn controller_name_label(group: &str, kind: &str) -> Option<&'static str> {
    super::workload_kind(group, kind).and_then(|k| k.name_label)
}

/// The longest a label value may be.
pub const MAX_LABEL_VALUE: usize = 63;

/// A name as a label value: unchanged when it fits in 63 characters; otherwise its first 54
/// characters (trailing `-`, `_`, `.` dropped, as a value must end in an alphanumeric), `-`, and 8
/// hex digits of the FNV-1a hash of the whole name. Stable (the same name always gives the same
/// value, on every replica and in the CLI) and distinct for names that share their first 54
/// characters. Kubernetes controllers shorten generated names the same way: a truncated prefix and
/// a hash of the full input (the Deployment controller's `pod-template-hash` is FNV-32a too).
pub fn label_value_for(name: &str) -> String {
    if name.len() <= MAX_LABEL_VALUE {
        return name.to_string();
    }
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    let mut cut = MAX_LABEL_VALUE - 9;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    let prefix = name[..cut].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if prefix.is_empty() { format!("{hash:08x}") } else { format!("{prefix}-{hash:08x}") }
}
