//! Where in the script a request stands, decided from the request alone (stateless, like a real
//! model: Codex resends the whole history on every request).
//!
//! * The **turn** is the number of user-typed messages in `input`, minus one. Codex also sends
//!   context it injects itself as `user` messages (the `# AGENTS.md instructions for …` block,
//!   `<environment_context>…`, and other `<tag>`-wrapped blocks); those are not counted. So a
//!   driver's prompt must not itself start with `<` or `# AGENTS.md instructions` — the suites'
//!   prompts never do.
//! * The **response** within the turn is the number of tool outputs (`function_call_output`,
//!   `custom_tool_call_output`) after the last user-typed message: each tool step of the script
//!   ends one response, and Codex answers each call with exactly one output.
//!
//! A resumed thread carries its earlier turns in the history, so counting continues across a
//! resume.

use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Position {
    pub turn: usize,
    pub response: usize,
}

/// A tool output the model received, as found in a request's `input`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedOutput {
    pub call_id: String,
    /// A string output verbatim; an array output's text parts joined by newlines.
    pub output: String,
}

/// What the script's templates need from the current turn's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnContext {
    /// The text of the turn's user-typed message (for `{user_marker}`).
    pub user_text: String,
    /// What the model was told about the turn's most recent `exec_command` (for
    /// `{write_outcome}`, by `write_outcome_told`, as the fake derives it).
    pub last_exec: Option<String>,
}

/// The template context of the turn the request belongs to.
pub fn turn_context(input: &[Value]) -> TurnContext {
    let start = input
        .iter()
        .rposition(|item| {
            item.get("type").and_then(Value::as_str) == Some("message") && is_user_typed(item)
        })
        .unwrap_or(0);
    let turn = &input[start..];
    let user_text = turn.first().map(message_text).unwrap_or_default();
    let exec_calls: HashSet<&str> = turn
        .iter()
        .filter(|item| {
            item.get("type").and_then(Value::as_str) == Some("function_call")
                && item.get("name").and_then(Value::as_str) == Some("exec_command")
        })
        .filter_map(|item| item.get("call_id").and_then(Value::as_str))
        .collect();
    let last_exec = tool_outputs(turn)
        .into_iter()
        .rev()
        .find(|output| exec_calls.contains(output.call_id.as_str()))
        .map(|output| output.output);
    TurnContext {
        user_text,
        last_exec,
    }
}

pub fn position(input: &[Value]) -> Position {
    let mut user_messages = 0usize;
    let mut outputs_since = 0usize;
    for item in input {
        match item.get("type").and_then(Value::as_str) {
            Some("message") if is_user_typed(item) => {
                user_messages += 1;
                outputs_since = 0;
            }
            Some("function_call_output") | Some("custom_tool_call_output") => outputs_since += 1,
            _ => {}
        }
    }
    Position {
        turn: user_messages.saturating_sub(1),
        response: outputs_since,
    }
}

/// Every tool output in the history, in order.
pub fn tool_outputs(input: &[Value]) -> Vec<ReceivedOutput> {
    input
        .iter()
        .filter(|item| {
            matches!(
                item.get("type").and_then(Value::as_str),
                Some("function_call_output") | Some("custom_tool_call_output")
            )
        })
        .filter_map(|item| {
            let call_id = item.get("call_id")?.as_str()?.to_string();
            Some(ReceivedOutput {
                call_id,
                output: output_text(item.get("output")?),
            })
        })
        .collect()
}

/// Exec tools and single-text dynamic tools answer with a string; multi-item dynamic tool
/// results are an array of `input_text` parts (both are seen from Codex 0.169).
fn output_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|part| match part.get("text").and_then(Value::as_str) {
                Some(text) => text.to_string(),
                None => part.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn is_user_typed(item: &Value) -> bool {
    if item.get("role").and_then(Value::as_str) != Some("user") {
        return false;
    }
    let text = message_text(item);
    let text = text.trim_start();
    !(text.starts_with('<') || text.starts_with("# AGENTS.md instructions"))
}

fn message_text(item: &Value) -> String {
    match item.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(text: &str) -> Value {
        json!({"type":"message","role":"user","content":[{"type":"input_text","text":text}]})
    }

    #[test]
    fn injected_context_is_not_a_turn_and_outputs_count_responses() {
        let first = vec![
            json!({"type":"message","role":"developer","content":[{"type":"input_text","text":"base"}]}),
            user("# AGENTS.md instructions for /ws\n\n<INSTRUCTIONS>x</INSTRUCTIONS>"),
            user("<environment_context>\n</environment_context>"),
            user("Try to write the probe."),
        ];
        assert_eq!(
            position(&first),
            Position {
                turn: 0,
                response: 0
            }
        );
        let mut second = first.clone();
        second.push(
            json!({"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"}),
        );
        second.push(json!({"type":"function_call_output","call_id":"c1","output":"done"}));
        assert_eq!(position(&second).response, 1);
        second.push(json!({"type":"message","role":"assistant","content":[{"type":"output_text","text":"ok"}]}));
        second.push(user("Revise the plan."));
        assert_eq!(
            position(&second),
            Position {
                turn: 1,
                response: 0
            }
        );
    }

    #[test]
    fn the_turn_context_holds_the_user_text_and_the_last_exec_result() {
        let input = vec![
            user("first MARKER-1"),
            json!({"type":"function_call","call_id":"old","name":"exec_command","arguments":"{}"}),
            json!({"type":"function_call_output","call_id":"old","output":"Process exited with code 0\nOutput:\n"}),
            user("second MARKER-2"),
            json!({"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"}),
            json!({"type":"function_call_output","call_id":"c1","output":"Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 1\nOriginal token count: 3\nOutput:\nbwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n"}),
            json!({"type":"function_call","call_id":"d1","name":"paperclip_finish","arguments":"{}"}),
            json!({"type":"function_call_output","call_id":"d1","output":"ok"}),
        ];
        let context = turn_context(&input);
        assert_eq!(context.user_text, "second MARKER-2");
        assert_eq!(
            context.last_exec.as_deref(),
            Some("Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 1\nOriginal token count: 3\nOutput:\nbwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n")
        );
    }

    #[test]
    fn string_and_array_outputs_are_both_read() {
        let input = vec![
            json!({"type":"function_call_output","call_id":"a","output":"plain"}),
            json!({"type":"function_call_output","call_id":"b","output":[{"type":"input_text","text":"one"},{"type":"input_text","text":"two"}]}),
        ];
        let outputs = tool_outputs(&input);
        assert_eq!(outputs[0].output, "plain");
        assert_eq!(outputs[1].output, "one\ntwo");
    }
}
