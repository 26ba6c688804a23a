//! What a model tool call asks for, decoded from its `arguments` string (JSON as the model sent
//! it). Graders never match the raw text: `"plan-write-probe-"` spelled with JSON escapes is
//! the same path, so every check runs on decoded strings.
//!
//! Codex's exec tools take `{"cmd": "<script>"}` (`exec_command`), `{"command": "<script>"}`
//! (`shell_command`) or `{"command": ["bash", "-lc", "<script>"]}` (`shell`), each with optional
//! `sandbox_permissions` (`use_default` | `require_escalated`) and `justification`.

use serde_json::Value;

/// The value of `sandbox_permissions` that asks to run outside the sandbox.
pub const REQUIRE_ESCALATED: &str = "require_escalated";

/// The command a tool call runs, as the tool takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolCommand {
    /// A shell script (`cmd` of `exec_command`, `command` of `shell_command`).
    Script(String),
    /// An argv (`command` of `shell`).
    Argv(Vec<String>),
}

/// A decoded tool call.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolArguments {
    /// `false` when `arguments` is not a JSON object; then only [`Self::strings`] (the raw
    /// text) is known.
    pub decoded: bool,
    pub command: Option<ToolCommand>,
    pub sandbox_permissions: Option<String>,
    pub justification: Option<String>,
    /// Every string in the arguments (keys and values, decoded), or the raw text when it is
    /// not JSON: what "mentions a path" is judged on.
    pub strings: Vec<String>,
}

impl ToolArguments {
    pub fn decode(arguments: &str) -> Self {
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(arguments) else {
            return Self {
                decoded: false,
                strings: vec![arguments.to_string()],
                ..Self::default()
            };
        };
        let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
        let command = match (map.get("cmd"), map.get("command")) {
            (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => {
                Some(ToolCommand::Script(s.clone()))
            }
            (None, Some(Value::Array(parts))) => parts
                .iter()
                .map(|p| p.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .map(ToolCommand::Argv),
            _ => None,
        };
        let mut strings = Vec::new();
        for (key, value) in &map {
            strings.push(key.clone());
            collect_strings(value, &mut strings, 0);
        }
        Self {
            decoded: true,
            command,
            sandbox_permissions: text("sandbox_permissions"),
            justification: text("justification"),
            strings,
        }
    }

    /// The call asks to run outside the sandbox.
    pub fn requests_escalation(&self) -> bool {
        self.sandbox_permissions.as_deref() == Some(REQUIRE_ESCALATED)
    }

    /// Some decoded string contains `needle`.
    pub fn mentions(&self, needle: &str) -> bool {
        self.strings.iter().any(|s| s.contains(needle))
    }
}

/// Nesting beyond this is not walked (serde_json itself stops at 128 levels).
const MAX_DEPTH: usize = 64;

fn collect_strings(value: &Value, out: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items
            .iter()
            .for_each(|v| collect_strings(v, out, depth + 1)),
        Value::Object(map) => {
            for (k, v) in map {
                out.push(k.clone());
                collect_strings(v, out, depth + 1);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_spellings_decode_to_the_same_path() {
        let call = ToolArguments::decode(
            r#"{"cmd":"printf x > plan\u002dwrite\u002dprobe\u002d1.txt","sandbox_permissions":"require_escalated","justification":"why"}"#,
        );
        assert!(call.mentions("plan-write-probe-"));
        assert!(call.requests_escalation());
        assert_eq!(call.justification.as_deref(), Some("why"));
        assert_eq!(
            call.command,
            Some(ToolCommand::Script(
                "printf x > plan-write-probe-1.txt".into()
            ))
        );
    }

    #[test]
    fn argv_commands_and_raw_text() {
        let call = ToolArguments::decode(r#"{"command":["bash","-lc","touch a"]}"#);
        assert_eq!(
            call.command,
            Some(ToolCommand::Argv(vec![
                "bash".into(),
                "-lc".into(),
                "touch a".into()
            ]))
        );
        let raw = ToolArguments::decode("touch plan-write-probe-1");
        assert!(!raw.decoded);
        assert!(raw.mentions("plan-write-probe-"));
        assert_eq!(raw.command, None);
    }
}
