//! `thread/start` `experimentalRawEvents: true`: Codex 0.169 reports every item of the model's
//! conversation as the Responses API holds it (`rawResponseItem/completed`) and every model
//! response's end (`rawResponse/completed`), besides the usual `item/*` notifications. Shapes and
//! places recorded from the real Codex with `harness explore` (the corpus's `raw-events-*`):
//!
//! - a thread's first turn opens with Codex's context: a `developer` message (skills, sandbox
//!   and tool instructions) and a `user` message (the environment); then the turn's input, each
//!   before its `userMessage` item;
//! - a tool call right after the user message's item (before the tool's own item), followed by
//!   its response's end; its output once the tool's item completed;
//! - an assistant message right after its `item/completed`; the final response's end before the
//!   turn's ending.
//!
//! Neither notification is in 0.169's schema (`generate-json-schema`, with `--experimental` or
//! not: measured), so they go out past the fake's schema check ([`send_raw`]).
//!
//! The context messages' texts are Codex's prompts (the home's skills, the sandbox's wording,
//! the host's date and time zone): the fake names each part instead of writing it
//! ([`context_text`]), and the explorer does not compare those texts.

use super::TurnRun;
use crate::ids;
use crate::protocol::shapes;
use serde_json::{json, Value};

/// What a turn of a thread started with `experimentalRawEvents: true` needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawEventsTurn {
    /// Which turn of the thread this is, from 0: the response ids count it, and only the first
    /// turn carries Codex's context.
    pub turn_index: usize,
}

/// The parts of Codex 0.169's context messages (their kinds and provenance, recorded), the same
/// for every sandbox, approval policy and tool set measured.
const DEVELOPER_CONTEXT: &[(&str, &str)] = &[
    ("host_skills.instructions", r#"{"type": "skills"}"#),
    (
        "permissions.instructions",
        r#"{"hook": false, "type": "harness"}"#,
    ),
    (
        "tools.deferred_namespaces",
        r#"{"namespace": "tool_search", "type": "tool"}"#,
    ),
];
const USER_CONTEXT: &[(&str, &str)] = &[(
    "environments.environment_context",
    r#"{"hook": false, "type": "harness"}"#,
)];

/// The tools Codex offers as freeform (`custom_tool_call`) tools rather than function tools.
const FREEFORM_TOOLS: &[&str] = &["apply_patch"];

/// The text the fake writes for a context part it does not model.
pub(super) fn context_text(kind: &str) -> String {
    format!("<{kind}: Codex's own prompt, not modelled by the fake>")
}

/// Seconds since the epoch with a fraction, as Codex's `create_time` is.
fn create_time() -> f64 {
    shapes::now_ms() as f64 / 1000.0
}

fn context_message(role: &str, parts: &[(&str, &str)], turn_id: &str) -> Value {
    let content: Vec<Value> = parts
        .iter()
        .map(|(kind, _)| json!({"type": "input_text", "text": context_text(kind)}))
        .collect();
    let provenance: Vec<Value> = parts
        .iter()
        .map(|(_, p)| json!({"provenance": serde_json::from_str::<Value>(p).unwrap_or_default()}))
        .collect();
    let kinds: Vec<&str> = parts.iter().map(|(kind, _)| *kind).collect();
    json!({
        "type": "message", "role": role, "id": format!("msg_{}", ids::uuid_v7()),
        "content": content,
        "internal_chat_message_metadata_passthrough": {
            "content_item_kinds": kinds, "content_item_metadata": provenance,
            "create_time": create_time(), "turn_id": turn_id,
        },
    })
}

/// The user's input as the model reads it: its text items.
fn user_input(input: &Value, turn_id: &str) -> Value {
    let texts: Vec<&str> = input
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter(|item| item["type"] == "text")
                .filter_map(|item| item["text"].as_str())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "type": "message", "role": "user", "id": format!("msg_{}", ids::uuid_v7()),
        "content": texts.iter().map(|t| json!({"type": "input_text", "text": t})).collect::<Vec<_>>(),
        "internal_chat_message_metadata_passthrough": {
            "content_item_kinds": texts.iter().map(|_| "user.text").collect::<Vec<_>>(),
            "content_item_metadata": texts.iter().map(|_| json!({"provenance": {"type": "user"}})).collect::<Vec<_>>(),
            "create_time": create_time(), "turn_id": turn_id,
        },
    })
}

/// The model's call of `name`: a freeform tool's carries its text (`input`), a function tool's
/// its JSON arguments.
fn tool_call(call_id: &str, name: &str, arguments: &str, turn_id: &str) -> Value {
    let mut item = json!({
        "call_id": call_id, "id": format!("item_{}", ids::chunk_id()), "name": name,
        "status": "completed",
        "internal_chat_message_metadata_passthrough": {"turn_id": turn_id},
    });
    if FREEFORM_TOOLS.contains(&name) {
        let input = serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|a| a["input"].as_str().map(str::to_string))
            .unwrap_or_default();
        item["type"] = json!("custom_tool_call");
        item["input"] = json!(input);
    } else {
        item["type"] = json!("function_call");
        item["arguments"] = json!(arguments);
    }
    item
}

/// What the model got back for a call: a freeform tool's as `custom_tool_call_output`.
fn tool_output(call_id: &str, name: &str, output: Value, turn_id: &str) -> Value {
    let (kind, prefix) = if FREEFORM_TOOLS.contains(&name) {
        ("custom_tool_call_output", "ctco")
    } else {
        ("function_call_output", "fco")
    };
    json!({
        "type": kind, "call_id": call_id, "id": format!("{prefix}_{}", ids::uuid_v7()),
        "output": output,
        "internal_chat_message_metadata_passthrough": {"create_time": create_time(), "turn_id": turn_id},
    })
}

fn assistant_message(id: &str, text: &str, turn_id: &str) -> Value {
    json!({
        "type": "message", "role": "assistant", "id": id, "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
        "internal_chat_message_metadata_passthrough": {"content_item_kinds": ["unknown"], "turn_id": turn_id},
    })
}

impl TurnRun {
    /// A raw event: not in the release's schema, though the release sends it.
    fn send_raw(&self, method: &str, params: Value) {
        self.shared
            .out
            .send_off_schema(&shapes::notification(method, params));
    }

    fn raw_item(&self, item: Value) {
        let (thread_id, turn_id) = self.ids();
        self.send_raw(
            "rawResponseItem/completed",
            json!({"threadId": thread_id, "turnId": turn_id, "item": item}),
        );
    }

    /// Before a turn's user message: Codex's context on the thread's first turn, then the input.
    pub(super) fn raw_turn_input(&self, input: &Value) {
        let Some(raw) = self.plan.raw_events else {
            return;
        };
        let turn_id = self.plan.turn_id.clone();
        if raw.turn_index == 0 {
            self.raw_item(context_message("developer", DEVELOPER_CONTEXT, &turn_id));
            self.raw_item(context_message("user", USER_CONTEXT, &turn_id));
        }
        self.raw_item(user_input(input, &turn_id));
    }

    /// Input steered into the running turn, as the model's next request carries it.
    pub(super) fn raw_steered_input(&self, input: &Value) {
        if self.plan.raw_events.is_some() {
            self.raw_item(user_input(input, &self.plan.turn_id));
        }
    }

    /// The model called a tool: the call, then the end of the response that made it.
    pub(super) fn raw_tool_call(&self, call_id: &str, name: &str, arguments: &str) {
        if self.plan.raw_events.is_none() {
            return;
        }
        self.raw_calls
            .borrow_mut()
            .push((call_id.to_string(), name.to_string()));
        self.raw_item(tool_call(call_id, name, arguments, &self.plan.turn_id));
        self.raw_response_completed();
    }

    /// A dynamic tool's content items as the model reads them (measured: none as `[]`).
    pub(super) fn raw_dynamic_tool_output(&self, call_id: &str, content_items: &Value) {
        let items: Vec<Value> = content_items
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|item| match item["type"].as_str() {
                        Some("inputImage") => {
                            json!({"type": "input_image", "image_url": item["imageUrl"]})
                        }
                        _ => json!({"type": "input_text", "text": item["text"]}),
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.raw_tool_output(call_id, json!(items));
    }

    /// What a call's tool gave back (text, or a dynamic tool's content items).
    pub(super) fn raw_tool_output(&self, call_id: &str, output: Value) {
        if self.plan.raw_events.is_none() {
            return;
        }
        let name = self
            .raw_calls
            .borrow()
            .iter()
            .find(|(id, _)| id == call_id)
            .map(|(_, name)| name.clone())
            .unwrap_or_default();
        self.raw_item(tool_output(call_id, &name, output, &self.plan.turn_id));
    }

    /// An assistant message the model wrote (item `id`).
    pub(super) fn raw_message(&self, id: &str, text: &str) {
        if self.plan.raw_events.is_some() {
            self.raw_item(assistant_message(id, text, &self.plan.turn_id));
        }
    }

    /// The end of a model response, with the mock model API's id (`resp_PROBE_TURN_RESPONSE`)
    /// and usage.
    pub(super) fn raw_response_completed(&self) {
        let Some(raw) = self.plan.raw_events else {
            return;
        };
        let response_id = format!(
            "resp_{}_{}_{}",
            self.template.probe_id,
            raw.turn_index,
            self.raw_responses.get()
        );
        self.raw_responses.set(self.raw_responses.get() + 1);
        let (thread_id, turn_id) = self.ids();
        let (input, output) = (shapes::TOKENS_IN, shapes::TOKENS_OUT);
        self.send_raw(
            "rawResponse/completed",
            json!({
                "threadId": thread_id, "turnId": turn_id, "responseId": response_id,
                "usage": {
                    "inputTokens": input, "cachedInputTokens": 0, "cacheWriteInputTokens": 0,
                    "outputTokens": output, "reasoningOutputTokens": 0, "totalTokens": input + output,
                },
                "usageMetadata": {"amount": null, "metadata": {
                    "input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": input + output,
                }},
            }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recorded from Codex 0.169 (the command-approval scenario, normalised ids aside).
    #[test]
    fn a_tool_call_and_its_output_have_the_recorded_shape() {
        let call = tool_call("call_1", "exec_command", r#"{"cmd":"true"}"#, "t");
        assert_eq!(call["type"], "function_call");
        assert_eq!(call["arguments"], r#"{"cmd":"true"}"#);
        assert_eq!(call["status"], "completed");
        assert_eq!(
            call["internal_chat_message_metadata_passthrough"],
            json!({"turn_id": "t"})
        );
        let patch = tool_call(
            "call_2",
            "apply_patch",
            r#"{"input":"*** Begin Patch"}"#,
            "t",
        );
        assert_eq!(patch["type"], "custom_tool_call");
        assert_eq!(patch["input"], "*** Begin Patch");
        assert!(patch.get("arguments").is_none());
        let output = tool_output("call_2", "apply_patch", json!("ok"), "t");
        assert_eq!(output["type"], "custom_tool_call_output");
        assert!(output["id"].as_str().unwrap().starts_with("ctco_"));
        let output = tool_output("call_1", "exec_command", json!([]), "t");
        assert_eq!(output["type"], "function_call_output");
        assert!(output["id"].as_str().unwrap().starts_with("fco_"));
        assert!(output["internal_chat_message_metadata_passthrough"]["create_time"].is_f64());
    }

    #[test]
    fn the_context_names_every_part_with_its_provenance() {
        let developer = context_message("developer", DEVELOPER_CONTEXT, "t");
        let metadata = &developer["internal_chat_message_metadata_passthrough"];
        assert_eq!(
            metadata["content_item_kinds"],
            json!([
                "host_skills.instructions",
                "permissions.instructions",
                "tools.deferred_namespaces"
            ])
        );
        assert_eq!(
            metadata["content_item_metadata"][2],
            json!({"provenance": {"namespace": "tool_search", "type": "tool"}})
        );
        assert_eq!(developer["content"].as_array().map(Vec::len), Some(3));
        let input = user_input(&json!([{"type": "text", "text": "hi"}]), "t");
        assert_eq!(
            input["content"],
            json!([{"type": "input_text", "text": "hi"}])
        );
        assert_eq!(
            input["internal_chat_message_metadata_passthrough"]["content_item_kinds"],
            json!(["user.text"])
        );
    }
}
