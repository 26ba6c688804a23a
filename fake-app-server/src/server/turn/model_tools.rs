//! The model's plain tool calls: the checklist plan (`update_plan`) and the driver's dynamic
//! tools (`item/tool/call`, answered within `limits.client_answer_ms`).

use super::{Flow, TurnRun, WaitEnd};
use crate::ids;
use crate::model_log::ModelLogEntry;
use crate::protocol::shapes::{self, DynamicToolView};
use crate::scenario::model::PlanStepSpec;
use serde_json::{json, Value};
use std::time::Instant;

/// What the item and the model are told of a JSON-RPC error answer (Codex 0.169, measured).
const DYNAMIC_TOOL_FAILED: &str = "dynamic tool request failed";
/// What they are told of a result that is not a `DynamicToolCallResponse` (Codex 0.169,
/// measured with `{"decision": 42}`).
const DYNAMIC_TOOL_INVALID: &str = "dynamic tool response was invalid";

/// `DynamicToolCallResponse` of the release's schema: both fields required, every content item
/// one of the schema's kinds (what the item reports is what was read: fields the schema does
/// not have are not kept).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct DynamicToolAnswer {
    content_items: Vec<DynamicToolContentItem>,
    success: bool,
}

#[derive(serde::Deserialize, serde::Serialize)]
#[serde(tag = "type")]
enum DynamicToolContentItem {
    #[serde(rename = "inputText")]
    Text { text: String },
    #[serde(rename = "inputImage", rename_all = "camelCase")]
    Image { image_url: String },
    #[serde(rename = "inputAudio", rename_all = "camelCase")]
    Audio { audio_url: String },
}

/// The answer's outcome: whether it succeeded, the item's `contentItems`, the model's output.
fn dynamic_tool_outcome(answer: &Value) -> (bool, Value, String) {
    let failed = |text: &str| {
        (
            false,
            json!([{"type": "inputText", "text": text}]),
            text.to_string(),
        )
    };
    let Some(result) = answer.get("result") else {
        return failed(DYNAMIC_TOOL_FAILED);
    };
    match serde_json::from_value::<DynamicToolAnswer>(result.clone()) {
        Ok(parsed) => {
            let items = serde_json::to_value(&parsed.content_items).unwrap_or_else(|_| json!([]));
            let output = tool_output_text(&items);
            (parsed.success, items, output)
        }
        Err(_) => failed(DYNAMIC_TOOL_INVALID),
    }
}

impl TurnRun {
    pub(super) fn plan_update(&mut self, explanation: Option<&str>, steps: &[PlanStepSpec]) {
        let (thread_id, turn_id) = self.ids();
        let call_id = ids::call_id();
        let plan: Vec<Value> = steps
            .iter()
            .map(|s| json!({"step": self.template.expand(&s.step), "status": s.status}))
            .collect();
        let explanation = explanation.map(|e| self.template.expand(e));
        self.log(ModelLogEntry::ToolCall {
            call_id: call_id.clone(),
            name: "update_plan".into(),
            arguments: json!({"explanation": explanation, "plan": plan}).to_string(),
        });
        self.send(shapes::notification(
            "turn/plan/updated",
            json!({"threadId": thread_id, "turnId": turn_id, "explanation": explanation, "plan": plan}),
        ));
        self.log(ModelLogEntry::ToolOutput {
            call_id,
            output: "Plan updated".into(),
        });
    }

    /// The tool a step calls: [`crate::scenario::codex_tools::DYNAMIC_TOOL`] stands for the first
    /// dynamic tool the thread registered.
    pub(super) fn tool_name(&self, name: &str) -> String {
        if name == crate::scenario::codex_tools::DYNAMIC_TOOL {
            if let Some(first) = self.plan.dynamic_tools.first() {
                return first.clone();
            }
        }
        name.to_string()
    }

    pub(super) fn tool_call(&mut self, name: &str, arguments: &Value) -> Flow {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let call_id = ids::call_id();
        self.log(ModelLogEntry::ToolCall {
            call_id: call_id.clone(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        });
        if !self.plan.dynamic_tools.iter().any(|t| t == name) {
            self.log(ModelLogEntry::ToolOutput {
                call_id,
                output: format!("unsupported call: {name}"),
            });
            return Flow::Continue;
        }
        let started_at = Instant::now();
        let started = shapes::now_ms();
        let view = DynamicToolView {
            id: &call_id,
            tool: name,
            arguments,
            status: "inProgress",
            content_items: Value::Null,
            success: Value::Null,
            duration_ms: None,
            started,
            completed: None,
        };
        self.send(shapes::item_started(
            shapes::dynamic_tool_item(&view),
            &thread_id,
            &turn_id,
            started,
        ));
        let request_id = self.shared.request_client(
            "item/tool/call",
            json!({"threadId": thread_id, "turnId": turn_id, "callId": call_id, "namespace": null, "tool": name, "arguments": arguments}),
            &self.plan.self_signal,
        );
        let (success, content_items, output) = match self.wait_answer(request_id) {
            Ok(answer) => dynamic_tool_outcome(&answer),
            Err(WaitEnd::Interrupted) => {
                // Codex 0.169 ends the item `failed`, empty, before it answers the interrupt,
                // and tells the model nothing (measured: the corpus's dynamic-tool-late).
                let completed = shapes::now_ms();
                let done = shapes::dynamic_tool_item(&DynamicToolView {
                    status: "failed",
                    content_items: json!([]),
                    success: json!(false),
                    duration_ms: Some(started_at.elapsed().as_millis() as u64),
                    completed: Some(completed),
                    ..view
                });
                self.complete_item(done, completed);
                return Flow::Interrupted;
            }
            // No answer in time: the turn is interrupted.
            Err(WaitEnd::TimedOut) => return Flow::Interrupted,
        };
        let completed = shapes::now_ms();
        let content_items_told = content_items.clone();
        let done = shapes::dynamic_tool_item(&DynamicToolView {
            status: if success { "completed" } else { "failed" },
            content_items,
            success: json!(success),
            duration_ms: Some(started_at.elapsed().as_millis() as u64),
            completed: Some(completed),
            ..view
        });
        self.complete_item(done, completed);
        self.raw_dynamic_tool_output(&call_id, &content_items_told);
        self.log(ModelLogEntry::ToolOutput { call_id, output });
        Flow::Continue
    }
}

/// One text item goes back as a string, none as an empty one; several as a JSON array of
/// `input_text` items.
fn tool_output_text(items: &Value) -> String {
    let texts: Vec<&str> = items
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if texts.len() <= 1 {
        texts.first().copied().unwrap_or_default().to_string()
    } else {
        json!(texts
            .iter()
            .map(|t| json!({"type": "input_text", "text": t}))
            .collect::<Vec<_>>())
        .to_string()
    }
}
