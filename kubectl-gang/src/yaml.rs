//! YAML read as kubectl reads it. kubectl turns YAML into JSON with sigs.k8s.io/yaml, which parses
//! with go-yaml v2: YAML 1.1 scalars. So a plain `0644` is the octal integer 420, `0x1F` is 31,
//! `1_000` is 1000, `yes`/`on`/`y` are `true` and `no`/`off`/`n` are `false`, `~` is null, while
//! any quoted or block scalar stays a string. Keys become strings (`1: a` → `"1"`), a key defined
//! twice in one mapping is an error naming its line (as kubectl's strict conversion reports it),
//! and `<<` merges a mapping's keys in.
//!
//! The reader is event-driven with an explicit stack: time and memory are linear in the input.
//! Nesting deeper than [`MAX_DEPTH`] is refused (Kubernetes objects nest a few dozen levels at
//! most), and what anchors and aliases copy is bounded by the input's own size (at least
//! [`MIN_ALIAS_BUDGET`]; the "billion laughs"), so the values read stay proportional to the text.
//! An anchored node is copied when it is defined (an alias may name it later), so the copy counts
//! then, whether or not any alias follows: 95 nested anchors and no alias would otherwise copy the
//! innermost node 95 times (a 7.9 MB file took 6 GB).
//! A `List`'s items are handed over one by one ([`Sink`]), never held all together as values.

use serde_json::{Map, Number, Value};
use yaml_rust2::parser::{Event, Parser};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// The deepest nesting of mappings and sequences a document may have.
pub const MAX_DEPTH: usize = 100;
/// What aliases may copy in, in all documents together, in bytes of text they stand for (every
/// node counts a few bytes, plus its strings): the input's length, or this if larger.
pub const MIN_ALIAS_BUDGET: usize = 1 << 20;
/// The text one copied node stands for at the least (`{}`, `a`, `, `).
const ALIAS_NODE_BYTES: usize = 4;

/// A YAML document that cannot be read: where, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct YamlError {
    /// 1-based document number in the stream.
    pub doc: usize,
    /// 1-based line.
    pub line: usize,
    pub message: String,
}

enum Frame {
    Seq { items: Vec<Value>, anchor: usize, streamed: Option<usize> },
    Map { map: Map<String, Value>, key: Option<(String, usize)>, anchor: usize, merges: Vec<Value> },
}

/// Where a stream's documents go as each is finished, so that a stream of many objects is never
/// held as values all at once.
pub trait Sink {
    /// One item of a document's top-level `items` sequence (a `List`'s objects), finished.
    fn item(&mut self, item: Value);
    /// A document, finished. When `items` is `Some(n)`, its top-level `items` sequence went to
    /// [`Sink::item`] item by item (`n` of them) and the document holds `null` in its place.
    fn document(&mut self, doc: usize, value: Value, items: Option<usize>) -> Result<(), YamlError>;
}

/// Every document of a YAML stream as JSON values (empty documents are `null`).
pub fn documents(text: &str) -> Result<Vec<Value>, YamlError> {
    struct Collect {
        docs: Vec<Value>,
        items: Vec<Value>,
    }
    impl Sink for Collect {
        fn item(&mut self, item: Value) {
            self.items.push(item);
        }
        fn document(&mut self, _: usize, mut value: Value, items: Option<usize>) -> Result<(), YamlError> {
            if let (Some(_), Some(map)) = (items, value.as_object_mut()) {
                map.insert("items".into(), Value::Array(std::mem::take(&mut self.items)));
            }
            self.docs.push(value);
            Ok(())
        }
    }
    let mut sink = Collect { docs: Vec::new(), items: Vec::new() };
    read(text, &mut sink)?;
    Ok(sink.docs)
}

/// Reads a YAML stream into `sink`, document by document; the items of a document's top-level
/// `items` sequence (what `kubectl get -o yaml` prints: a `List`) one by one.
pub fn read(text: &str, sink: &mut impl Sink) -> Result<(), YamlError> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors = Anchors {
        values: std::collections::HashMap::new(),
        budget: text.len().max(MIN_ALIAS_BUDGET),
        copied: 0,
    };
    let mut current: Option<Value> = None;
    let mut doc = 1;
    // Items of this document's top-level `items` sequence sent to the sink.
    let mut streamed: Option<usize> = None;
    loop {
        let (event, mark) = parser.next_token().map_err(|e| YamlError {
            doc,
            line: e.marker().line(),
            // The scanner counts flow levels in a byte and reads ahead of the events this
            // reader counts: past 255 `[` or `{` it stops first, and the limit is still ours.
            message: match e.info() {
                "recursion limit exceeded" => format!("nested deeper than {MAX_DEPTH} levels"),
                info => info.to_string(),
            },
        })?;
        let fail = |message: String| YamlError { doc, line: line_of(&mark), message };
        let value = match event {
            Event::StreamEnd => break,
            Event::StreamStart | Event::Nothing => continue,
            Event::DocumentStart => {
                current = None;
                anchors.values.clear();
                continue;
            }
            Event::DocumentEnd => {
                sink.document(doc, current.take().unwrap_or(Value::Null), streamed.take())?;
                doc += 1;
                continue;
            }
            Event::SequenceStart(anchor, _) | Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(fail(format!("nested deeper than {MAX_DEPTH} levels")));
                }
                // A List's items go to the sink as each is finished (not when anchored: an alias
                // would copy the whole sequence).
                let top_items = stack.len() == 1
                    && anchor == 0
                    && matches!(&stack[0], Frame::Map { key: Some((k, _)), .. } if k == "items");
                stack.push(match event {
                    Event::SequenceStart(..) => {
                        Frame::Seq { items: Vec::new(), anchor, streamed: top_items.then_some(0) }
                    }
                    _ => Frame::Map { map: Map::new(), key: None, anchor, merges: Vec::new() },
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { streamed: Some(n), .. }) => {
                    streamed = Some(n);
                    Value::Null
                }
                Some(Frame::Seq { items, anchor, streamed: None }) => {
                    anchors.remember(anchor, Value::Array(items)).map_err(&fail)?
                }
                _ => return Err(fail("unbalanced sequence".into())),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map { mut map, anchor, merges, .. }) => {
                    for merged in merges {
                        let sources = match merged {
                            Value::Array(items) => items,
                            other => vec![other],
                        };
                        for source in sources {
                            let Value::Object(source) = source else {
                                return Err(fail("a merge key (<<) must name a mapping".into()));
                            };
                            for (k, v) in source {
                                map.entry(k).or_insert(v);
                            }
                        }
                    }
                    anchors.remember(anchor, Value::Object(map)).map_err(&fail)?
                }
                _ => return Err(fail("unbalanced mapping".into())),
            },
            Event::Alias(id) => anchors.alias(id).map_err(&fail)?,
            Event::Scalar(text, style, anchor, tag) => {
                let is_key = matches!(stack.last(), Some(Frame::Map { key: None, .. }));
                if is_key {
                    let key = if style == TScalarStyle::Plain && tag.is_none() {
                        key_string(resolve(&text).map_err(&fail)?, &text)
                    } else {
                        text
                    };
                    if let Some(Frame::Map { map, key: slot, .. }) = stack.last_mut() {
                        if map.contains_key(&key) && key != "<<" {
                            return Err(fail(format!("key {key:?} already set in map")));
                        }
                        *slot = Some((key, line_of(&mark)));
                    }
                    continue;
                }
                let str_tag = tag.as_ref().is_some_and(|t| t.suffix == "str");
                let v = if style == TScalarStyle::Plain && !str_tag {
                    resolve(&text).map_err(&fail)?
                } else {
                    Value::String(text)
                };
                anchors.remember(anchor, v).map_err(&fail)?
            }
        };
        // A finished node goes into its parent, or becomes the document.
        match stack.last_mut() {
            None => current = Some(value),
            Some(Frame::Seq { streamed: Some(n), .. }) => {
                *n += 1;
                sink.item(value);
            }
            Some(Frame::Seq { items, .. }) => items.push(value),
            Some(Frame::Map { map, key, merges, .. }) => match key.take() {
                Some((k, _)) if k == "<<" => merges.push(value),
                Some((k, _)) => {
                    map.insert(k, value);
                }
                None => return Err(fail("a mapping key must be a scalar".into())),
            },
        }
    }
    if let Some(v) = current.take() {
        sink.document(doc, v, streamed.take())?;
    }
    Ok(())
}

fn line_of(mark: &Marker) -> usize {
    mark.line().max(1)
}

/// The anchored nodes of a document, and what copying them has cost: each anchored node is copied
/// once when it is defined and once per alias, and every copy counts against one budget (the
/// input's size, at least [`MIN_ALIAS_BUDGET`]), measured before it is made.
struct Anchors {
    values: std::collections::HashMap<usize, Value>,
    budget: usize,
    copied: usize,
}

impl Anchors {
    /// Counts a copy of `v` against the budget (`copied` so far); an error once it is spent.
    fn charge(budget: usize, copied: &mut usize, v: &Value) -> Result<(), String> {
        let room = budget.saturating_sub(*copied);
        let size = text_size(v, room);
        if size > room {
            return Err(format!(
                "anchors and aliases copy more than {budget} bytes (the input's size, or 1 MiB)"
            ));
        }
        *copied += size;
        Ok(())
    }

    /// `v`, kept (a copy, counted) under `anchor` when it has one.
    fn remember(&mut self, anchor: usize, v: Value) -> Result<Value, String> {
        if anchor > 0 {
            Anchors::charge(self.budget, &mut self.copied, &v)?;
            self.values.insert(anchor, v.clone());
        }
        Ok(v)
    }

    /// A copy (counted before it is made) of the node anchored as `id`.
    fn alias(&mut self, id: usize) -> Result<Value, String> {
        let Some(v) = self.values.get(&id) else { return Err("unknown anchor".into()) };
        Anchors::charge(self.budget, &mut self.copied, v)?;
        Ok(v.clone())
    }
}

/// The least text `v` could be written in — what a copy of it costs — counted up to `limit`: past
/// it, some number above `limit` (so measuring a huge node costs no more than the budget left).
fn text_size(v: &Value, limit: usize) -> usize {
    let mut n = 0usize;
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        if n > limit {
            return n;
        }
        n = n.saturating_add(ALIAS_NODE_BYTES);
        match v {
            Value::Array(a) => todo.extend(a.iter()),
            Value::Object(m) => {
                n = n.saturating_add(m.keys().map(String::len).sum());
                todo.extend(m.values());
            }
            Value::String(s) => n = n.saturating_add(s.len()),
            _ => {}
        }
    }
    n
}

/// A resolved key as the JSON key sigs.k8s.io/yaml writes: numbers and booleans in their
/// canonical text, null as `"null"`, strings as they are.
fn key_string(v: Value, text: &str) -> String {
    match v {
        Value::String(s) => s,
        Value::Null if text.is_empty() => String::new(),
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => text.to_string(),
    }
}

/// A plain scalar as go-yaml v2 resolves it (YAML 1.1), converted to JSON as sigs.k8s.io/yaml
/// converts it.
pub fn resolve(s: &str) -> Result<Value, String> {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Ok(Value::Null),
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            return Ok(Value::Bool(true));
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            return Ok(Value::Bool(false));
        }
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" | "-.inf"
        | "-.Inf" | "-.INF" => {
            return Err(format!("{s} cannot be written as JSON (kubectl refuses it too)"));
        }
        _ => {}
    }
    let first = s.as_bytes()[0];
    if first == b'.' {
        return Ok(match s.parse::<f64>() {
            Ok(f)
                if f.is_finite()
                    && s[1..]
                        .bytes()
                        .all(|b| b.is_ascii_digit() || matches!(b, b'e' | b'E' | b'+' | b'-')) =>
            {
                float(f)
            }
            _ => Value::String(s.into()),
        });
    }
    if !(first.is_ascii_digit() || first == b'+' || first == b'-') {
        return Ok(Value::String(s.into()));
    }
    let plain: String = s.chars().filter(|&c| c != '_').collect();
    if let Some(n) = go_int(&plain) {
        return Ok(n);
    }
    if yaml_style_float(&plain)
        && let Ok(f) = plain.parse::<f64>()
    {
        if !f.is_finite() {
            return Err(format!("{s} is too large for a number"));
        }
        return Ok(float(f));
    }
    Ok(Value::String(s.into()))
}

/// A float as Go's JSON encoder writes it and a decoder reads it back: integral values below 1e21
/// are written without a fraction, so they read back as integers.
fn float(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        if f >= i64::MIN as f64 && f <= i64::MAX as f64 {
            return Value::from(f as i64);
        }
        if f >= 0.0 && f <= u64::MAX as f64 {
            return Value::from(f as u64);
        }
    }
    Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// Go's `strconv.ParseInt(s, 0, 64)`, then `ParseUint`: an optional sign, then `0x`/`0X` hex,
/// `0o`/`0O` or a leading `0` octal, `0b`/`0B` binary, or decimal.
fn go_int(s: &str) -> Option<Value> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(d) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = body.strip_prefix("0o").or_else(|| body.strip_prefix("0O")) {
        (8, d)
    } else if let Some(d) = body.strip_prefix("0b").or_else(|| body.strip_prefix("0B")) {
        (2, d)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let magnitude = u128::from_str_radix(digits, radix).ok()?;
    if negative {
        let v = i128::try_from(magnitude).ok()?.checked_neg()?;
        i64::try_from(v).ok().map(Value::from)
    } else if let Ok(v) = i64::try_from(magnitude) {
        Some(Value::from(v))
    } else if s.starts_with('+') {
        None // ParseUint takes no sign.
    } else {
        u64::try_from(magnitude).ok().map(Value::from)
    }
}

/// go-yaml v2's float pattern: `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`.
fn yaml_style_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - start
    };
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    } else {
        if digits(&mut i) == 0 {
            return false;
        }
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> Value {
        documents(text).unwrap().remove(0)
    }

    /// Each row: a plain scalar and the JSON that kubectl sends for it (go-yaml v2 resolution,
    /// sigs.k8s.io/yaml conversion), written from the rules, not from their tests.
    #[test]
    fn plain_scalars_resolve_as_yaml_1_1() {
        let cases = [
            ("0644", json!(420)),
            ("0777", json!(511)),
            ("0o17", json!(15)),
            ("0x1F", json!(31)),
            ("-0x10", json!(-16)),
            ("0b101", json!(5)),
            ("1_000", json!(1000)),
            ("+12", json!(12)),
            ("-7", json!(-7)),
            ("0", json!(0)),
            ("08", json!(8)),
            ("1e3", json!(1000)),
            ("1.5", json!(1.5)),
            (".5", json!(0.5)),
            ("1e-308", json!(1e-308)),
            ("18446744073709551615", json!(18446744073709551615u64)),
            ("yes", json!(true)),
            ("On", json!(true)),
            ("y", json!(true)),
            ("NO", json!(false)),
            ("off", json!(false)),
            ("~", Value::Null),
            ("Null", Value::Null),
            ("1Gi", json!("1Gi")),
            ("500m", json!("500m")),
            ("2001-12-14", json!("2001-12-14")),
            ("0x", json!("0x")),
            ("0xZZ", json!("0xZZ")),
            ("yes please", json!("yes please")),
            ("1.2.3", json!("1.2.3")),
        ];
        for (text, want) in cases {
            assert_eq!(one(&format!("v: {text}\n"))["v"], want, "{text}");
        }
    }

    #[test]
    fn quoted_and_block_scalars_stay_strings() {
        let v = one("a: '0644'\nb: \"yes\"\nc: !!str 0x10\nd: |\n  0644\n");
        assert_eq!(v, json!({"a": "0644", "b": "yes", "c": "0x10", "d": "0644\n"}));
    }

    #[test]
    fn keys_become_strings_and_duplicates_name_their_line() {
        assert_eq!(one("1: a\ntrue: b\n~: c\n"), json!({"1": "a", "true": "b", "null": "c"}));
        let err = documents("kind: Pod\nmetadata:\n  name: a\n  name: b\n").unwrap_err();
        assert_eq!(err.line, 4, "{err}");
        assert_eq!(err.to_string(), "line 4: key \"name\" already set in map");
    }

    #[test]
    fn merge_keys_and_aliases() {
        let v = one("base: &b {a: 1, b: 2}\nuse:\n  <<: *b\n  b: 3\n");
        assert_eq!(v["use"], json!({"a": 1, "b": 3}));
        // YAML 1.1: a plain `y` key is the boolean true, so JSON gets "true" (as kubectl sends it).
        assert_eq!(one("y: 1\n"), json!({"true": 1}));
    }

    #[test]
    fn depth_and_alias_expansion_are_bounded() {
        for deep in
            ["[".repeat(200_000), format!("a: {}", "[".repeat(300)), format!("a: {}", "{a: ".repeat(300))]
        {
            let err = documents(&deep).unwrap_err();
            assert_eq!((err.line, err.message.as_str()), (1, "nested deeper than 100 levels"), "{err}");
        }
        let block: String = (0..150).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        let err = documents(&block).unwrap_err();
        assert!(err.message.contains("nested deeper than 100"), "{err}");
        let mut laughs = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            laughs.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n",
                p = i - 1
            ));
        }
        let err = documents(&laughs).unwrap_err();
        assert!(err.message.contains("anchors and aliases copy more than"), "{err}");
    }

    /// Nested anchors and no alias at all: each anchored node is copied when it is defined, so the
    /// innermost one is copied once per anchor around it. Those copies count: 95 nested anchors
    /// around ~20 KiB are refused, where they used to be copied 95 times (6 GB for a 7.9 MB file).
    #[test]
    fn anchors_count_when_they_are_defined_not_only_when_used() {
        let leaf: String = (0..2_000).map(|i| format!("k{i}: v\n")).collect::<String>();
        let indent = |d: usize, text: &str| -> String {
            text.lines().map(|l| format!("{}{l}\n", "  ".repeat(d))).collect()
        };
        let mut doc = String::new();
        for d in 0..95 {
            doc.push_str(&format!("{}a{d}: &x{d}\n", "  ".repeat(d)));
        }
        doc.push_str(&indent(95, &leaf));
        let err = documents(&doc).unwrap_err();
        assert!(err.message.contains("anchors and aliases copy more than"), "{err}");
        // A few anchors (the common use: a shared block of labels) read as ever.
        let ok = one("base: &b {app: web}\nother: &o [1, 2]\nuse: *b\n");
        assert_eq!(ok["use"], json!({"app": "web"}));
        // The anchored copies of one node count its size, once per anchor: within the budget when
        // they add up to less than the input (1 MiB at least).
        let small = format!("a: &a\n{}", indent(1, &leaf));
        assert!(documents(&small).is_ok());
    }

    #[test]
    fn documents_and_empty_documents() {
        let docs = documents("a: 1\n---\n---\nb: 2\n").unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), Value::Null, json!({"b": 2})]);
        assert!(documents("").unwrap().is_empty());
    }
}
