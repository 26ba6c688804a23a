//! What a release refuses to a client that did not declare `capabilities.experimentalApi`:
//! the client methods and the request fields its schema has only with `generate-json-schema
//! --experimental` (the schema's experimental markers), recorded per persona as
//! `experimental_gate.txt` (`METHOD` for a method, `METHOD FIELD` for a field). A request with
//! several such fields is refused naming the first the release checks, which the schema's
//! sorted properties do not say: the fields of each method are put in that order by asking the
//! binary (all of them set, the one it names taken out, again). A plain (not nullable) boolean
//! counts as set only when `true` (measured with 0.169: `experimentalRawEvents: false` passes,
//! `daybreakEnabled: false` does not), marked `METHOD FIELD if-true`.

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// The deepest a probe value is built: deep enough for a required object inside a required
/// object (`turn/start`'s `collaborationMode.settings.model`; at 4 its probe lacked `model`, was
/// refused as invalid rather than by the gate, and went last in the recorded order).
const MAX_DEPTH: usize = 8;

fn read(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Method → its params type name, and the document's definitions.
fn params_types(document: &Value) -> Vec<(String, Option<String>)> {
    document["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|branch| {
            let method = branch["properties"]["method"]["enum"][0].as_str()?;
            let params = branch["properties"]["params"]["$ref"]
                .as_str()
                .and_then(|r| r.rsplit('/').next())
                .map(str::to_string);
            Some((method.to_string(), params))
        })
        .collect()
}

/// The gated methods, and each method's gated fields (in schema order), of the two schemas.
pub(crate) fn gated(
    experimental: &Value,
    plain: &Value,
) -> (Vec<String>, Vec<(String, Vec<String>)>) {
    let plain_methods = params_types(plain);
    let known: BTreeSet<&str> = plain_methods.iter().map(|(m, _)| m.as_str()).collect();
    let methods = params_types(experimental)
        .into_iter()
        .map(|(m, _)| m)
        .filter(|m| !known.contains(m.as_str()))
        .collect();
    let fields = plain_methods
        .iter()
        .filter_map(|(method, params)| {
            let params = params.as_deref()?;
            let names = |doc: &Value| -> BTreeSet<String> {
                doc["definitions"][params]["properties"]
                    .as_object()
                    .map(|m| m.keys().cloned().collect())
                    .unwrap_or_default()
            };
            let only_experimental: Vec<String> = names(experimental)
                .difference(&names(plain))
                .cloned()
                .collect();
            (!only_experimental.is_empty()).then(|| (method.clone(), only_experimental))
        })
        .collect();
    (methods, fields)
}

/// A value `schema` allows that the gate counts as set: `true`, `"x"`, `1`, `[]`, an object
/// with its required fields, an enum's first value.
pub(crate) fn probe_value(schema: &Value, definitions: &Value, depth: usize) -> Value {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.rsplit('/').next().unwrap_or_default();
        return probe_value(&definitions[name], definitions, depth + 1);
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(branch) = schema[key]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["type"] != "null"))
        {
            return probe_value(branch, definitions, depth + 1);
        }
    }
    if let Some(first) = schema["enum"].as_array().and_then(|v| v.first()) {
        return first.clone();
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let first = types.iter().find(|t| **t != "null").copied().unwrap_or("");
    match first {
        "boolean" => json!(true),
        "string" => json!("x"),
        "integer" | "number" => json!(1),
        "array" => json!([]),
        "object" if depth < MAX_DEPTH => {
            let mut object = Map::new();
            for name in schema["required"].as_array().into_iter().flatten() {
                let Some(name) = name.as_str() else { continue };
                let field = &schema["properties"][name];
                object.insert(name.into(), probe_value(field, definitions, depth + 1));
            }
            Value::Object(object)
        }
        _ => json!({}),
    }
}

/// A gated field's line: a plain boolean's marked (see the module's documentation).
fn gate_line(method: &str, field: &str, schema: &Value) -> String {
    if schema["type"] == "boolean" {
        format!("{method} {field} {}", fake_app_server::persona::IF_TRUE)
    } else {
        format!("{method} {field}")
    }
}

/// `experimental_gate.txt` of the binary `program`: its two schemas generated under
/// `scratch`, each gated method's fields ordered by asking the binary.
pub(crate) fn record(program: &Path, scratch: &Path) -> Result<Vec<String>> {
    let (exp_dir, plain_dir) = (scratch.join("experimental"), scratch.join("plain"));
    super::schema::generate(program, &exp_dir)?;
    super::schema::generate_plain(program, &plain_dir)?;
    let experimental = read(&exp_dir.join("ClientRequest.json"))?;
    let plain = read(&plain_dir.join("ClientRequest.json"))?;
    let (methods, fields) = gated(&experimental, &plain);
    let definitions = &experimental["definitions"];
    let mut lines: Vec<String> = methods;
    for (method, gated_fields) in fields {
        let params_type = params_types(&experimental)
            .into_iter()
            .find(|(m, _)| *m == method)
            .and_then(|(_, p)| p)
            .unwrap_or_default();
        let params_schema = &definitions[params_type.as_str()];
        let mut base = probe_value(params_schema, definitions, 0);
        if base.get("threadId").is_some() {
            base["threadId"] = json!("00000000-0000-0000-0000-000000000000");
        }
        let home = scratch.join("ask");
        // Which fields are refused by name when set alone: a probe value the release rejects
        // before its gate (a required sub-field it wants otherwise) cannot be ordered.
        let refused_with = |fields: &[String]| -> Result<Option<String>> {
            let mut params = base.clone();
            for field in fields {
                params[field.as_str()] =
                    probe_value(&params_schema["properties"][field.as_str()], definitions, 1);
            }
            let (command, _) = super::persona::scratch_command_for(program, &home)?;
            let answer = super::ask::ask_without_capabilities(command, &method, params)?;
            let message = answer["error"]["message"].as_str().unwrap_or_default();
            Ok(fields
                .iter()
                .find(|f| message == format!("{method}.{f} requires experimentalApi capability"))
                .cloned())
        };
        let mut left = Vec::new();
        let mut unordered = Vec::new();
        for field in &gated_fields {
            match refused_with(std::slice::from_ref(field))? {
                Some(_) => left.push(field.clone()),
                None => unordered.push(field.clone()),
            }
        }
        let mut ordered = Vec::new();
        while !left.is_empty() {
            match refused_with(&left)? {
                Some(named) => {
                    left.retain(|f| *f != named);
                    ordered.push(named);
                }
                None => ordered.append(&mut left),
            }
        }
        ordered.append(&mut unordered);
        lines.extend(ordered.into_iter().map(|field| {
            gate_line(
                &method,
                &field,
                &params_schema["properties"][field.as_str()],
            )
        }));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gated_are_the_methods_and_fields_only_the_experimental_schema_has() {
        let schema = |methods: &[&str], fields: &[&str]| {
            let properties: Map<String, Value> = fields
                .iter()
                .map(|f| (f.to_string(), json!({"type": "boolean"})))
                .collect();
            json!({
                "oneOf": methods.iter().map(|m| json!({"properties": {"method": {"enum": [m]}, "params": {"$ref": "#/definitions/P"}}})).collect::<Vec<_>>(),
                "definitions": {"P": {"properties": properties}},
            })
        };
        let experimental = schema(
            &["thread/start", "collaborationMode/list"],
            &["cwd", "multiAgentMode"],
        );
        let plain = schema(&["thread/start"], &["cwd"]);
        let (methods, fields) = gated(&experimental, &plain);
        assert_eq!(methods, ["collaborationMode/list"]);
        assert_eq!(
            fields,
            [(
                "thread/start".to_string(),
                vec!["multiAgentMode".to_string()]
            )]
        );
    }

    #[test]
    fn a_probe_value_is_set_as_the_gate_counts_it() {
        let definitions = json!({"Mode": {"enum": ["legacy", "paginated"]}});
        let value = |schema: Value| probe_value(&schema, &definitions, 0);
        assert_eq!(value(json!({"type": ["boolean", "null"]})), json!(true));
        assert_eq!(
            value(json!({"anyOf": [{"$ref": "#/definitions/Mode"}, {"type": "null"}]})),
            json!("legacy")
        );
        assert_eq!(value(json!({"type": ["array", "null"]})), json!([]));
        assert_eq!(
            value(
                json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}})
            ),
            json!({"a": "x"})
        );
    }

    #[test]
    fn a_plain_boolean_is_marked_and_a_nested_required_object_is_filled() {
        assert_eq!(
            gate_line(
                "thread/start",
                "experimentalRawEvents",
                &json!({"type": "boolean"})
            ),
            "thread/start experimentalRawEvents if-true"
        );
        assert_eq!(
            gate_line(
                "thread/start",
                "daybreakEnabled",
                &json!({"type": ["boolean", "null"]})
            ),
            "thread/start daybreakEnabled"
        );
        let definitions = json!({
            "CollaborationMode": {"type": "object", "required": ["mode", "settings"], "properties": {
                "mode": {"$ref": "#/definitions/ModeKind"},
                "settings": {"$ref": "#/definitions/Settings"}}},
            "ModeKind": {"enum": ["plan", "default"]},
            "Settings": {"type": "object", "required": ["model"], "properties": {"model": {"type": "string"}}},
        });
        let field =
            json!({"anyOf": [{"$ref": "#/definitions/CollaborationMode"}, {"type": "null"}]});
        assert_eq!(
            probe_value(&field, &definitions, 1),
            json!({"mode": "plan", "settings": {"model": "x"}})
        );
    }
}
