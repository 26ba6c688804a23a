//! The protocol schema of one Codex version (`codex app-server generate-json-schema
//! --experimental`), reduced to what a driver depends on: the client methods, server
//! notifications and server requests, and the fields of every named type. Two reductions diff
//! into named differences.

use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const GENERATION_BOUND: Duration = Duration::from_secs(120);

/// One version's protocol, as names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Protocol {
    pub(crate) client_methods: BTreeSet<String>,
    pub notifications: BTreeSet<String>,
    pub(crate) server_requests: BTreeSet<String>,
    /// Type name → field name → the field's schema (descriptions dropped).
    pub(crate) types: BTreeMap<String, BTreeMap<String, Value>>,
}

/// Run `codex app-server generate-json-schema --experimental --out OUT` (bounded).
pub fn generate(codex: &Path, out: &Path) -> Result<()> {
    generate_with(codex, out, &["--experimental"])
}

/// The schema a client that declared no `experimentalApi` is held to: without
/// `--experimental`.
pub(crate) fn generate_plain(codex: &Path, out: &Path) -> Result<()> {
    generate_with(codex, out, &[])
}

fn generate_with(codex: &Path, out: &Path, flags: &[&str]) -> Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut child = Command::new(codex)
        .args(["app-server", "generate-json-schema"])
        .args(flags)
        .arg("--out")
        .arg(out)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", codex.display()))?;
    let Some(status) = sandbox::system::wait_bounded(&mut child, GENERATION_BOUND)? else {
        bail!(
            "{} generate-json-schema did not finish within {GENERATION_BOUND:?}",
            codex.display()
        );
    };
    if !status.success() {
        bail!("{} generate-json-schema failed: {status}", codex.display());
    }
    Ok(())
}

fn read(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The `method` names of a union file (`ClientRequest.json`, …).
fn methods(document: &Value) -> BTreeSet<String> {
    document["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|branch| {
            branch["properties"]["method"]["enum"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|m| m.as_str().map(str::to_string))
        .collect()
}

/// A schema without its prose, so a reworded description is no change.
fn without_descriptions(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !matches!(k.as_str(), "description" | "title"))
                .map(|(k, v)| (k.clone(), without_descriptions(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// The fields of a type schema: its `properties`, and those of each `oneOf`/`anyOf` branch
/// (prefixed with the branch's title or index), so a union's variants are compared too.
fn fields(schema: &Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    if let Some(properties) = schema["properties"].as_object() {
        for (name, field) in properties {
            out.insert(name.clone(), without_descriptions(field));
        }
    }
    for key in ["oneOf", "anyOf"] {
        for (index, branch) in schema[key].as_array().into_iter().flatten().enumerate() {
            let label = branch["title"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{key}[{index}]"));
            for (name, field) in fields(branch) {
                out.insert(format!("{label}.{name}"), field);
            }
            if branch.get("properties").is_none() && !branch.is_null() {
                out.insert(label, without_descriptions(branch));
            }
        }
    }
    if out.is_empty() && !schema.is_null() {
        // An enum or a scalar: the whole schema is its one "field".
        out.insert("(value)".into(), without_descriptions(schema));
    }
    out
}

/// Read a generated schema folder.
pub fn load(dir: &Path) -> Result<Protocol> {
    let mut protocol = Protocol {
        client_methods: methods(&read(&dir.join("ClientRequest.json"))?),
        notifications: methods(&read(&dir.join("ServerNotification.json"))?),
        server_requests: methods(&read(&dir.join("ServerRequest.json"))?),
        types: BTreeMap::new(),
    };
    let mut files = Vec::new();
    for sub in ["", "v1", "v2"] {
        let folder = dir.join(sub);
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    for path in files {
        let document = read(&path)?;
        if let Some(definitions) = document["definitions"].as_object() {
            for (name, schema) in definitions {
                protocol
                    .types
                    .entry(name.clone())
                    .or_insert_with(|| fields(schema));
            }
        }
        // A bundle of definitions without a shape of its own (e.g. `v2/…`'s index) is no type.
        let own_shape = ["properties", "oneOf", "anyOf", "enum", "type"]
            .iter()
            .any(|k| document.get(*k).is_some());
        if let (Some(title), true) = (document["title"].as_str(), own_shape) {
            protocol
                .types
                .entry(title.to_string())
                .or_insert_with(|| fields(&document));
        }
    }
    Ok(protocol)
}

/// One named difference between two protocols.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Change {
    Added {
        kind: &'static str,
        name: String,
    },
    Removed {
        kind: &'static str,
        name: String,
    },
    FieldAdded {
        ty: String,
        field: String,
    },
    FieldRemoved {
        ty: String,
        field: String,
    },
    FieldChanged {
        ty: String,
        field: String,
        from: String,
        to: String,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Added { kind, name } => write!(f, "+ {kind} `{name}`"),
            Change::Removed { kind, name } => write!(f, "- {kind} `{name}`"),
            Change::FieldAdded { ty, field } => write!(f, "+ field `{ty}.{field}`"),
            Change::FieldRemoved { ty, field } => write!(f, "- field `{ty}.{field}`"),
            Change::FieldChanged {
                ty,
                field,
                from,
                to,
            } => {
                write!(f, "~ field `{ty}.{field}`: {from} → {to}")
            }
        }
    }
}

fn set_diff(
    kind: &'static str,
    old: &BTreeSet<String>,
    new: &BTreeSet<String>,
    out: &mut Vec<Change>,
) {
    for name in new.difference(old) {
        out.push(Change::Added {
            kind,
            name: name.clone(),
        });
    }
    for name in old.difference(new) {
        out.push(Change::Removed {
            kind,
            name: name.clone(),
        });
    }
}

/// A field schema, short enough for one report line.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.len() > 160 {
        format!("{}…", &text[..text.floor_char_boundary(160)])
    } else {
        text
    }
}

/// Every difference from `old` (the pin) to `new`: methods, notifications and server requests
/// added or removed; types added or removed; fields added, removed or changed.
pub(crate) fn diff(old: &Protocol, new: &Protocol) -> Vec<Change> {
    let mut out = Vec::new();
    set_diff(
        "client method",
        &old.client_methods,
        &new.client_methods,
        &mut out,
    );
    set_diff(
        "notification",
        &old.notifications,
        &new.notifications,
        &mut out,
    );
    set_diff(
        "server request",
        &old.server_requests,
        &new.server_requests,
        &mut out,
    );
    let old_types: BTreeSet<String> = old.types.keys().cloned().collect();
    let new_types: BTreeSet<String> = new.types.keys().cloned().collect();
    set_diff("type", &old_types, &new_types, &mut out);
    for (ty, old_fields) in &old.types {
        let Some(new_fields) = new.types.get(ty) else {
            continue;
        };
        for (field, schema) in new_fields {
            match old_fields.get(field) {
                None => out.push(Change::FieldAdded {
                    ty: ty.clone(),
                    field: field.clone(),
                }),
                Some(before) if before != schema => out.push(Change::FieldChanged {
                    ty: ty.clone(),
                    field: field.clone(),
                    from: short(before),
                    to: short(schema),
                }),
                Some(_) => {}
            }
        }
        for field in old_fields.keys().filter(|f| !new_fields.contains_key(*f)) {
            out.push(Change::FieldRemoved {
                ty: ty.clone(),
                field: field.clone(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn protocol(methods: &[&str], fields: Value) -> Protocol {
        Protocol {
            client_methods: methods.iter().map(|m| m.to_string()).collect(),
            types: [("T".to_string(), super::fields(&fields))]
                .into_iter()
                .collect(),
            ..Protocol::default()
        }
    }

    #[test]
    fn every_kind_of_difference_is_named() {
        let old = protocol(
            &["a", "b"],
            json!({"properties": {"kept": {"type": "string", "description": "x"}, "gone": {"type": "string"}, "changed": {"type": "string"}}}),
        );
        let new = protocol(
            &["b", "c"],
            json!({"properties": {"kept": {"type": "string", "description": "reworded"}, "new": {"type": "integer"}, "changed": {"type": ["string", "null"]}}}),
        );
        let shown: Vec<String> = diff(&old, &new).iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "+ client method `c`",
                "- client method `a`",
                "~ field `T.changed`: {\"type\":\"string\"} → {\"type\":[\"string\",\"null\"]}",
                "+ field `T.new`",
                "- field `T.gone`",
            ]
        );
    }

    #[test]
    fn union_variants_are_compared_by_title() {
        let schema =
            json!({"oneOf": [{"title": "Text", "properties": {"text": {"type": "string"}}}]});
        let fields = super::fields(&schema);
        assert!(fields.contains_key("Text.text"), "{fields:?}");
    }
}
