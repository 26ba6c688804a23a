//! The values the release's JSON Schema allows a client, read from the schema itself: the
//! string members of enums (an approval decision, an approval policy, a sandbox mode, a
//! collaboration mode) and whether an optional field exists. The client's own parameter types
//! (`InitializeParams`, `ThreadStartParams`, `TurnStartParams`) are committed under
//! `schema/VERSION/` as `codex app-server generate-json-schema --experimental` wrote them (the
//! `schema_copies` trials of `harness/tests/needs_root_runc_codex` hold each against the binary); the
//! answers a client owes are the graders' copy (`graders/protocol/VERSION/responses/`).

use serde_json::Value;

/// Why the vocabulary of a release cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("no client schema for Codex {asked} in harness/crates/client-choices/schema (releases there: {known})")]
    UnknownRelease { asked: String, known: String },
    #[error("Codex {version}: {file} has no {what}")]
    Missing {
        version: String,
        file: String,
        what: String,
    },
    #[error("Codex {version}: {file} is not JSON: {why}")]
    NotJson {
        version: String,
        file: String,
        why: String,
    },
}

/// The client's parameter schemas of one release.
struct ClientFiles {
    version: &'static str,
    initialize: &'static str,
    thread_start: &'static str,
    turn_start: &'static str,
}

const CLIENT_FILES: &[ClientFiles] = &[ClientFiles {
    version: "0.169.0",
    initialize: include_str!("../schema/0.169.0/InitializeParams.json"),
    thread_start: include_str!("../schema/0.169.0/ThreadStartParams.json"),
    turn_start: include_str!("../schema/0.169.0/TurnStartParams.json"),
}];

/// The releases whose client choices are known, oldest first.
pub(crate) fn releases() -> Vec<&'static str> {
    CLIENT_FILES.iter().map(|f| f.version).collect()
}

/// A parsed schema file, named for the errors.
pub(crate) struct SchemaFile {
    pub version: String,
    pub file: String,
    pub doc: Value,
}

impl SchemaFile {
    fn parse(version: &str, file: &str, text: &str) -> Result<Self, SchemaError> {
        let doc = serde_json::from_str(text).map_err(|e| SchemaError::NotJson {
            version: version.into(),
            file: file.into(),
            why: e.to_string(),
        })?;
        Ok(Self {
            version: version.into(),
            file: file.into(),
            doc,
        })
    }

    fn missing(&self, what: impl Into<String>) -> SchemaError {
        SchemaError::Missing {
            version: self.version.clone(),
            file: self.file.clone(),
            what: what.into(),
        }
    }

    /// The definition `name` (`#/definitions/NAME`).
    pub(crate) fn definition(&self, name: &str) -> Result<&Value, SchemaError> {
        self.doc
            .get("definitions")
            .and_then(|d| d.get(name))
            .ok_or_else(|| self.missing(format!("definition `{name}`")))
    }

    /// The string members of the enum `definition`, in schema order: its own `enum`, or the
    /// `enum`s of its `oneOf` alternatives (object alternatives are left out: they carry data a
    /// client has to invent, an amendment or a rejection text).
    pub(crate) fn string_enum(&self, definition: &str) -> Result<Vec<String>, SchemaError> {
        let def = self.definition(definition)?;
        let alternatives: Vec<&Value> = match def.get("oneOf").and_then(Value::as_array) {
            Some(list) => list.iter().collect(),
            None => vec![def],
        };
        let values: Vec<String> = alternatives
            .iter()
            .filter_map(|alt| alt.get("enum").and_then(Value::as_array))
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        if values.is_empty() {
            return Err(self.missing(format!("string values in `{definition}`")));
        }
        Ok(values)
    }

    /// The object alternatives of the `oneOf` enum `definition`, by their one required key
    /// (`denied` of `ReviewDecision`).
    pub(crate) fn object_alternatives(&self, definition: &str) -> Result<Vec<String>, SchemaError> {
        let def = self.definition(definition)?;
        Ok(def
            .get("oneOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|alt| alt.get("type").and_then(Value::as_str) == Some("object"))
            .filter_map(|alt| alt.get("required")?.get(0)?.as_str().map(str::to_string))
            .collect())
    }

    /// Whether the object schema at `pointer` has the property `name` (optional or not).
    pub(crate) fn has_property(&self, pointer: &str, name: &str) -> Result<(), SchemaError> {
        self.doc
            .pointer(pointer)
            .and_then(|o| o.get("properties"))
            .and_then(|p| p.get(name))
            .map(|_| ())
            .ok_or_else(|| self.missing(format!("property `{name}` at `{pointer}`")))
    }
}

/// The client-side schema files of `version`.
pub(crate) struct ClientSchema {
    pub initialize: SchemaFile,
    pub thread_start: SchemaFile,
    pub turn_start: SchemaFile,
}

impl ClientSchema {
    pub(crate) fn of(version: &str) -> Result<Self, SchemaError> {
        let files = CLIENT_FILES
            .iter()
            .find(|f| f.version == version)
            .ok_or_else(|| SchemaError::UnknownRelease {
                asked: version.into(),
                known: releases().join(", "),
            })?;
        Ok(Self {
            initialize: SchemaFile::parse(version, "InitializeParams.json", files.initialize)?,
            thread_start: SchemaFile::parse(version, "ThreadStartParams.json", files.thread_start)?,
            turn_start: SchemaFile::parse(version, "TurnStartParams.json", files.turn_start)?,
        })
    }
}

/// A response schema of the graders' copy of `version`.
pub(crate) fn response(version: &str, response_type: &str) -> Result<SchemaFile, SchemaError> {
    let file = format!("responses/{response_type}.json");
    let text =
        graders::protocol::response_schema_text(version, response_type).ok_or_else(|| {
            SchemaError::Missing {
                version: version.into(),
                file: "graders/protocol".into(),
                what: file.clone(),
            }
        })?;
    SchemaFile::parse(version, &file, text)
}
