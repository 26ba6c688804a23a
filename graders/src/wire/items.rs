//! Turning the app-server's item JSON (`item/started`, `item/completed`) into the event
//! contract's reduced [`Item`]: the one reduction, used by the wire translator and by the
//! reference driver.

use crate::events::{CommandExecution, DynamicToolCall, Item};
use crate::excerpt::excerpt;
use serde_json::Value;
use std::collections::HashSet;

/// The `text` of every part in the array `v[key]`, one per line (`None`: no such array).
pub fn joined_texts(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_array).map(|parts| {
        parts
            .iter()
            .filter_map(|p| text(p, "text"))
            .collect::<Vec<_>>()
            .join("\n")
    })
}

/// Longest command output kept in an event.
pub const OUTPUT_EXCERPT_CHARS: usize = 4000;

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// Where Codex reports a command it started itself inside the sandbox (an approval-gated
/// command reports `agent`).
const SANDBOXED_SOURCE: &str = "unifiedExecStartup";

/// `sandbox` is the profile the driver selected for the turn; `approved` the items whose
/// escalation the driver granted (they run outside the sandbox).
pub fn reduce(item: &Value, sandbox: Option<&str>, approved: &HashSet<String>) -> Item {
    let id = text(item, "id").unwrap_or_default();
    let item_type = text(item, "type").unwrap_or_default();
    match item_type.as_str() {
        "commandExecution" => Item::CommandExecution(CommandExecution {
            command: text(item, "command").unwrap_or_default(),
            cwd: text(item, "cwd"),
            status: text(item, "status").unwrap_or_default(),
            exit_code: item.get("exitCode").and_then(Value::as_i64),
            stdout: None,
            stderr: None,
            aggregated_output: item
                .get("aggregatedOutput")
                .and_then(Value::as_str)
                .map(|o| excerpt(o, OUTPUT_EXCERPT_CHARS)),
            sandbox: sandbox.map(str::to_string),
            ran_in_sandbox: if approved.contains(&id) {
                Some(false)
            } else if text(item, "source").as_deref() == Some(SANDBOXED_SOURCE) {
                Some(true)
            } else {
                None
            },
            id,
        }),
        "fileChange" => Item::FileChange {
            id,
            paths: item
                .get("changes")
                .and_then(Value::as_array)
                .map(|changes| changes.iter().filter_map(|c| text(c, "path")).collect())
                .unwrap_or_default(),
            status: text(item, "status"),
        },
        "plan" => Item::Plan {
            id,
            text: text(item, "text").unwrap_or_default(),
        },
        "agentMessage" => Item::AgentMessage {
            id,
            text: text(item, "text").unwrap_or_default(),
        },
        "dynamicToolCall" => Item::DynamicToolCall(DynamicToolCall {
            id,
            tool: text(item, "tool").unwrap_or_default(),
            arguments: item.get("arguments").cloned().unwrap_or(Value::Null),
            status: text(item, "status"),
            success: item.get("success").and_then(Value::as_bool),
            result_text: joined_texts(item, "contentItems"),
        }),
        _ => Item::Other { id, item_type },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn command_execution_keeps_status_exit_code_and_output() {
        let item = json!({"type":"commandExecution","id":"call_1","command":"/bin/bash -lc 'printf x > f'",
            "cwd":"/w","status":"completed","exitCode":0,"aggregatedOutput":"Read-only file system\nWRITE_REFUSED\n"});
        let Item::CommandExecution(c) = reduce(&item, Some("p"), &HashSet::new()) else {
            panic!()
        };
        assert_eq!(c.exit_code, Some(0));
        assert_eq!(c.status, "completed");
        assert_eq!(c.sandbox.as_deref(), Some("p"));
        assert!(c
            .aggregated_output
            .unwrap()
            .contains("Read-only file system"));
    }

    #[test]
    fn an_approved_command_ran_outside_the_sandbox() {
        let item = |id: &str, source: &str| {
            json!({"type":"commandExecution","id":id,"command":"touch f","status":"completed",
                "exitCode":0,"source":source})
        };
        let approved: HashSet<String> = ["call_2".to_string()].into();
        let ran = |value: &Value| match reduce(value, None, &approved) {
            Item::CommandExecution(c) => c.ran_in_sandbox,
            other => panic!("{other:?}"),
        };
        assert_eq!(ran(&item("call_1", "unifiedExecStartup")), Some(true));
        assert_eq!(ran(&item("call_2", "agent")), Some(false));
        assert_eq!(ran(&item("call_3", "agent")), None);
    }

    #[test]
    fn unknown_items_are_named_verbatim() {
        let item = json!({"type":"userMessage","id":"u1"});
        assert_eq!(
            reduce(&item, None, &HashSet::new()),
            Item::Other {
                id: "u1".into(),
                item_type: "userMessage".into()
            }
        );
    }
}
