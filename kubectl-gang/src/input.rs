//! Reading objects from files: multi-document YAML, JSON, or a `v1 List` (what
//! `kubectl get … -o yaml` prints), from a file, a directory, or `-` (stdin). Errors name the file
//! and the document. YAML is read as kubectl reads it ([`crate::yaml`]); a file may hold at most
//! [`MAX_INPUT_BYTES`], and the objects read take memory in proportion to it.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One object and where it came from.
#[derive(Clone, Debug)]
pub struct Sourced {
    pub file: String,
    pub object: Value,
}

/// The most one file (or stdin) may hold.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// An input error: the file, and what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("{path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: document {doc}: {message}")]
    Parse { path: String, doc: usize, message: String },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
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

/// Reads every object from the given paths (`-` is stdin). Input with no object at all is an
/// error: a command given nothing to read has nothing true to say about it.
pub fn read_paths(paths: &[PathBuf]) -> Result<Vec<Sourced>, InputError> {
    let mut out = Vec::new();
    let files = expand_paths(paths)?;
    for p in &files {
        let name = if p.as_os_str() == "-" { "-".to_string() } else { p.display().to_string() };
        let text = if p.as_os_str() == "-" {
            read_bounded(&name, std::io::stdin().lock())?
        } else {
            let file =
                std::fs::File::open(p).map_err(|e| InputError::Io { path: name.clone(), source: e })?;
            read_bounded(&name, file)?
        };
        out.extend(parse_text(&name, &text)?);
    }
    if out.is_empty() {
        let what = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        let message = if files.is_empty() {
            "no .yaml, .yml or .json files in it".to_string()
        } else {
            "no Kubernetes objects in the input".to_string()
        };
        return Err(InputError::Invalid { path: what, message });
    }
    Ok(out)
}

/// At most [`MAX_INPUT_BYTES`] of UTF-8 text, or an error saying which limit was hit.
fn read_bounded(name: &str, reader: impl Read) -> Result<String, InputError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| InputError::Io { path: name.into(), source: e })?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(InputError::Invalid {
            path: name.into(),
            message: format!("larger than {} MiB; split it into smaller files", MAX_INPUT_BYTES >> 20),
        });
    }
    String::from_utf8(bytes).map_err(|e| InputError::Invalid {
        path: name.into(),
        message: format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
    })
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
        let v: Value = strict_json(text).map_err(|e| InputError::Parse {
            path: name.into(),
            doc: 1,
            message: e.to_string(),
        })?;
        match v {
            Value::Array(items) => items,
            v => vec![v],
        }
    } else {
        crate::yaml::documents(text).map_err(|e| InputError::Parse {
            path: name.into(),
            doc: e.doc,
            message: e.to_string(),
        })?
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
                // The API server's typed lists (`PodList`, `NodeList`, `JobList`) leave `kind` and
                // `apiVersion` off their items, which are of the list's item kind; a plain `List`
                // names each item's own.
                let item_kind = m
                    .get("kind")
                    .and_then(Value::as_str)
                    .and_then(|k| k.strip_suffix("List"))
                    .filter(|k| !k.is_empty())
                    .map(str::to_string);
                let api_version = m.get("apiVersion").cloned();
                out.reserve(items.len());
                out.extend(items.into_iter().map(|mut o| {
                    if let (Some(kind), Some(item)) = (&item_kind, o.as_object_mut())
                        && !item.contains_key("kind")
                    {
                        item.insert("kind".into(), Value::String(kind.clone()));
                        if let Some(v) = &api_version {
                            item.entry("apiVersion").or_insert_with(|| v.clone());
                        }
                    }
                    Sourced { file: name.into(), object: o }
                }));
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

/// `Kind namespace/name` for messages about an input object; one named only by
/// `metadata.generateName` is `Kind namespace/prefix*` (the API server appends the rest).
pub fn describe(obj: &Value) -> String {
    let named = obj.pointer("/metadata/name").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
    match obj.pointer("/metadata/generateName").and_then(Value::as_str).filter(|g| !g.is_empty() && !named) {
        Some(prefix) => {
            let mut o = obj.clone();
            if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.insert("name".into(), Value::String(format!("{prefix}*")));
            }
            scheduler_core::cluster::describe(&o)
        }
        None => scheduler_core::cluster::describe(obj),
    }
}

/// The gangs the gang objects among `objects` define (objects that are not one are passed over),
/// for checks that need a pod and its gang together.
pub fn gangs_of<'a>(objects: impl IntoIterator<Item = &'a Value>) -> Vec<scheduler_core::Gang> {
    objects
        .into_iter()
        .filter_map(|o| match scheduler_core::dialect::read_object(o) {
            Some(Ok(scheduler_core::dialect::GangObject::Gang(g))) => Some(g),
            _ => None,
        })
        .collect()
}

/// JSON as the API server reads it with strict field validation (kubectl's default since 1.27):
/// a key given twice in one object is an error naming its path (serde_json alone keeps the last
/// value, so the first would vanish without a word). The YAML reader refuses duplicates the same
/// way. serde_json's own nesting limit (128) still applies.
fn strict_json(text: &str) -> Result<Value, serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    let v = Strict(&Segment::Root).deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Where a value sits, as a chain on the stack: rendered only for an error.
enum Segment<'a> {
    Root,
    Key(&'a Segment<'a>, &'a str),
    Index(&'a Segment<'a>, usize),
}

impl std::fmt::Display for Segment<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Segment::Root => Ok(()),
            Segment::Key(Segment::Root, k) => write!(f, "{k}"),
            Segment::Key(up, k) => write!(f, "{up}.{k}"),
            Segment::Index(up, i) => write!(f, "{up}[{i}]"),
        }
    }
}

/// A JSON value read with every object's keys checked for duplicates.
struct Strict<'a>(&'a Segment<'a>);

impl<'de> serde::de::DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(Strict(&Segment::Index(self.0, out.len())))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let within = match self.0 {
                    Segment::Root => String::new(),
                    up => format!("{up}: "),
                };
                return Err(serde::de::Error::custom(format_args!("{within}duplicate key {key:?}")));
            }
            let v = map.next_value_seed(Strict(&Segment::Key(self.0, &key)))?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
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
    fn an_object_named_by_generate_name_is_described_by_its_prefix() {
        let job = serde_json::json!({"kind": "Job", "metadata": {"namespace": "team-a", "generateName": "sample-job-"}});
        assert_eq!(describe(&job), "Job team-a/sample-job-*");
        let named = serde_json::json!({"kind": "Job", "metadata": {"namespace": "a", "name": "j", "generateName": "x-"}});
        assert_eq!(describe(&named), "Job a/j");
    }

    #[test]
    fn typed_list_items_without_kind_take_the_lists_item_kind() {
        let yaml = "apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: n1}\n- {apiVersion: v1, kind: Node, metadata: {name: n2}}\n---\napiVersion: batch/v1\nkind: JobList\nitems:\n- metadata: {name: j}\n---\napiVersion: v1\nkind: List\nitems:\n- metadata: {name: x}\n";
        let objs = parse_text("l.yaml", yaml).unwrap();
        assert_eq!(objs.len(), 4, "no item is skipped");
        assert_eq!(
            (objs[0].object["kind"].as_str(), objs[0].object["apiVersion"].as_str()),
            (Some("Node"), Some("v1"))
        );
        assert_eq!(objs[1].object["metadata"]["name"], "n2");
        assert_eq!(
            (objs[2].object["kind"].as_str(), objs[2].object["apiVersion"].as_str()),
            (Some("Job"), Some("batch/v1"))
        );
        assert!(objs[3].object.get("kind").is_none(), "a plain List says nothing of its items' kind");
    }

    #[test]
    fn a_pod_with_an_octal_mode_decodes_as_kubectl_sends_it() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n  volumes:\n  - name: v\n    configMap: {name: cm, defaultMode: 0644}\n";
        let objs = parse_text("p.yaml", yaml).unwrap();
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(objs[0].object.clone()).unwrap();
        let mode = pod.spec.unwrap().volumes.unwrap()[0].config_map.as_ref().unwrap().default_mode;
        assert_eq!(mode, Some(420));
    }

    #[test]
    fn oversized_and_binary_input_are_clear_errors() {
        let err = read_bounded("big", std::io::repeat(b'a').take(MAX_INPUT_BYTES + 10)).unwrap_err();
        assert_eq!(err.to_string(), "big: larger than 64 MiB; split it into smaller files");
        let err = read_bounded("bin", &[0x61, 0xff, 0x00][..]).unwrap_err();
        assert_eq!(err.to_string(), "bin: not UTF-8 text (invalid byte at offset 1)");
    }

    #[test]
    fn json_duplicate_keys_are_errors_naming_their_path() {
        let dup = r#"{"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "a", "labels": {"x": "1", "x": "2"}}}]}"#;
        let e = parse_text("dump.json", dup).unwrap_err().to_string();
        assert!(
            e.starts_with(r#"dump.json: document 1: items[0].metadata.labels: duplicate key "x" at line 1"#),
            "{e}"
        );
        let e = parse_text("-", r#"{"kind": "Pod", "kind": "Node"}"#).unwrap_err().to_string();
        assert!(e.starts_with(r#"-: document 1: duplicate key "kind" at line 1"#), "{e}");
        // The same key in two objects is not a duplicate; numbers, nulls and nesting read as before.
        let ok = r#"[{"kind": "Pod", "metadata": {"name": "a"}, "n": [1, -2, 2.5, null, true]},
                     {"kind": "Pod", "metadata": {"name": "b"}}]"#;
        let objs = parse_text("-", ok).unwrap();
        assert_eq!(objs.len(), 2);
        assert_eq!(objs[0].object["n"], serde_json::json!([1, -2, 2.5, null, true]));
        assert_eq!(objs[0].object, serde_json::from_str::<Value>(ok).unwrap()[0]);
        // Trailing text after the value is still an error.
        assert!(parse_text("-", r#"{"kind": "Pod"} x"#).is_err());
    }

    #[test]
    fn errors_name_file_and_document() {
        let err = parse_text("bad.yaml", "kind: Pod\n---\nspec: [1, 2\n").unwrap_err().to_string();
        assert!(err.starts_with("bad.yaml: document 2:"), "{err}");
        let err = parse_text("s.yaml", "just a string\n").unwrap_err().to_string();
        assert!(err.contains("expected a Kubernetes object, found a string"), "{err}");
    }
}
