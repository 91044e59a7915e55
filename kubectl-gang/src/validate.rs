//! `kubectl gang validate -f FILE…`: the webhook's decision, offline, for CI pipelines. Each object
//! goes through [`scheduler_core::admit`] as a CREATE, the call the webhook makes: what injection
//! would add is added, then the result is validated, so this command and the webhook cannot disagree.

use std::fmt::Write as _;

use scheduler_core::admit;
use serde::Serialize;
use serde_json::json;

use crate::Output;
use crate::cli::{Format, Global, ValidateArgs};
use crate::input;

/// One problem, as `-o json` prints it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub file: String,
    pub object: String,
    pub field: String,
    pub message: String,
}

/// Runs `validate`: exit 1 when any object has an error.
pub fn run(g: &Global, args: &ValidateArgs) -> anyhow::Result<Output> {
    let sourced = input::read_paths(&args.files)?;
    let mut errors = Vec::new();
    let mut warnings = Vec::new();
    let mut checked = 0usize;
    for s in sourced {
        let mut obj = s.object;
        if let (Some(ns), Some(meta)) =
            (&g.namespace, obj.get_mut("metadata").and_then(|m| m.as_object_mut()))
        {
            meta.entry("namespace").or_insert_with(|| serde_json::Value::String(ns.clone()));
        }
        let object = input::describe(&obj);
        // A file is what `kubectl apply` would create; the namespace's labels are not known here,
        // so a workload opted in only through its namespace is checked as one that did not opt in.
        let verdict = admit(&mut obj, None, None);
        checked += 1;
        errors.extend(verdict.errors.into_iter().map(|e| Finding {
            file: s.file.clone(),
            object: object.clone(),
            field: e.path,
            message: e.message,
        }));
        warnings.extend(verdict.warnings.into_iter().map(|w| format!("{}: {object}: {w}", s.file)));
    }
    let mut stderr = String::new();
    for w in &warnings {
        let _ = writeln!(stderr, "warning: {w}");
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
