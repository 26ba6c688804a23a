//! A schema-valid instance of a JSON Schema, generated deterministically: what the fake sends
//! when a scenario asks for "every notification of the release" (the driver must tolerate each,
//! whatever the release adds), built from the release's generated schema rather than written by
//! hand, so a new release's notifications are covered without code.
//!
//! Hand-written because the fake needs one fixed, readable instance per schema, not a random
//! search (the property-testing crates generate from Rust types, not from JSON Schema). It covers
//! the subset of draft 7 that Codex's generated schemas use (the unit tests check every
//! notification of every carried release validates):
//!
//! - `$ref` to `#/definitions/NAME` (siblings ignored, as draft 7 says);
//! - `oneOf` / `anyOf`: the first branch that is not only `null` (at the depth bound, the `null`
//!   branch when there is one); an object beside the union (`properties` next to `oneOf`) is
//!   merged with the branch; `allOf`: every part, objects merged;
//! - `const`, `enum` (the first value);
//! - `type`, also as an array (the first non-`null` type; `null` at the depth bound);
//! - objects: every property (only the `required` ones past [`FULL_DEPTH`]); a map
//!   (`additionalProperties` schema, no properties) gets one entry before the bound;
//! - arrays: one item (none past the bound); strings: `sample-<property>`, `minLength` honoured;
//!   integers and numbers: `1` or the `minimum`; booleans: `false`.
//!
//! Depth is bounded: past [`FULL_DEPTH`] the instance is minimal, and a schema that still nests
//! past [`MAX_DEPTH`] is an error naming the path.

use serde_json::{json, Map, Value};

/// Levels below which every optional property, array item and map entry is generated.
pub const FULL_DEPTH: usize = 6;
/// A schema nesting deeper than this even with minimal instances is refused.
pub const MAX_DEPTH: usize = 64;

/// Generates instances against one schema document's `definitions`.
pub struct Generator<'a> {
    definitions: Option<&'a Map<String, Value>>,
}

impl<'a> Generator<'a> {
    /// A generator resolving `$ref`s in `document` (a schema with `definitions`).
    pub fn new(document: &'a Value) -> Self {
        Self {
            definitions: document.get("definitions").and_then(Value::as_object),
        }
    }

    /// An instance of `schema`.
    pub fn instance(&self, schema: &Value) -> Result<Value, String> {
        self.generate(schema, 0, "value")
    }

    fn generate(&self, schema: &Value, depth: usize, name: &str) -> Result<Value, String> {
        if depth > MAX_DEPTH {
            return Err(format!(
                "`{name}`: the schema nests deeper than {MAX_DEPTH} levels"
            ));
        }
        let object = match schema {
            Value::Bool(true) => return Ok(json!({})),
            Value::Bool(false) => {
                return Err(format!("`{name}`: the schema `false` has no instance"))
            }
            Value::Object(object) => object,
            other => return Err(format!("`{name}`: {other} is not a schema")),
        };
        if let Some(reference) = object.get("$ref").and_then(Value::as_str) {
            let target = self.resolve(reference)?;
            return self.generate(target, depth + 1, name);
        }
        if let Some(value) = object.get("const") {
            return Ok(value.clone());
        }
        if let Some(values) = object.get("enum").and_then(Value::as_array) {
            return values
                .first()
                .cloned()
                .ok_or_else(|| format!("`{name}`: an empty enum has no instance"));
        }
        if let Some(parts) = object.get("allOf").and_then(Value::as_array) {
            let mut merged: Option<Value> = None;
            for part in parts {
                let value = self.generate(part, depth + 1, name)?;
                merged = Some(match merged {
                    Some(previous) => merge(previous, value),
                    None => value,
                });
            }
            let own = self.typed(object, depth, name)?;
            return Ok(match (merged, own) {
                (Some(merged), Some(own)) => merge(own, merged),
                (Some(merged), None) => merged,
                (None, own) => own.unwrap_or(Value::Null),
            });
        }
        let union = object
            .get("oneOf")
            .or_else(|| object.get("anyOf"))
            .and_then(Value::as_array);
        if let Some(branches) = union {
            let branch = self.pick_branch(branches, depth)?;
            let chosen = self.generate(branch, depth + 1, name)?;
            return Ok(match self.typed(object, depth, name)? {
                Some(own) if own.is_object() && chosen.is_object() => merge(own, chosen),
                _ => chosen,
            });
        }
        Ok(self
            .typed(object, depth, name)?
            .unwrap_or_else(|| json!({})))
    }

    /// The instance the schema's own `type` (and object / array keywords) asks for; `None` for a
    /// schema that constrains no type.
    fn typed(
        &self,
        object: &Map<String, Value>,
        depth: usize,
        name: &str,
    ) -> Result<Option<Value>, String> {
        let deep = depth >= FULL_DEPTH;
        let kind = match object.get("type") {
            Some(Value::String(kind)) => kind.as_str(),
            Some(Value::Array(kinds)) => {
                let names: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
                match names.iter().find(|k| **k != "null") {
                    Some(_) if deep && names.contains(&"null") => "null",
                    Some(kind) => kind,
                    None => "null",
                }
            }
            Some(other) => return Err(format!("`{name}`: type {other} is not understood")),
            None if object.contains_key("properties") => "object",
            None => return Ok(None),
        };
        let value = match kind {
            "null" => Value::Null,
            "boolean" => Value::Bool(false),
            "integer" => json!(minimum(object).max(1.0) as i64),
            "number" => json!(minimum(object).max(1.0)),
            "string" => {
                let mut text = format!("sample-{name}");
                let min = object.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
                while text.len() < min {
                    text.push('x');
                }
                Value::String(text)
            }
            "array" => match object.get("items") {
                Some(items) if !deep => {
                    Value::Array(vec![self.generate(items, depth + 1, name)?])
                }
                _ => json!([]),
            },
            "object" => Value::Object(self.object(object, depth, deep)?),
            other => return Err(format!("`{name}`: type `{other}` is not understood")),
        };
        Ok(Some(value))
    }

    fn object(
        &self,
        object: &Map<String, Value>,
        depth: usize,
        deep: bool,
    ) -> Result<Map<String, Value>, String> {
        let required: Vec<&str> = object
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        let properties = object.get("properties").and_then(Value::as_object);
        for (key, schema) in properties.into_iter().flatten() {
            if deep && !required.contains(&key.as_str()) {
                continue;
            }
            out.insert(key.clone(), self.generate(schema, depth + 1, key)?);
        }
        if properties.is_none() && !deep {
            if let Some(values @ Value::Object(_)) = object.get("additionalProperties") {
                out.insert("key".into(), self.generate(values, depth + 1, "key")?);
            }
        }
        Ok(out)
    }

    fn pick_branch<'b>(&self, branches: &'b [Value], depth: usize) -> Result<&'b Value, String> {
        let is_null = |b: &Value| b.get("type").and_then(Value::as_str) == Some("null");
        let chosen = if depth >= FULL_DEPTH {
            branches.iter().find(|b| is_null(b)).or(branches.first())
        } else {
            branches.iter().find(|b| !is_null(b)).or(branches.first())
        };
        chosen.ok_or_else(|| "an empty union has no instance".to_string())
    }

    fn resolve(&self, reference: &str) -> Result<&'a Value, String> {
        let name = reference
            .strip_prefix("#/definitions/")
            .ok_or_else(|| format!("`$ref` {reference} is not a local definition"))?;
        self.definitions
            .and_then(|d| d.get(name))
            .ok_or_else(|| format!("`$ref` {reference} names no definition"))
    }
}

fn minimum(object: &Map<String, Value>) -> f64 {
    object
        .get("minimum")
        .and_then(Value::as_f64)
        .map(f64::ceil)
        .unwrap_or(1.0)
}

/// `extra`'s fields added to `base` when both are objects (`extra` wins); else `base`.
fn merge(base: Value, extra: Value) -> Value {
    match (base, extra) {
        (Value::Object(mut base), Value::Object(extra)) => {
            base.extend(extra);
            Value::Object(base)
        }
        (base, _) => base,
    }
}

/// An instance of every notification of the release, in the schema's order: `(method,
/// params)`, with every `threadId` / `turnId` (and a `thread` or `turn` object's `id`) set to
/// `thread_id` / `turn_id`, so a driver can tell they belong to a thread that is not its own.
pub fn every_notification(
    schema: &super::release_schema::ReleaseSchema,
    thread_id: &str,
    turn_id: &str,
) -> Result<Vec<(String, Value)>, String> {
    let document = schema.notifications_document();
    let generator = Generator::new(document);
    schema
        .notification_methods()
        .into_iter()
        .map(|method| {
            let params_schema = schema
                .notification_params(method)
                .ok_or_else(|| format!("`{method}` has no params schema"))?;
            let mut params = generator
                .instance(params_schema)
                .map_err(|e| format!("`{method}`: {e}"))?;
            bind_ids(&mut params, thread_id, turn_id);
            Ok((method.to_string(), params))
        })
        .collect()
}

fn bind_ids(value: &mut Value, thread_id: &str, turn_id: &str) {
    match value {
        Value::Object(map) => {
            for (key, field) in map.iter_mut() {
                match key.as_str() {
                    "threadId" | "conversationId" if field.is_string() => *field = json!(thread_id),
                    "turnId" if field.is_string() => *field = json!(turn_id),
                    "thread" if field.get("id").is_some_and(Value::is_string) => {
                        field["id"] = json!(thread_id);
                        bind_ids(field, thread_id, turn_id);
                    }
                    "turn" if field.get("id").is_some_and(Value::is_string) => {
                        field["id"] = json!(turn_id);
                        bind_ids(field, thread_id, turn_id);
                    }
                    _ => bind_ids(field, thread_id, turn_id),
                }
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|item| bind_ids(item, thread_id, turn_id)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::release_schema;

    /// The property that matters: every instance validates against the release's own schema
    /// (the whole `ServerNotification.json` union, as the fidelity test checks the fake's
    /// messages), for every release the fake carries.
    #[test]
    fn every_generated_notification_validates_against_its_release_schema() {
        for release in release_schema::all() {
            let validator = jsonschema::validator_for(release.notifications_document())
                .expect("the committed schema compiles");
            // Not vacuous: a turn with a status no release has is rejected.
            let bogus = json!({"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": "x", "items": [], "status": "bogus"}}});
            assert!(!validator.is_valid(&bogus), "{}", release.version);
            let instances = every_notification(release, "thread-x", "turn-x")
                .unwrap_or_else(|e| panic!("{}: {e}", release.version));
            assert_eq!(
                instances.len(),
                release.notification_methods().len(),
                "{}",
                release.version
            );
            let mut failures = Vec::new();
            for (method, params) in &instances {
                let message = json!({"method": method, "params": params});
                for error in validator.iter_errors(&message) {
                    failures.push(format!(
                        "{} {method}: {error} at {} (schema {})",
                        release.version, error.instance_path, error.schema_path
                    ));
                }
            }
            assert!(failures.is_empty(), "{}", failures.join("\n"));
        }
    }

    #[test]
    fn instances_are_deterministic_and_bound_to_the_given_ids() {
        let release = release_schema::for_version("0.169.0").unwrap();
        let first = every_notification(release, "t1", "u1").unwrap();
        assert_eq!(first, every_notification(release, "t1", "u1").unwrap());
        let completed = &first.iter().find(|(m, _)| m == "turn/completed").unwrap().1;
        assert_eq!(completed["threadId"], "t1");
        assert_eq!(completed["turn"]["id"], "u1");
        let started = &first.iter().find(|(m, _)| m == "thread/started").unwrap().1;
        assert_eq!(started["thread"]["id"], "t1");
    }

    #[test]
    fn the_subset_is_generated_as_documented() {
        let document = json!({"definitions": {
            "Leaf": {"type": "object", "properties": {"a": {"type": "integer", "minimum": 3}, "b": {"type": ["string", "null"], "minLength": 20}}, "required": ["a"]},
            "Node": {"type": "object", "properties": {"child": {"anyOf": [{"$ref": "#/definitions/Node"}, {"type": "null"}]}}, "required": ["child"]}
        }});
        let generator = Generator::new(&document);
        let leaf = generator
            .instance(&json!({"$ref": "#/definitions/Leaf"}))
            .unwrap();
        assert_eq!(leaf["a"], 3);
        assert_eq!(leaf["b"].as_str().unwrap().len(), 20);
        // A recursive schema ends in its null branch at the depth bound.
        let mut node = generator
            .instance(&json!({"$ref": "#/definitions/Node"}))
            .unwrap();
        let mut levels = 0;
        while !node["child"].is_null() {
            node = node["child"].take();
            levels += 1;
        }
        assert!(levels > 0 && levels < FULL_DEPTH, "{levels}");
        let union = json!({"type": "object", "properties": {"serverName": {"type": "string"}}, "required": ["serverName"],
            "oneOf": [{"type": "object", "properties": {"mode": {"enum": ["form"], "type": "string"}}, "required": ["mode"]}]});
        let merged = generator.instance(&union).unwrap();
        assert_eq!(merged["mode"], "form");
        assert_eq!(merged["serverName"], "sample-serverName");
        let err = generator
            .instance(&json!({"$ref": "#/definitions/Missing"}))
            .unwrap_err();
        assert!(err.contains("Missing"), "{err}");
    }
}
