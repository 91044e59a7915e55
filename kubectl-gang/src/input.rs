//! Reading objects from files: multi-document YAML, JSON, or a `v1 List` (what
//! `kubectl get … -o yaml` prints), from a file, a directory, or `-` (stdin). Errors name the file
//! and the document. YAML is read as kubectl reads it ([`crate::yaml`]); a file may hold at most
//! [`MAX_INPUT_BYTES`].
//!
//! Memory stays proportional to the input with a small factor: a file's text is read, its objects
//! are written into [`Objects`] as compact JSON one at a time as the reader finishes each (a
//! `List`'s items too), and the text is dropped. A command then walks the objects, decoding one at
//! a time ([`Objects::iter`]). A `serde_json::Value` costs some 50 times the YAML of a small
//! mapping (a B-tree node per map), so holding every object as a value at once would not.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::Value;

pub use scheduler_core::prepare::{Sourced, describe, gangs_of};

/// The most one file (or stdin) may hold.
pub const MAX_INPUT_BYTES: u64 = 64 * 1024 * 1024;

/// The most one command reads from its `-f` files (or its `--cluster` dump) together: four
/// files of the largest size. Memory follows the input (README: a few times it, 19 at worst), so
/// a directory of many large files is refused rather than read into tens of GB.
pub const MAX_TOTAL_INPUT_BYTES: u64 = 4 * MAX_INPUT_BYTES;

/// The most a side file may hold: the scheduler's policy (`--config`), a kubeconfig
/// (`--kubeconfig`, `KUBECONFIG`, `~/.kube/config`) and each file a kubeconfig names (CA,
/// client certificate and key, token). Real ones are kilobytes; `/dev/zero` is not.
pub const MAX_SIDE_FILE_BYTES: u64 = 16 * 1024 * 1024;

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
    Ok(read(paths)?.iter().collect())
}

/// Reads every object from the given paths (`-` is stdin) into compact storage, one file's text
/// at a time. Input with no object at all is an error.
pub fn read(paths: &[PathBuf]) -> Result<Objects, InputError> {
    let mut out = Objects::default();
    let files = expand_paths(paths)?;
    // Refused before any file is read when their sizes already say so.
    let sizes: u64 = files.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum();
    if sizes > MAX_TOTAL_INPUT_BYTES {
        let what = paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
        return Err(too_much(what));
    }
    let mut total = 0u64;
    for p in &files {
        let name = if p.as_os_str() == "-" { "-".to_string() } else { p.display().to_string() };
        let text = if p.as_os_str() == "-" {
            read_bounded(&name, std::io::stdin().lock(), 0, MAX_INPUT_BYTES)?
        } else {
            let file =
                std::fs::File::open(p).map_err(|e| InputError::Io { path: name.clone(), source: e })?;
            // Sized from the file's length: read into one buffer, not grown by doubling.
            let len = file.metadata().map_or(0, |m| m.len().min(MAX_INPUT_BYTES));
            read_bounded(&name, file, len, MAX_INPUT_BYTES)?
        };
        total += text.len() as u64;
        if total > MAX_TOTAL_INPUT_BYTES {
            return Err(too_much(name));
        }
        out.add_text(name, &text)?;
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

fn too_much(path: String) -> InputError {
    InputError::Invalid {
        path,
        message: format!(
            "the input is larger than {} MiB in all; give fewer files at once",
            MAX_TOTAL_INPUT_BYTES >> 20
        ),
    }
}

/// Objects read from files, each stored as compact JSON back to back: about the size of the text
/// they were read from. Decoded one at a time by [`Objects::iter`].
#[derive(Debug, Default)]
pub struct Objects {
    /// The objects' JSON, each ended by a newline (which compact JSON never holds): no index.
    json: Vec<u8>,
    /// How many objects.
    len: usize,
    /// Runs of objects from one file or one typed list, in order.
    runs: Vec<Run>,
}

/// Objects from `first` on (to the next run) come from one file, and from one `List` if `item_kind`.
#[derive(Debug)]
struct Run {
    first: usize,
    file: Rc<str>,
    /// A typed list's item kind and apiVersion (`PodList` → `Pod`), for items that name none.
    item_kind: Option<(String, Option<Value>)>,
}

impl Objects {
    /// How many objects.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Every object, decoded one at a time, in the order read.
    pub fn iter(&self) -> impl Iterator<Item = Sourced> + '_ {
        let mut run = 0;
        let mut lines = self.json.split(|&b| b == b'\n');
        (0..self.len).map(move |i| {
            while run + 1 < self.runs.len() && self.runs[run + 1].first <= i {
                run += 1;
            }
            let r = &self.runs[run];

            // Written by serde_json from a value a moment ago: it reads back.
            let mut object: Value =
                serde_json::from_slice(lines.next().unwrap_or_default()).unwrap_or_default();
            if let (Some((kind, api_version)), Some(item)) = (&r.item_kind, object.as_object_mut())
                && !item.contains_key("kind")
            {
                item.insert("kind".into(), Value::String(kind.clone()));
                if let Some(v) = api_version {
                    item.entry("apiVersion").or_insert_with(|| v.clone());
                }
            }
            Sourced { file: r.file.to_string(), object }
        })
    }

    /// Adds the objects of one file's text (YAML, one or many documents, or JSON; `List`s
    /// flattened).
    pub fn add_text(&mut self, name: String, text: &str) -> Result<(), InputError> {
        let file: Rc<str> = name.into();
        // Compact JSON is about as long as the text it was read from (a little longer for tiny
        // documents, shorter for indented YAML): room for it at once, not by doubling, which
        // would hold the old and the new buffer together.
        self.json.reserve(text.len() + text.len() / 4);
        let trimmed = text.trim_start();
        let mut sink = Adder { objects: self, file: file.clone(), error: None };
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            strict_json_into(text, &mut sink).map_err(|e| InputError::Parse {
                path: file.to_string(),
                doc: 1,
                message: e.to_string(),
            })?;
        } else {
            crate::yaml::read(text, &mut sink).map_err(|e| InputError::Parse {
                path: file.to_string(),
                doc: e.doc,
                message: e.to_string(),
            })?;
        }
        match sink.error.take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Stores one object read from `file`.
    fn push(&mut self, file: &Rc<str>, object: &Value) {
        if self.runs.last().is_none_or(|r| !Rc::ptr_eq(&r.file, file) || r.item_kind.is_some()) {
            self.runs.push(Run { first: self.len, file: file.clone(), item_kind: None });
        }
        // Writing a `Value` into a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut self.json, object);
        self.json.push(b'\n');
        self.len += 1;
    }

    /// The objects from `from` on are the items of one typed list of `item_kind`.
    fn retag(&mut self, from: usize, file: &Rc<str>, item_kind: (String, Option<Value>)) {
        while self.runs.last().is_some_and(|r| r.first >= from) {
            self.runs.pop();
        }
        self.runs.push(Run { first: from, file: file.clone(), item_kind: Some(item_kind) });
    }

    /// Takes back the objects from `from` on, decoded.
    fn pop(&mut self, from: usize) -> Vec<Value> {
        let n = self.len - from;
        // Object `from` starts after the newline `n + 1` from the end (or at the very start).
        let mut start = 0;
        let mut newlines = 0;
        for (i, &b) in self.json.iter().enumerate().rev() {
            if b == b'\n' {
                newlines += 1;
                if newlines == n + 1 {
                    start = i + 1;
                    break;
                }
            }
        }
        let out = self.json[start..]
            .split(|&b| b == b'\n')
            .take(n)
            .map(|line| serde_json::from_slice(line).unwrap_or_default())
            .collect();
        self.json.truncate(start);
        self.len = from;
        while self.runs.last().is_some_and(|r| r.first >= from) {
            self.runs.pop();
        }
        out
    }
}

/// Receives one file's documents (and a `List`'s items one by one) and stores the objects.
struct Adder<'a> {
    objects: &'a mut Objects,
    file: Rc<str>,
    /// The first document that is not an object (reported once the reader is done).
    error: Option<InputError>,
}

impl crate::yaml::Sink for Adder<'_> {
    fn item(&mut self, item: Value) {
        self.objects.push(&self.file, &item);
    }

    fn document(
        &mut self,
        doc: usize,
        mut value: Value,
        items: Option<usize>,
    ) -> Result<(), crate::yaml::YamlError> {
        if self.error.is_some() {
            return Ok(());
        }
        // Where this document's streamed items begin.
        let mut from = self.objects.len() - items.unwrap_or(0);
        match &mut value {
            Value::Null => {}
            Value::Object(m)
                if m.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
                    && m.contains_key("items") =>
            {
                if items.is_none() {
                    // Not streamed (an anchored `items`): stored here, item by item.
                    from = self.objects.len();
                    match m.remove("items") {
                        Some(Value::Array(list)) => {
                            for item in &list {
                                self.objects.push(&self.file, item);
                            }
                        }
                        Some(Value::Null) | None => {}
                        Some(other) => {
                            self.error = Some(InputError::Parse {
                                path: self.file.to_string(),
                                doc,
                                message: format!("items: expected a list, found {}", kind_of(&other)),
                            });
                            return Ok(());
                        }
                    }
                }
                // The API server's typed lists (`PodList`, `NodeList`, `JobList`) leave `kind` and
                // `apiVersion` off their items, which are of the list's item kind; a plain `List`
                // names each item's own.
                let item_kind = m
                    .get("kind")
                    .and_then(Value::as_str)
                    .and_then(|k| k.strip_suffix("List"))
                    .filter(|k| !k.is_empty())
                    .map(str::to_string);
                if let Some(kind) = item_kind
                    && from < self.objects.len()
                {
                    let api_version = m.get("apiVersion").cloned();
                    self.objects.retag(from, &self.file, (kind, api_version));
                }
            }
            Value::Object(m) => {
                if items.is_some() {
                    // A top-level `items` in an object that is no List: its own field after all.
                    m.insert("items".into(), Value::Array(self.objects.pop(from)));
                }
                self.objects.push(&self.file, &value);
            }
            other => {
                self.error = Some(InputError::Parse {
                    path: self.file.to_string(),
                    doc,
                    message: format!("expected a Kubernetes object, found {}", kind_of(other)),
                });
            }
        }
        Ok(())
    }
}

/// At most `limit` bytes (`expected`: the size to make room for at once), or an error saying
/// which limit was hit: what the file is read into never grows past the limit, whatever the file
/// (`/dev/zero`, a FIFO) says its size is.
fn read_bytes_bounded(
    name: &str,
    reader: impl Read,
    expected: u64,
    limit: u64,
) -> Result<Vec<u8>, InputError> {
    let room = usize::try_from(expected.min(limit)).unwrap_or(0).saturating_add(1);
    let mut bytes = Vec::with_capacity(room);
    reader
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| InputError::Io { path: name.into(), source: e })?;
    if bytes.len() as u64 > limit {
        let message = if limit == MAX_INPUT_BYTES {
            format!("larger than {} MiB; split it into smaller files", limit >> 20)
        } else {
            format!("larger than {} MiB", limit >> 20)
        };
        return Err(InputError::Invalid { path: name.into(), message });
    }
    Ok(bytes)
}

/// At most `limit` bytes of UTF-8 text ([`read_bytes_bounded`]).
fn read_bounded(name: &str, reader: impl Read, expected: u64, limit: u64) -> Result<String, InputError> {
    let bytes = read_bytes_bounded(name, reader, expected, limit)?;
    String::from_utf8(bytes).map_err(|e| InputError::Invalid {
        path: name.into(),
        message: format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
    })
}

/// A side file's bytes (at most [`MAX_SIDE_FILE_BYTES`]): the policy file, a kubeconfig, a file
/// a kubeconfig names. Errors name the path.
pub fn read_side_bytes(path: &Path) -> Result<Vec<u8>, InputError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| InputError::Io { path: name.clone(), source: e })?;
    let len = file.metadata().map_or(0, |m| m.len());
    read_bytes_bounded(&name, file, len, MAX_SIDE_FILE_BYTES)
}

/// A side file's text ([`read_side_bytes`], UTF-8).
pub fn read_side_file(path: &Path) -> Result<String, InputError> {
    let name = path.display().to_string();
    let file = std::fs::File::open(path).map_err(|e| InputError::Io { path: name.clone(), source: e })?;
    let len = file.metadata().map_or(0, |m| m.len());
    read_bounded(&name, file, len, MAX_SIDE_FILE_BYTES)
}

/// Reads one file.
pub fn read_file(path: &Path) -> Result<Vec<Sourced>, InputError> {
    read_paths(&[path.to_path_buf()])
}

/// Parses YAML (one or many documents) or JSON; `List`s are flattened.
pub fn parse_text(name: &str, text: &str) -> Result<Vec<Sourced>, InputError> {
    let mut objects = Objects::default();
    objects.add_text(name.to_string(), text)?;
    Ok(objects.iter().collect())
}

/// JSON as the API server reads it with strict field validation (kubectl's default since 1.27):
/// a key given twice in one object is an error naming its path (serde_json alone keeps the last
/// value, so the first would vanish without a word). The YAML reader refuses duplicates the same
/// way, and nesting deeper than [`crate::yaml::MAX_DEPTH`] the same way. A top-level array's
/// elements are documents, and a top-level object's `items` go to the sink one by one.
fn strict_json_into(text: &str, sink: &mut impl crate::yaml::Sink) -> Result<(), serde_json::Error> {
    use serde::de::DeserializeSeed;
    let mut de = serde_json::Deserializer::from_str(text);
    Root(sink).deserialize(&mut de)?;
    de.end()
}

/// The top-level JSON value, handed to a sink.
struct Root<'s, S>(&'s mut S);

impl<'de, S: crate::yaml::Sink> serde::de::DeserializeSeed<'de> for Root<'_, S> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de, S: crate::yaml::Sink> serde::de::Visitor<'de> for Root<'_, S> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object or array")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(v) = seq.next_element_seed(Strict::new(&Segment::Index(&Segment::Root, i), 1))? {
            i += 1;
            self.0.document(i, v, None).map_err(serde::de::Error::custom)?;
        }
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut out = serde_json::Map::new();
        let mut streamed = None;
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            let v = if key == "items" {
                let (v, n) = map.next_value_seed(Items(&mut *self.0))?;
                streamed = n;
                v
            } else {
                map.next_value_seed(Strict::new(&Segment::Key(&Segment::Root, &key), 1))?
            };
            out.insert(key, v);
        }
        self.0.document(1, Value::Object(out), streamed).map_err(serde::de::Error::custom)
    }
}

/// A top-level object's `items`: when a list, each element goes to the sink as it is read, and
/// `null` stands in the object (with how many went); anything else is read as it is.
struct Items<'s, S>(&'s mut S);

impl<'de, S: crate::yaml::Sink> serde::de::DeserializeSeed<'de> for Items<'_, S> {
    type Value = (Value, Option<usize>);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

macro_rules! forward_to_strict {
    ($($f:ident($t:ty)),*) => {$(
        fn $f<E: serde::de::Error>(self, v: $t) -> Result<Self::Value, E> {
            Ok((Strict::new(&Segment::Key(&Segment::Root, "items"), 1).$f(v)?, None))
        }
    )*};
}

impl<'de, S: crate::yaml::Sink> serde::de::Visitor<'de> for Items<'_, S> {
    type Value = (Value, Option<usize>);

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    forward_to_strict!(
        visit_bool(bool),
        visit_i64(i64),
        visit_u64(u64),
        visit_f64(f64),
        visit_str(&str),
        visit_string(String)
    );
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok((Value::Null, None))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Ok((Strict::new(&Segment::Key(&Segment::Root, "items"), 1).visit_map(map)?, None))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let within = Segment::Key(&Segment::Root, "items");
        let mut n = 0;
        while let Some(v) = seq.next_element_seed(Strict::new(&Segment::Index(&within, n), 2))? {
            n += 1;
            self.0.item(v);
        }
        Ok((Value::Null, Some(n)))
    }
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

/// A JSON value read with every object's keys checked for duplicates, at `depth` levels of nesting.
struct Strict<'a> {
    at: &'a Segment<'a>,
    depth: usize,
}

impl<'a> Strict<'a> {
    fn new(at: &'a Segment<'a>, depth: usize) -> Self {
        Strict { at, depth }
    }

    /// The next level in: an error past [`crate::yaml::MAX_DEPTH`].
    fn deeper<E: serde::de::Error>(&self) -> Result<usize, E> {
        if self.depth >= crate::yaml::MAX_DEPTH {
            return Err(E::custom(format_args!("nested deeper than {} levels", crate::yaml::MAX_DEPTH)));
        }
        Ok(self.depth + 1)
    }
}

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
        let depth = self.deeper()?;
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element_seed(Strict::new(&Segment::Index(self.at, out.len()), depth))? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let depth = self.deeper()?;
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let within = match self.at {
                    Segment::Root => String::new(),
                    up => format!("{up}: "),
                };
                return Err(serde::de::Error::custom(format_args!("{within}duplicate key {key:?}")));
            }
            let v = map.next_value_seed(Strict::new(&Segment::Key(self.at, &key), depth))?;
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

    /// A List's items are stored one by one as the reader finishes each; what decides how they
    /// read (the list's kind, which `kubectl get` writes after the items) is applied afterwards.
    #[test]
    fn streamed_list_items_read_as_the_whole_list_would() {
        // A top-level `items` in an object that is no List stays that object's field.
        let yaml =
            "kind: Pod\n---\nkind: Foo\nitems: [{a: 1}, {b: 2}]\nmetadata: {name: f}\n---\nkind: Node\n";
        let objs = parse_text("x.yaml", yaml).unwrap();
        let objs: Vec<Value> = objs.into_iter().map(|s| s.object).collect();
        assert_eq!(
            objs,
            [
                serde_json::json!({"kind": "Pod"}),
                serde_json::json!({"kind": "Foo", "items": [{"a": 1}, {"b": 2}], "metadata": {"name": "f"}}),
                serde_json::json!({"kind": "Node"})
            ]
        );
        // An anchored `items` is read whole, then flattened the same way.
        let objs = parse_text("x.yaml", "apiVersion: v1\nkind: PodList\nitems: &i\n- metadata: {name: p}\n")
            .unwrap();
        assert_eq!((objs.len(), objs[0].object["kind"].as_str()), (1, Some("Pod")));
        // The list's item kind applies to its own items only, not to the next document's objects.
        let yaml = "kind: Pod\nmetadata: {name: a}\n---\nitems:\n- metadata: {name: n}\nkind: NodeList\napiVersion: v1\n---\nmetadata: {name: x}\n---\nkind: List\nitems: []\n";
        let objs = parse_text("m.yaml", yaml).unwrap();
        let kinds: Vec<Option<&str>> = objs.iter().map(|s| s.object["kind"].as_str()).collect();
        assert_eq!(kinds, [Some("Pod"), Some("Node"), None]);
        assert_eq!(objs[1].object["apiVersion"], "v1");
        // JSON the same way, and a List's `items` given twice is an error.
        let json = r#"{"apiVersion": "v1", "items": [{"metadata": {"name": "n"}}, {"kind": "Pod"}], "kind": "NodeList"}"#;
        let objs = parse_text("l.json", json).unwrap();
        let kinds: Vec<Option<&str>> = objs.iter().map(|s| s.object["kind"].as_str()).collect();
        assert_eq!(kinds, [Some("Node"), Some("Pod")]);
        let json = r#"{"kind": "Foo", "items": [1, {"a": [2]}], "x": {}}"#;
        assert_eq!(
            parse_text("f.json", json).unwrap()[0].object,
            serde_json::from_str::<Value>(json).unwrap()
        );
        let e = parse_text("d.yaml", "kind: List\nitems: []\nitems: []\n").unwrap_err().to_string();
        assert_eq!(e, "d.yaml: document 1: line 3: key \"items\" already set in map");
        // Objects from two files keep their file names.
        let mut objects = Objects::default();
        objects.add_text("a.yaml".into(), "kind: List\nitems: [{kind: Pod}]\n").unwrap();
        objects.add_text("b.json".into(), r#"[{"kind": "Node"}]"#).unwrap();
        let files: Vec<String> = objects.iter().map(|s| s.file).collect();
        assert_eq!(files, ["a.yaml", "b.json"]);
    }

    /// JSON nests no deeper than YAML may: an error naming the limit and the line.
    #[test]
    fn json_nesting_is_bounded_like_yaml() {
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert!(
            parse_text("ok.json", &ok).is_err_and(|e| e.to_string().contains("expected a Kubernetes object"))
        );
        let deep = format!("{{\"kind\": \"Pod\",\n\"spec\": {}1{}}}", "[".repeat(100), "]".repeat(100));
        let e = parse_text("deep.json", &deep).unwrap_err().to_string();
        assert_eq!(e, "deep.json: document 1: nested deeper than 100 levels at line 2 column 108");
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
        let err = read_bounded("big", std::io::repeat(b'a').take(MAX_INPUT_BYTES + 10), 0, MAX_INPUT_BYTES)
            .unwrap_err();
        assert_eq!(err.to_string(), "big: larger than 64 MiB; split it into smaller files");
        let err = read_bounded("bin", &[0x61, 0xff, 0x00][..], 3, MAX_INPUT_BYTES).unwrap_err();
        assert_eq!(err.to_string(), "bin: not UTF-8 text (invalid byte at offset 1)");
    }

    /// Side files (the policy, a kubeconfig and what it names) are bounded too: `/dev/zero`
    /// reports no size and never ends; reading it stops one byte past the limit.
    #[test]
    fn side_files_are_bounded_whatever_they_say_their_size_is() {
        let zero = Path::new("/dev/zero");
        if zero.exists() {
            let err = read_side_file(zero).unwrap_err().to_string();
            assert_eq!(err, "/dev/zero: larger than 16 MiB");
            assert_eq!(read_side_bytes(zero).unwrap_err().to_string(), "/dev/zero: larger than 16 MiB");
        }
        let dir = tempfile::tempdir().unwrap();
        let small = dir.path().join("policy.yaml");
        std::fs::write(&small, "scoring: spread\n").unwrap();
        assert_eq!(read_side_file(&small).unwrap(), "scoring: spread\n");
        let missing = read_side_file(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(missing.contains("nope"), "{missing}");
    }

    /// `-f` with many files: each within 64 MiB, and all of them within 256 MiB, refused before
    /// any is read when their sizes say so (sparse files here: nothing is written or parsed).
    #[test]
    fn many_files_are_bounded_together() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            let f = std::fs::File::create(dir.path().join(format!("f{i}.yaml"))).unwrap();
            f.set_len(MAX_INPUT_BYTES - 1).unwrap();
        }
        let err = read(&[dir.path().to_path_buf()]).unwrap_err().to_string();
        assert!(err.ends_with("the input is larger than 256 MiB in all; give fewer files at once"), "{err}");
        assert!(err.starts_with(&dir.path().display().to_string()), "names the input: {err}");
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
