//! `kubectl gang validate -f FILE…`: the webhook's decision, offline, for CI pipelines. Each object
//! goes through [`scheduler_core::admit()`] as a CREATE, the call the webhook makes: what injection
//! would add is added, then the result is validated, so this command and the webhook cannot disagree.
//! The gangs the input defines are what this door knows besides each object (the webhook knows the
//! Gang objects it watches): a pod in the input naming an inner or unknown subgroup of one of them is
//! denied ([`scheduler_core::admit_with`]).

use std::fmt::Write as _;

use std::collections::HashMap;

use scheduler_core::dialect::{self, GangObject};
use scheduler_core::model::GangKey;
use scheduler_core::{admit_with, convert, prepare, validate, workload};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::{Format, Global, ValidateArgs};
use crate::input::{self, Sourced};
use crate::output::Output;

/// One problem, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub file: String,
    pub object: String,
    pub field: String,
    pub message: String,
    /// Found over the whole input, not by admitting this object alone (a gang whose members in
    /// the input can never reach its minimum): the webhook, which sees one object, cannot say it.
    #[serde(rename = "wholeInput", skip_serializing_if = "std::ops::Not::not")]
    pub whole_input: bool,
}

/// What `validate` found in its input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Objects admitted.
    pub checked: usize,
    /// What the API server would refuse before admission: `FILE: Kind ns/name: path: message`.
    pub unreadable: Vec<String>,
    pub errors: Vec<Finding>,
    /// `FILE: Kind ns/name: warning`.
    pub warnings: Vec<String>,
}

/// Judges every object `objects()` yields as the webhook would on create: the objects' namespace
/// defaulted to `namespace` when given, the gangs the input defines known to admission. The
/// objects are gone through twice (the gangs first), one at a time: memory stays proportional to
/// the input, not to its objects decoded all at once.
pub fn check<I: Iterator<Item = Sourced>>(objects: impl Fn() -> I, namespace: Option<&str>) -> Report {
    let with_namespace = |mut s: Sourced| {
        prepare::defaulted(&mut s.object, namespace, None);
        s
    };
    // Read before admission changes anything: a gang object is not injected into.
    let gangs = input::gangs_of(objects().map(with_namespace).map(|s| s.object));
    let mut report = Report::default();
    // Members each gang gets from the input, and where each gang object is, for the shortfall.
    let mut members: HashMap<GangKey, u64> = HashMap::new();
    let mut gang_objects: Vec<(scheduler_core::Gang, String, String)> = Vec::new();
    for s in objects().map(with_namespace) {
        let mut obj = s.object;
        let object = input::describe(&obj);
        if let Some(Ok(GangObject::Gang(g))) = dialect::read_object(&obj) {
            gang_objects.push((g, s.file.clone(), object.clone()));
        }
        report.unreadable.extend(refused(&obj).into_iter().map(|e| format!("{}: {object}: {e}", s.file)));
        // A file is what `kubectl apply` would create; the namespace's labels are not known here,
        // so a workload opted in only through its namespace is checked as one that did not opt in.
        let verdict = admit_with(&mut obj, None, None, &gangs);
        report.checked += 1;
        report.errors.extend(verdict.errors.into_iter().map(|e| Finding {
            file: s.file.clone(),
            object: object.clone(),
            field: e.path,
            message: e.message,
            whole_input: false,
        }));
        report.warnings.extend(verdict.warnings.into_iter().map(|w| format!("{}: {object}: {w}", s.file)));
        // Counted as admitted (injection names the gang a workload's pods join).
        for (gang, n) in validate::members_named(&obj) {
            let m = members.entry(gang).or_default();
            *m = m.saturating_add(n);
        }
    }
    for (g, file, object) in gang_objects {
        let found = members.get(&g.key).copied().unwrap_or(0);
        if let Some(e) = validate::member_shortfall(&g, found) {
            report.errors.push(Finding {
                file,
                object,
                field: e.path,
                message: e.message,
                whole_input: true,
            });
        }
    }
    report
}

/// Runs `validate`: exit 1 when any object has an error, 2 when an object is one the API server
/// would refuse before admission (an invalid quantity, a field of the wrong type).
pub fn run(g: &Global, args: &ValidateArgs) -> anyhow::Result<Output> {
    let objects = input::read(&args.files)?;
    let Report { checked, unreadable, errors, warnings } = check(|| objects.iter(), g.namespace.as_deref());
    let mut stderr = String::new();
    for w in &warnings {
        let _ = writeln!(stderr, "warning: {w}");
    }
    if !unreadable.is_empty() {
        let _ = write!(stderr, "error: the input is invalid:");
        for e in &unreadable {
            let _ = write!(stderr, "\n  {e}");
        }
        stderr.push('\n');
        return Ok(Output { stdout: String::new(), stderr, code: 2 });
    }
    let stdout = match g.output {
        Some(Format::Json) => {
            serde_json::to_string_pretty(
                &json!({"objects": checked, "errors": errors, "warnings": warnings}),
            )? + "\n"
        }
        Some(Format::Yaml) => {
            serde_norway::to_string(&json!({"objects": checked, "errors": errors, "warnings": warnings}))?
        }
        _ => {
            let mut out = String::new();
            for e in &errors {
                let _ = writeln!(out, "{}: {}: {}: {}", e.file, e.object, e.field, e.message);
            }
            let objects = if checked == 1 { "object" } else { "objects" };
            if errors.is_empty() {
                let _ = writeln!(stderr, "{checked} {objects} valid");
            } else {
                let _ = writeln!(stderr, "{} error(s) in {checked} {objects}", errors.len());
            }
            out
        }
    };
    Ok(Output { stdout, stderr, code: u8::from(!errors.is_empty()) })
}

/// What the API server would refuse in this object before any webhook saw it, as `path: message`:
/// a `Gang`'s field its CRD does not declare (strict field validation, kubectl's default), a Node's or Pod's field the scheduler cannot read (an invalid quantity, a field of the wrong
/// type), or the same in a workload's pod template (the API server validates templates as pods).
/// Admission alone would call such an object valid.
fn refused(obj: &Value) -> Vec<String> {
    let classes = convert::PriorityClasses::default();
    // A priority class is another object, looked up when the cluster is assembled.
    let shown = |errors: Vec<scheduler_core::FieldError>, prefix: &str| -> Vec<String> {
        errors
            .into_iter()
            .filter(|e| e.path != "spec.priorityClassName")
            .map(|e| e.under(prefix).to_string())
            .collect()
    };
    // What the API server refuses before admission (labels and annotations that are no strings,
    // a Gang's fields its CRD does not declare): the step `simulate` takes too.
    let mut out = prepare::refused_before_admission(obj);
    if !out.is_empty() {
        return out;
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some("Node") => return convert::node_from_value(obj).err().map(|e| shown(e, "")).unwrap_or_default(),
        Some("Pod") => {
            // The API server names a Pod created with only `generateName` (as it does any object):
            // it is read as the pod it becomes.
            let named;
            let pod = if workload::named_after_mutation(obj) {
                let mut with_name = obj.clone();
                let prefix = obj.pointer("/metadata/generateName").and_then(Value::as_str).unwrap_or("");
                with_name["metadata"]["name"] = Value::String(workload::generated_name(prefix, prefix));
                named = with_name;
                &named
            } else {
                obj
            };
            let mut errors = convert::pod_from_value(pod, &classes).err().unwrap_or_default();
            for e in errors.iter_mut().filter(|e| e.path == "metadata.name") {
                e.message = "Required value: name or generateName is required".into();
            }
            return shown(errors, "");
        }
        _ => {}
    }
    let Some(Ok(shape)) = workload::inspect(obj) else { return Vec::new() };
    for role in &shape.roles {
        let Some(template) = obj.pointer(&role.template) else { continue };
        // The template read as the pod it makes: its spec and metadata, nothing copied but those.
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "template", "namespace": "default"},
                         "spec": template.get("spec").cloned().unwrap_or(Value::Null)});
        if let Err(e) = convert::pod_from_value(&pod, &classes) {
            out.extend(shown(e, &workload::path_of(&role.template)));
        }
    }
    out
}
