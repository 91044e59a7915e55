//! `kubectl gang snapshot`: every object the plugin reads, as one `v1 List`, for offline diagnosis.

use scheduler_core::cluster::Compact;
use serde_json::Value;

use crate::cli::{Format, Global};
use crate::output::Output;
use crate::world::runtime;
use crate::{input, live};

/// `kubectl gang snapshot`: every object the plugin reads, as one `v1 List`.
pub fn run(g: &Global) -> anyhow::Result<Output> {
    let format = g.output;
    let (stdout, count) = match &g.cluster {
        Some(path) => list_text(input::read(std::slice::from_ref(path))?.iter().map(|s| s.object), format)?,
        None => {
            let objects = runtime()?.block_on(async {
                let live = live::connect(g.kubeconfig.as_deref(), g.context.as_deref()).await?;
                live::fetch(&live).await
            })?;
            list_text(objects.iter().map(Compact::decode), format)?
        }
    };
    Ok(Output { stdout, stderr: format!("{count} objects\n"), code: 0 })
}

/// `objects` (managed fields dropped) as one `v1 List` in JSON (`-o json`) or YAML, written item by
/// item: the same text as serializing the whole list at once, without holding it as one value.
fn list_text(
    objects: impl Iterator<Item = Value>,
    format: Option<Format>,
) -> anyhow::Result<(String, usize)> {
    let json = format == Some(Format::Json);
    let mut out = String::from(if json {
        "{\n  \"apiVersion\": \"v1\",\n  \"items\": ["
    } else {
        "apiVersion: v1\nitems:"
    });
    let mut count = 0;
    for mut o in objects {
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
        }
        if json {
            out.push_str(if count == 0 { "\n" } else { ",\n" });
            for (i, line) in serde_json::to_string_pretty(&o)?.lines().enumerate() {
                if i > 0 {
                    out.push('\n');
                }
                out.push_str("    ");
                out.push_str(line);
            }
        } else {
            if count == 0 {
                out.push('\n');
            }
            for (i, line) in serde_norway::to_string(&o)?.lines().enumerate() {
                out.push_str(match (i, line.is_empty()) {
                    (0, _) => "- ",
                    (_, false) => "  ",
                    (_, true) => "",
                });
                out.push_str(line);
                out.push('\n');
            }
        }
        count += 1;
    }
    out.push_str(match (json, count) {
        (true, 0) => "],\n  \"kind\": \"List\",\n  \"metadata\": {}\n}\n",
        (true, _) => "\n  ],\n  \"kind\": \"List\",\n  \"metadata\": {}\n}\n",
        (false, 0) => " []\nkind: List\nmetadata: {}\n",
        (false, _) => "kind: List\nmetadata: {}\n",
    });
    Ok((out, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `snapshot` writes its List item by item: the text must be what serializing the whole list
    /// writes, in both formats, whatever the items hold (block scalars, empty values, nesting).
    #[test]
    fn a_list_written_item_by_item_is_the_whole_lists_text() {
        let items = [
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "managedFields": [{"x": 1}]},
                "data": {"script": "line one\n  indented\n\nafter a blank\n", "empty": "", "lead": "  spaces",
                         "quoted": "yes", "num": "0644", "multi": "a\nb"}}),
            serde_json::json!({"kind": "Pod", "metadata": {"name": "p", "labels": {}}, "spec": {"containers": [], "n": [1, [2, [3]], {}]}}),
            serde_json::json!({"kind": "Node", "status": {"allocatable": {"cpu": "8"}}, "e": null, "f": 1.5}),
        ];
        for format in [None, Some(Format::Json), Some(Format::Yaml)] {
            for n in 0..=items.len() {
                let items = &items[..n];
                let (text, count) = list_text(items.iter().cloned(), format).unwrap();
                let mut whole: Vec<Value> = items.to_vec();
                for o in &mut whole {
                    if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
                        m.remove("managedFields");
                    }
                }
                let list =
                    serde_json::json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": whole});
                let want = match format {
                    Some(Format::Json) => serde_json::to_string_pretty(&list).unwrap() + "\n",
                    _ => serde_norway::to_string(&list).unwrap(),
                };
                assert_eq!(text, want, "{format:?}, {n} items");
                assert_eq!(count, n);
            }
        }
    }
}
