//! Rendering one scripted response as a Responses API event stream.
//!
//! Frames are `event: TYPE\ndata: JSON\n\n`. The body is rendered whole and sent at once: the
//! mock never needs to pace a stream, and a JSON line from `serde_json::to_string` never holds a
//! newline, so the framing cannot break (no SSE crate needed for this one-way rendering).

use super::script::FailureKind;
use super::tools::{CallKind, Offered, Route};
use fake_app_server::scenario::model::{
    proposed_plan_block, stream_chunks, ModelStep, TemplateContext,
};
use serde_json::{json, Value};

/// A tool call the mock put into a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EmittedCall {
    pub(crate) call_id: String,
    pub(crate) name: String,
    /// The arguments as JSON text (for a freeform call, the script's `{"input": …}`: the model
    /// log records calls alike for both players).
    pub(crate) arguments: String,
    pub(crate) kind: CallKind,
    /// What a freeform (`custom_tool_call`) call carries: the text itself.
    pub(crate) input: String,
    /// The namespace the call must name: the one Codex offered the tool in, or an MCP tool's
    /// (`mcp__<server>`; the call then names the tool without that prefix, and `name` keeps the
    /// script's `mcp__<server>__<tool>` for the model log).
    pub(crate) namespace: Option<String>,
}

/// The rendered stream and the calls it carries.
#[derive(Debug, Clone)]
pub(crate) struct RenderedResponse {
    pub(crate) body: String,
    pub(crate) calls: Vec<EmittedCall>,
}

/// Ids of one response; `stem` is unique per (thread, turn, response).
pub(crate) struct ResponseIds {
    pub(crate) stem: String,
}

impl ResponseIds {
    fn response(&self) -> String {
        format!("resp_{}", self.stem)
    }
    fn item(&self, index: usize) -> String {
        format!("item_{}_{index}", self.stem)
    }
    fn call(&self, index: usize) -> String {
        format!("call_{}_{index}", self.stem)
    }
    /// A search precedes the call of the same (turn, response): its own id space.
    fn search(&self, index: usize) -> String {
        format!("search_{}_{index}", self.stem)
    }
}

pub(crate) fn render(
    steps: &[ModelStep],
    template: &TemplateContext,
    offered: &Offered,
    ids: &ResponseIds,
    failure: Option<&FailureKind>,
) -> RenderedResponse {
    let mut body = String::new();
    let mut calls = Vec::new();
    let response_id = ids.response();
    frame(
        &mut body,
        "response.created",
        json!({"response": {"id": response_id, "status": "in_progress"}}),
    );
    if let Some(FailureKind::StreamDropped) = failure {
        // Cut before any item: the retry Codex makes then streams the whole response once.
        return RenderedResponse { body, calls };
    }
    // A deferred tool is searched for in a response of its own (nothing else in it, so the
    // response's text is said once, with the call the search makes possible).
    let search = steps
        .iter()
        .find_map(|step| match output_item(step, template) {
            OutputItem::Call { name, .. } => match offered.route(offered.resolve(&name)) {
                Route::SearchFirst { query } => Some(query),
                _ => None,
            },
            OutputItem::Message(_) => None,
        });
    if let Some(query) = &search {
        search_frames(&mut body, &ids.search(0), query);
    }
    for (index, step) in steps.iter().enumerate().filter(|_| search.is_none()) {
        match output_item(step, template) {
            OutputItem::Message(text) => message_frames(&mut body, index, &ids.item(index), &text),
            OutputItem::Call { name, arguments } => {
                let name = offered.resolve(&name).to_string();
                let kind = offered.call_kind(&name);
                let namespace = match offered.route(&name) {
                    Route::Namespaced { namespace } => Some(namespace),
                    _ => offered.namespace_of(&name).map(str::to_string),
                };
                let input = match kind {
                    CallKind::Custom => freeform_input(&arguments),
                    CallKind::Function => String::new(),
                };
                let call = EmittedCall {
                    call_id: ids.call(index),
                    namespace,
                    name,
                    arguments,
                    kind,
                    input,
                };
                call_frames(&mut body, index, &ids.item(index), &call);
                calls.push(call);
            }
        }
    }
    match failure {
        Some(FailureKind::StreamClosedEarly | FailureKind::StreamDropped) => {}
        Some(FailureKind::ResponseFailed { message }) => frame(
            &mut body,
            "response.failed",
            json!({"response": {"id": response_id, "status": "failed",
                "error": {"code": "server_error", "message": message}}}),
        ),
        _ => frame(
            &mut body,
            "response.completed",
            json!({"response": {"id": response_id, "status": "completed", "usage": {
                "input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 15}}}),
        ),
    }
    RenderedResponse { body, calls }
}

enum OutputItem {
    Message(String),
    Call { name: String, arguments: String },
}

fn output_item(step: &ModelStep, template: &TemplateContext) -> OutputItem {
    let expand = |text: &str| template.expand(text);
    match step {
        ModelStep::Message { text } => OutputItem::Message(expand(text)),
        // Codex turns a `<proposed_plan>` block of an assistant message into a `plan` item.
        ModelStep::Plan { text } => OutputItem::Message(proposed_plan_block(&expand(text))),
        ModelStep::Shell {
            cmd,
            escalate,
            justification,
            ..
        } => {
            let mut args = json!({"cmd": expand(cmd)});
            if *escalate {
                args["sandbox_permissions"] = json!("require_escalated");
                args["justification"] = json!(expand(
                    justification
                        .as_deref()
                        .unwrap_or("Allow this command to run outside the sandbox?")
                ));
            }
            OutputItem::Call {
                name: "exec_command".into(),
                arguments: args.to_string(),
            }
        }
        ModelStep::ToolCall { name, arguments } => OutputItem::Call {
            name: name.clone(),
            arguments: template.expand_value(arguments).to_string(),
        },
        // Codex's `update_plan` spells statuses in snake_case. Codex 0.169 without a model
        // catalog does not offer this tool and answers `unsupported call: update_plan`.
        ModelStep::PlanUpdate { explanation, steps } => {
            let plan: Vec<Value> = steps
                .iter()
                .map(|s| json!({"step": expand(&s.step), "status": snake_status(&s.status)}))
                .collect();
            let mut args = json!({"plan": plan});
            if let Some(explanation) = explanation {
                args["explanation"] = json!(expand(explanation));
            }
            OutputItem::Call {
                name: "update_plan".into(),
                arguments: args.to_string(),
            }
        }
    }
}

/// The text a freeform call carries: the script writes it as `{input = "…"}` (what the fake's
/// `apply_patch` reads; checked when the scenario loads).
fn freeform_input(arguments: &str) -> String {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .and_then(|args| {
            args.get("input")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

fn snake_status(status: &str) -> String {
    match status {
        "inProgress" => "in_progress".into(),
        other => other.into(),
    }
}

fn message_frames(body: &mut String, index: usize, item_id: &str, text: &str) {
    frame(
        body,
        "response.output_item.added",
        json!({"output_index": index, "item": {"type": "message", "id": item_id,
            "role": "assistant", "status": "in_progress", "content": []}}),
    );
    // The chunking the fake app-server replays as `item/agentMessage/delta`s.
    for chunk in stream_chunks(text) {
        frame(
            body,
            "response.output_text.delta",
            json!({"item_id": item_id, "output_index": index, "content_index": 0, "delta": chunk}),
        );
    }
    frame(
        body,
        "response.output_item.done",
        json!({"output_index": index, "item": {"type": "message", "id": item_id,
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
    );
}

/// A tool call's four frames (added, delta, done, item done). A function call carries JSON
/// `arguments`; a freeform call (`custom_tool_call`) carries its text as `input` (Codex 0.169
/// applies an `apply_patch` sent so, and not one sent as a `function_call`; measured).
fn call_frames(body: &mut String, index: usize, item_id: &str, call: &EmittedCall) {
    let (item_type, field, events, payload) = match call.kind {
        CallKind::Function => (
            "function_call",
            "arguments",
            [
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
            ],
            &call.arguments,
        ),
        CallKind::Custom => (
            "custom_tool_call",
            "input",
            [
                "response.custom_tool_call_input.delta",
                "response.custom_tool_call_input.done",
            ],
            &call.input,
        ),
    };
    let item = |text: &str, status: &str| {
        let mut item = json!({"type": item_type, "id": item_id, "call_id": call.call_id,
            "name": call.name, "status": status});
        item[field] = json!(text);
        if let Some(namespace) = &call.namespace {
            item["namespace"] = json!(namespace);
            // An MCP tool's call names it without its namespace's `mcp__<server>__` prefix.
            if let Some(tool) = call
                .name
                .strip_prefix(namespace.as_str())
                .and_then(|rest| rest.strip_prefix("__"))
            {
                item["name"] = json!(tool);
            }
        }
        item
    };
    frame(
        body,
        "response.output_item.added",
        json!({"output_index": index, "item": item("", "in_progress")}),
    );
    frame(
        body,
        events[0],
        json!({"item_id": item_id, "output_index": index, "delta": payload}),
    );
    let mut done = json!({"item_id": item_id, "output_index": index});
    done[field] = json!(payload);
    frame(body, events[1], done);
    frame(
        body,
        "response.output_item.done",
        json!({"output_index": index, "item": item(payload, "completed")}),
    );
}

/// A client-executed `tool_search` call (Codex 0.169 runs the search itself and answers with a
/// `tool_search_output`; measured). Its `arguments` is an object, not JSON text.
fn search_frames(body: &mut String, call_id: &str, query: &str) {
    let item = json!({"type": "tool_search_call", "id": format!("item_{call_id}"), "call_id": call_id,
        "execution": "client", "arguments": {"query": query}, "status": "completed"});
    frame(
        body,
        "response.output_item.added",
        json!({"output_index": 0, "item": item}),
    );
    frame(
        body,
        "response.output_item.done",
        json!({"output_index": 0, "item": item}),
    );
}

fn frame(body: &mut String, event: &str, mut data: Value) {
    data["type"] = json!(event);
    body.push_str("event: ");
    body.push_str(event);
    body.push_str("\ndata: ");
    body.push_str(&data.to_string());
    body.push_str("\n\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(id: &str) -> TemplateContext {
        TemplateContext {
            probe_id: id.into(),
            ..Default::default()
        }
    }

    fn events(body: &str) -> Vec<(String, Value)> {
        body.split("\n\n")
            .filter(|f| !f.is_empty())
            .map(|f| {
                let (event, data) = f.split_once('\n').unwrap();
                let data: Value =
                    serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
                let event = event.strip_prefix("event: ").unwrap().to_string();
                assert_eq!(data["type"], json!(event));
                (event, data)
            })
            .collect()
    }

    #[test]
    fn an_escalated_shell_step_renders_an_exec_command_call() {
        let steps = [ModelStep::Shell {
            cmd: "printf p > plan-write-probe-{probe_id}.txt".into(),
            escalate: true,
            justification: Some("Allow writing the probe file?".into()),
            review: None,
        }];
        let ids = ResponseIds {
            stem: "ab12_0_0".into(),
        };
        let out = render(&steps, &probe("ab12"), &Offered::default(), &ids, None);
        assert_eq!(out.calls.len(), 1);
        let args: Value = serde_json::from_str(&out.calls[0].arguments).unwrap();
        assert_eq!(args["cmd"], "printf p > plan-write-probe-ab12.txt");
        assert_eq!(args["sandbox_permissions"], "require_escalated");
        assert_eq!(args["justification"], "Allow writing the probe file?");
        let names: Vec<String> = events(&out.body).into_iter().map(|(e, _)| e).collect();
        assert_eq!(
            names,
            [
                "response.created",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed"
            ]
        );
    }

    #[test]
    fn failures_shape_the_stream() {
        let steps = [ModelStep::Message { text: "hi".into() }];
        let ids = ResponseIds { stem: "x".into() };
        let failed = render(
            &steps,
            &probe("p"),
            &Offered::default(),
            &ids,
            Some(&FailureKind::ResponseFailed {
                message: "boom".into(),
            }),
        );
        let ev = events(&failed.body);
        assert_eq!(ev.last().unwrap().0, "response.failed");
        assert_eq!(ev.last().unwrap().1["response"]["error"]["message"], "boom");
        assert_eq!(ev[ev.len() - 2].0, "response.output_item.done");
        let closed = render(
            &steps,
            &probe("p"),
            &Offered::default(),
            &ids,
            Some(&FailureKind::StreamClosedEarly),
        );
        let ev = events(&closed.body);
        assert_eq!(ev.last().unwrap().0, "response.output_item.done");
        let dropped = render(
            &steps,
            &probe("p"),
            &Offered::default(),
            &ids,
            Some(&FailureKind::StreamDropped),
        );
        let ev = events(&dropped.body);
        assert_eq!(ev.len(), 1, "{ev:?}");
        assert_eq!(ev[0].0, "response.created");
    }

    #[test]
    fn plan_updates_use_snake_case_statuses_and_plans_are_proposed_plan_blocks() {
        let steps = [
            ModelStep::Plan {
                text: "# Plan\n1. a".into(),
            },
            ModelStep::PlanUpdate {
                explanation: None,
                steps: vec![fake_app_server::scenario::model::PlanStepSpec {
                    step: "a".into(),
                    status: "inProgress".into(),
                }],
            },
        ];
        let out = render(
            &steps,
            &probe("p"),
            &Offered::default(),
            &ResponseIds { stem: "s".into() },
            None,
        );
        assert!(out
            .body
            .contains("<proposed_plan>\\n# Plan\\n1. a\\n</proposed_plan>"));
        assert_eq!(out.calls[0].name, "update_plan");
        assert!(out.calls[0].arguments.contains("\"in_progress\""));
    }

    #[test]
    fn apply_patch_is_a_custom_tool_call_and_the_dynamic_tool_is_resolved() {
        let patch = "*** Begin Patch\n*** Add File: p-{probe_id}.txt\n+probe\n*** End Patch\n";
        let steps = [
            ModelStep::ToolCall {
                name: "apply_patch".into(),
                arguments: json!({"input": patch}),
            },
            ModelStep::ToolCall {
                name: "{dynamic_tool}".into(),
                arguments: json!({}),
            },
        ];
        let offered = Offered {
            freeform_apply_patch: true,
            first_dynamic_tool: Some("paperclip_finish".into()),
            ..Offered::default()
        };
        let out = render(
            &steps,
            &probe("ab"),
            &offered,
            &ResponseIds { stem: "s".into() },
            None,
        );
        assert_eq!(out.calls[0].kind, CallKind::Custom);
        assert_eq!(
            out.calls[0].input,
            "*** Begin Patch\n*** Add File: p-ab.txt\n+probe\n*** End Patch\n"
        );
        assert_eq!(out.calls[1].name, "paperclip_finish");
        assert_eq!(out.calls[1].kind, CallKind::Function);
        let ev = events(&out.body);
        let done: Vec<&Value> = ev
            .iter()
            .filter(|(e, _)| e == "response.output_item.done")
            .map(|(_, d)| &d["item"])
            .collect();
        assert_eq!(done[0]["type"], "custom_tool_call");
        assert_eq!(done[0]["input"], out.calls[0].input.as_str());
        assert!(done[0].get("arguments").is_none());
        assert_eq!(done[1]["type"], "function_call");
        assert_eq!(done[1]["name"], "paperclip_finish");
        assert!(ev
            .iter()
            .any(|(e, _)| e == "response.custom_tool_call_input.done"));
    }

    /// The items a stream finished, in order.
    fn done_items(body: &str) -> Vec<Value> {
        let mut items = Vec::new();
        for (event, mut data) in events(body) {
            if event == "response.output_item.done" {
                items.push(data["item"].take());
            }
        }
        items
    }

    /// Codex 0.169 defers an MCP tool behind `tool_search` (measured): the response that would
    /// call it is a search alone; once the turn's history holds the search's output, the same
    /// response calls the tool in its namespace, with its text.
    #[test]
    fn a_deferred_mcp_tool_is_searched_for_then_called_in_its_namespace() {
        let steps = [
            ModelStep::Message {
                text: "Working on it.".into(),
            },
            ModelStep::ToolCall {
                name: "mcp__harness__ask_user".into(),
                arguments: json!({}),
            },
        ];
        let ids = ResponseIds { stem: "s".into() };
        let deferred = Offered {
            tool_search: true,
            ..Offered::default()
        };
        let search = render(&steps, &probe("p"), &deferred, &ids, None);
        let items = done_items(&search.body);
        assert_eq!(items.len(), 1, "{}", search.body);
        assert_eq!(items[0]["type"], "tool_search_call");
        assert_eq!(items[0]["execution"], "client");
        assert_eq!(items[0]["arguments"]["query"], "ask_user");
        assert!(search.calls.is_empty());
        let loaded = Offered {
            loaded: vec![("mcp__harness".into(), "ask_user".into())],
            ..deferred
        };
        let call = render(&steps, &probe("p"), &loaded, &ids, None);
        let done = done_items(&call.body);
        assert_eq!(done[0]["type"], "message");
        assert_eq!(done[1]["type"], "function_call");
        assert_eq!(done[1]["name"], "ask_user");
        assert_eq!(done[1]["namespace"], "mcp__harness");
        assert_ne!(done[1]["call_id"], items[0]["call_id"]);
        assert_eq!(call.calls[0].name, "mcp__harness__ask_user");
    }
}
