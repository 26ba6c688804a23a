//! The model's plain tool calls: the checklist plan (`update_plan`) and the driver's dynamic
//! tools (`item/tool/call`, answered within `limits.client_answer_ms`).

use super::{Flow, TurnRun};
use crate::ids;
use crate::model_log::ModelLogEntry;
use crate::protocol::shapes::{self, DynamicToolView};
use crate::scenario::model::PlanStepSpec;
use serde_json::{json, Value};
use std::time::Instant;

const DYNAMIC_TOOL_FAILED: &str = "dynamic tool request failed";

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
        let Ok(answer) = self.wait_answer(request_id) else {
            // Interrupted, or no answer in time: the turn is interrupted.
            return Flow::Interrupted;
        };
        let (success, content_items, output) = match answer.get("result") {
            Some(result) => {
                let items = result
                    .get("contentItems")
                    .cloned()
                    .unwrap_or_else(|| json!([]));
                let success = result
                    .get("success")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                (success, items.clone(), tool_output_text(&items))
            }
            None => (
                false,
                json!([{"type": "inputText", "text": DYNAMIC_TOOL_FAILED}]),
                DYNAMIC_TOOL_FAILED.to_string(),
            ),
        };
        let completed = shapes::now_ms();
        let done = shapes::dynamic_tool_item(&DynamicToolView {
            status: if success { "completed" } else { "failed" },
            content_items,
            success: json!(success),
            duration_ms: Some(started_at.elapsed().as_millis() as u64),
            completed: Some(completed),
            ..view
        });
        self.complete_item(done, completed);
        self.log(ModelLogEntry::ToolOutput { call_id, output });
        Flow::Continue
    }
}

/// One text item goes back as a string; several as a JSON array of `input_text` items.
fn tool_output_text(items: &Value) -> String {
    let texts: Vec<&str> = items
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    if texts.len() == 1 {
        texts[0].to_string()
    } else {
        json!(texts
            .iter()
            .map(|t| json!({"type": "input_text", "text": t}))
            .collect::<Vec<_>>())
        .to_string()
    }
}
