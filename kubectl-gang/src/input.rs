//! Reading objects from files: multi-document YAML, JSON, or a `v1 List` (what
//! `kubectl get … -o yaml` prints), from a file, a directory, or `-` (stdin). Errors name the file
//! and the document.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One object and where it came from.
#[derive(Clone, Debug)]
pub struct Sourced {
    pub file: String,
    pub object: Value,
}

/// An input error: the file, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: document {doc}: {message}")]
    Parse { path: String, doc: usize, message: String },
}

/// Expands `-f` arguments: directories become their `.yaml`, `.yml` and `.json` files, sorted.
pub fn expand_paths(paths: &[PathBuf]) -> Result<Vec<PathBuf>, InputError> {
    let mut out = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" {
            out.push(p.clone());
        } else if p.is_dir() {
            let entries = std::fs::read_dir(p)
                .map_err(|e| InputError::Io { path: p.display().to_string(), source: e })?;
            let mut files: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
                .collect();
            files.sort();
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Reads every object from the given paths (`-` is stdin).
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<Sourced>, InputError> {
    let mut out = Vec::new();
    for p in expand_paths(paths)? {
        let (name, text) = if p.as_os_str() == "-" {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| InputError::Io { path: "-".into(), source: e })?;
            ("-".to_string(), s)
        } else {
            let s = std::fs::read_to_string(&p)
                .map_err(|e| InputError::Io { path: p.display().to_string(), source: e })?;
            (p.display().to_string(), s)
        };
        out.extend(parse_text(&name, &text)?);
    }
    Ok(out)
}

/// Reads one file.
pub fn read_file(path: &Path) -> Result<Vec<Sourced>, InputError> {
    read_paths(&[path.to_path_buf()])
}

/// Parses YAML (one or many documents) or JSON; `List`s are flattened.
pub fn parse_text(name: &str, text: &str) -> Result<Vec<Sourced>, InputError> {
    let mut out = Vec::new();
    let trimmed = text.trim_start();
    let docs: Vec<Value> = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v: Value = serde_json::from_str(text).map_err(|e| InputError::Parse {
            path: name.into(),
            doc: 1,
            message: e.to_string(),
        })?;
        match v {
            Value::Array(items) => items,
            v => vec![v],
        }
    } else {
        let mut docs = Vec::new();
        for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
            let v: Value = serde::Deserialize::deserialize(doc).map_err(|e| InputError::Parse {
                path: name.into(),
                doc: i + 1,
                message: e.to_string(),
            })?;
            docs.push(v);
        }
        docs
    };
    for (i, v) in docs.into_iter().enumerate() {
        match v {
            Value::Null => {}
            Value::Object(mut m)
                if m.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
                    && m.contains_key("items") =>
            {
                let items = match m.remove("items") {
                    Some(Value::Array(items)) => items,
                    Some(Value::Null) | None => Vec::new(),
                    Some(other) => {
                        return Err(InputError::Parse {
                            path: name.into(),
                            doc: i + 1,
                            message: format!("items: expected a list, found {}", kind_of(&other)),
                        });
                    }
                };
                out.reserve(items.len());
                out.extend(items.into_iter().map(|o| Sourced { file: name.into(), object: o }));
            }
            Value::Object(_) => out.push(Sourced { file: name.into(), object: v }),
            other => {
                return Err(InputError::Parse {
                    path: name.into(),
                    doc: i + 1,
                    message: format!("expected a Kubernetes object, found {}", kind_of(&other)),
                });
            }
        }
    }
    Ok(out)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_documents_lists_and_json() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n}}\n---\n";
        let objs = parse_text("x.yaml", yaml).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[1].object["kind"], "Node");
        let json = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "b"}}"#;
        assert_eq!(parse_text("x.json", json).unwrap().len(), 1);
    }

    #[test]
    fn errors_name_file_and_document() {
        let err = parse_text("bad.yaml", "kind: Pod\n---\n: : :\n").unwrap_err().to_string();
        assert!(err.starts_with("bad.yaml: document 2:"), "{err}");
        let err = parse_text("s.yaml", "just a string\n").unwrap_err().to_string();
        assert!(err.contains("expected a Kubernetes object, found a string"), "{err}");
    }
}
