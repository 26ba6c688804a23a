//! Where in the script a request stands, decided from the request alone (stateless, like a real
//! model: Codex resends the whole history on every request).
//!
//! * The **turn** is the number of turn openings in `input`, minus one. A turn opens with a
//!   user-typed message, or — for a turn the server starts itself while a goal is active — with
//!   Codex's goal continuation prompt (a `user` message starting `<codex_internal_context
//!   source="goal">`, measured with 0.160, 0.169 and 0.171: the fake plays the script's next turn
//!   there too). Codex also sends other context it injects itself as `user` messages (the `#
//!   AGENTS.md instructions for …` block, `<environment_context>…`, and other `<tag>`-wrapped
//!   blocks); those are not counted. So a driver's prompt must not itself start with `<` or `#
//!   AGENTS.md instructions` — the suites' prompts never do.
//! * The **response** within the turn is the number of tool outputs (`function_call_output`,
//!   `custom_tool_call_output`) answering a call (they carry its `call_id`) after the turn's
//!   opening: each tool step of the script ends one response, and Codex answers each call with
//!   exactly one output. Outputs Codex injects without a call (after `create_goal`, a
//!   `goal_objective` output with no `call_id`, measured) are context, not answers.
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
pub(crate) struct ReceivedOutput {
    pub(crate) call_id: String,
    /// A string output verbatim; an array output's text parts joined by newlines.
    pub(crate) output: String,
}

/// What the script's templates need from the current turn's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TurnContext {
    /// The text of the turn's user-typed message (for `{user_marker}`).
    pub(crate) user_text: String,
    /// What the model was told about the turn's most recent `exec_command` (for
    /// `{write_outcome}`, by `write_outcome_told`, as the fake derives it).
    pub(crate) last_exec: Option<String>,
}

/// The template context of the turn the request belongs to.
pub(crate) fn turn_context(input: &[Value]) -> TurnContext {
    let turn = current_turn(input);
    // A turn the server started has no user text.
    let user_text = turn
        .first()
        .filter(|item| is_user_typed(item))
        .map(message_text)
        .unwrap_or_default();
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

/// The items of the turn the request belongs to, from its opening on.
pub(crate) fn current_turn(input: &[Value]) -> &[Value] {
    let start = input.iter().rposition(opens_turn).unwrap_or(0);
    &input[start..]
}

pub(crate) fn position(input: &[Value]) -> Position {
    let mut user_messages = 0usize;
    let mut outputs_since = 0usize;
    for item in input {
        if opens_turn(item) {
            user_messages += 1;
            outputs_since = 0;
        } else if answers_call(item) {
            outputs_since += 1;
        }
    }
    Position {
        turn: user_messages.saturating_sub(1),
        response: outputs_since,
    }
}

/// A user message the model read, as found in a request's `input`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReceivedInput {
    /// Where it is known by in the history: the message's `id` (stable across requests,
    /// measured), else its position.
    pub(crate) key: String,
    /// The text of its text parts joined by newlines, as the fake logs a turn's input.
    pub(crate) text: String,
}

/// What the model read that the model log records, in history order: each user-typed message
/// (a turn's input, or input steered into a running turn) and each tool output answering a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Received {
    Input(ReceivedInput),
    Output(ReceivedOutput),
}

pub(crate) fn received(input: &[Value]) -> Vec<Received> {
    input
        .iter()
        .enumerate()
        .filter_map(|(index, item)| {
            if is_message(item) && is_user_typed(item) {
                return Some(Received::Input(ReceivedInput {
                    key: item
                        .get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("#{index}"), str::to_string),
                    text: message_parts(item).join("\n"),
                }));
            }
            if !answers_call(item) {
                return None;
            }
            Some(Received::Output(ReceivedOutput {
                call_id: item.get("call_id")?.as_str()?.to_string(),
                output: output_text(item.get("output")?),
            }))
        })
        .collect()
}

/// Every tool output answering a call in the history, in order.
pub(crate) fn tool_outputs(input: &[Value]) -> Vec<ReceivedOutput> {
    received(input)
        .into_iter()
        .filter_map(|r| match r {
            Received::Output(output) => Some(output),
            Received::Input(_) => None,
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

/// The prompt Codex sends the model to open a turn it starts itself while a goal is active.
const GOAL_CONTINUATION: &str = "<codex_internal_context source=\"goal\">";

fn is_message(item: &Value) -> bool {
    item.get("type").and_then(Value::as_str) == Some("message")
}

/// A user-typed message, or Codex's goal continuation prompt.
fn opens_turn(item: &Value) -> bool {
    is_message(item) && (is_user_typed(item) || is_goal_continuation(item))
}

/// A tool output that answers a call of the model (it names the call).
fn answers_call(item: &Value) -> bool {
    matches!(
        item.get("type").and_then(Value::as_str),
        Some("function_call_output") | Some("custom_tool_call_output")
    ) && item.get("call_id").and_then(Value::as_str).is_some()
}

fn is_user_typed(item: &Value) -> bool {
    if item.get("role").and_then(Value::as_str) != Some("user") {
        return false;
    }
    let text = message_text(item);
    let text = text.trim_start();
    !(text.starts_with('<') || text.starts_with("# AGENTS.md instructions"))
}

fn is_goal_continuation(item: &Value) -> bool {
    item.get("role").and_then(Value::as_str) == Some("user")
        && message_text(item).starts_with(GOAL_CONTINUATION)
}

fn message_text(item: &Value) -> String {
    message_parts(item).concat()
}

fn message_parts(item: &Value) -> Vec<String> {
    match item.get("content") {
        Some(Value::String(text)) => vec![text.clone()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
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
    fn a_goal_continuation_opens_a_turn_and_an_injected_output_answers_nothing() {
        // Measured with Codex 0.169: after `create_goal`, Codex adds a `goal_objective` output
        // with no call id; the turn it then starts itself opens with its continuation prompt.
        let mut input = vec![
            user("Summarise the README."),
            json!({"type":"function_call","call_id":"c1","name":"create_goal","arguments":"{}"}),
            json!({"type":"function_call_output","call_id":"c1","output":"{}"}),
            json!({"type":"function_call_output","name":"goal_objective","namespace":"agent","output":"Write it."}),
        ];
        assert_eq!(
            position(&input),
            Position {
                turn: 0,
                response: 1
            }
        );
        assert_eq!(tool_outputs(&input).len(), 1);
        input.push(user("<codex_internal_context source=\"goal\">\nContinue working toward the active thread goal.\n</codex_internal_context>"));
        assert_eq!(
            position(&input),
            Position {
                turn: 1,
                response: 0
            }
        );
        let context = turn_context(&input);
        assert_eq!(
            context.user_text, "",
            "a server-started turn has no user text"
        );
        assert_eq!(context.last_exec, None);
        // Other injected context still opens nothing.
        input.push(user("<environment_context>\n</environment_context>"));
        assert_eq!(position(&input).turn, 1);
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
