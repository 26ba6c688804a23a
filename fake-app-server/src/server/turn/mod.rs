//! Playing one turn of the model script: the notifications and server requests Codex emits for
//! each model step, the tool outputs the model gets back (model log), and the scenario's faults.

use super::auto_review;
use super::state::TurnSignal;
use super::Shared;
use crate::ids;
use crate::model_log::ModelLogEntry;
use crate::protocol::shapes::{self, DynamicToolView};
use crate::sandbox::policy::Permissions;
use crate::scenario::model::{
    find_marker, plan_item_text, proposed_plan_block, stream_chunks, ModelStep, PlanStepSpec,
    TemplateContext,
};
use crate::scenario::{ScenarioTurn, TurnFaultKind};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod commands;

/// Everything a turn needs, captured when turn/start was accepted.
pub struct TurnPlan {
    pub thread_id: String,
    pub turn_id: String,
    pub cwd: PathBuf,
    pub permissions: Permissions,
    pub approval_policy: Value,
    /// `user` or `auto_review` (see [`TurnRun::auto_review`]).
    pub approvals_reviewer: String,
    /// The thread is in plan collaboration mode (`collaborationMode.mode == "plan"`): only then
    /// does Codex turn a `<proposed_plan>` block into a `plan` item.
    pub plan_mode: bool,
    /// Tokens the thread used before this turn (`thread/tokenUsage/updated` reports totals).
    pub tokens_before: u64,
    pub dynamic_tools: Vec<String>,
    pub input: Value,
    pub user_text: String,
    pub script: ScenarioTurn,
    pub signals: Receiver<TurnSignal>,
    pub self_signal: Sender<TurnSignal>,
}

/// How a step (or the whole turn) ended.
enum Flow {
    Continue,
    Interrupted,
}

const DYNAMIC_TOOL_FAILED: &str = "dynamic tool request failed";

struct TurnRun {
    shared: Arc<Shared>,
    plan: TurnPlan,
    template: TemplateContext,
    items: Vec<Value>,
    steered: Vec<Value>,
    /// Tokens used so far in this turn.
    tokens: u64,
}

/// What the mock model API reports per response (`usage`), so both players report the same.
const TOKENS_IN: u64 = 10;
const TOKENS_OUT: u64 = 5;

pub fn play(shared: Arc<Shared>, plan: TurnPlan) {
    let template = TemplateContext {
        probe_id: ids::probe_id_for(&plan.thread_id),
        write_outcome: None,
        user_marker: find_marker(&plan.user_text),
    };
    let mut run = TurnRun {
        shared,
        plan,
        template,
        items: Vec::new(),
        steered: Vec::new(),
        tokens: 0,
    };
    run.play();
}

impl TurnRun {
    fn send(&self, message: Value) {
        self.shared.out.send(&message);
    }

    fn ids(&self) -> (&str, &str) {
        (&self.plan.thread_id, &self.plan.turn_id)
    }

    fn play(&mut self) {
        let started = Instant::now();
        let started_s = shapes::now_s();
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        self.send(shapes::thread_status(
            &thread_id,
            shapes::active_status(&[]),
        ));
        let turn_started = shapes::turn(&shapes::TurnView {
            id: &turn_id,
            items: Vec::new(),
            items_view: "notLoaded",
            status: "inProgress",
            error: Value::Null,
            started_at: Some(started_s),
            completed_at: None,
            duration_ms: None,
        });
        self.send(shapes::notification(
            "turn/started",
            json!({"threadId": thread_id, "turn": turn_started}),
        ));
        let now = shapes::now_ms();
        let user_id = ids::uuid_v7();
        let user_item = shapes::user_message_item(&user_id, &self.plan.input, now, None);
        self.send(shapes::item_started(user_item, &thread_id, &turn_id, now));
        let user_done = shapes::user_message_item(&user_id, &self.plan.input, now, Some(now));
        self.complete_item(user_done, now);

        self.log(ModelLogEntry::UserInput {
            text: self.plan.user_text.clone(),
        });
        let mut script = self.plan.script.clone();
        let mut status = "completed";
        let mut error = Value::Null;
        // A script plays until its last response, unless input steered into the turn reaches
        // the model first: then the script the model switches to plays, in the same turn.
        'script: loop {
            if script
                .fault
                .as_ref()
                .is_some_and(|f| f.after_step.is_none())
            {
                self.inject_fault();
            }
            for (index, step) in script.steps.iter().enumerate() {
                if let Flow::Interrupted = self.drain_signals() {
                    status = "interrupted";
                    break 'script;
                }
                if begins_response(&script.steps, index) {
                    if let Some(next) = self.steered_script() {
                        script = next;
                        continue 'script;
                    }
                }
                if let Flow::Interrupted = self.step(step) {
                    status = "interrupted";
                    break 'script;
                }
                if ends_response(step) {
                    self.token_usage();
                }
                if script
                    .fault
                    .as_ref()
                    .is_some_and(|f| f.after_step == Some(index))
                {
                    self.inject_fault();
                }
            }
            if let Flow::Interrupted = self.drain_signals() {
                status = "interrupted";
                break;
            }
            // After a tool step the model is asked once more: that request carries what was
            // steered in meanwhile.
            if script.steps.last().is_none_or(ends_response) {
                if let Some(next) = self.steered_script() {
                    script = next;
                    continue;
                }
            }
            if let Some(failure) = &script.fail {
                let message = format!("stream disconnected before completion: {}", failure.message);
                let turn_error = json!({"message": message, "codexErrorInfo": "other", "additionalDetails": null});
                self.send(shapes::notification(
                    "error",
                    json!({"error": turn_error, "willRetry": false, "threadId": thread_id, "turnId": turn_id}),
                ));
                status = "failed";
                error = turn_error;
            } else {
                // The final model response (the one that ends the turn).
                self.token_usage();
            }
            break;
        }
        self.finish(status, error, started_s, started.elapsed());
    }

    /// `thread/tokenUsage/updated` after one model response, with the mock model API's usage.
    fn token_usage(&mut self) {
        let responses_before = self.plan.tokens_before / (TOKENS_IN + TOKENS_OUT);
        self.tokens += TOKENS_IN + TOKENS_OUT;
        let responses = responses_before + self.tokens / (TOKENS_IN + TOKENS_OUT);
        let breakdown = |n: u64| {
            json!({"cacheWriteInputTokens": 0, "cachedInputTokens": 0, "inputTokens": TOKENS_IN * n,
                   "outputTokens": TOKENS_OUT * n, "reasoningOutputTokens": 0, "totalTokens": (TOKENS_IN + TOKENS_OUT) * n})
        };
        let (thread_id, turn_id) = self.ids();
        let message = shapes::notification(
            "thread/tokenUsage/updated",
            json!({"threadId": thread_id, "turnId": turn_id, "tokenUsage": {
                "last": breakdown(1), "total": breakdown(responses),
                "modelContextWindow": super::settings::FALLBACK_CONTEXT_WINDOW}}),
        );
        self.send(message);
        // Codex 0.169 follows every usage report with the account's rate limits; against a
        // custom provider they are all unknown (measured).
        self.send(shapes::notification(
            "account/rateLimits/updated",
            json!({"rateLimits": {"limitId": "codex", "limitName": null, "normalModelSlug": null,
                "primary": null, "secondary": null, "credits": null, "individualLimit": null,
                "spendControlReached": null, "planType": null, "rateLimitReachedType": null}}),
        ));
    }

    fn finish(&mut self, status: &str, error: Value, started_s: u64, elapsed: Duration) {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let completed_s = shapes::now_s();
        let duration_ms = Some(elapsed.as_millis() as u64);
        let full = shapes::turn(&shapes::TurnView {
            id: &turn_id,
            items: self.items.clone(),
            items_view: "full",
            status,
            error: error.clone(),
            started_at: Some(started_s),
            completed_at: Some(completed_s),
            duration_ms,
        });
        // Only the final agent message travels in turn/completed (Codex's "summary" view).
        let summary_items: Vec<Value> = self
            .items
            .iter()
            .rev()
            .find(|item| item.get("type").and_then(Value::as_str) == Some("agentMessage"))
            .cloned()
            .into_iter()
            .collect();
        let (summary_items, view) = if status == "interrupted" && summary_items.is_empty() {
            (Vec::new(), "notLoaded")
        } else {
            (summary_items, "summary")
        };
        let summary = shapes::turn(&shapes::TurnView {
            id: &turn_id,
            items: summary_items,
            items_view: view,
            status,
            error,
            started_at: Some(started_s),
            completed_at: Some(completed_s),
            duration_ms,
        });
        let read_state = {
            let mut state = self.shared.state();
            state.threads.get_mut(&thread_id).map(|thread| {
                thread.turns.push(full);
                thread.active = None;
                thread.tokens_used = self.plan.tokens_before + self.tokens;
                thread.updated_at = completed_s;
                thread.persist();
                thread.read_state()
            })
        };
        // A completed turn of a durable thread is unread: Codex 0.169 says so before the thread
        // goes idle (measured).
        if let Some(read_state) = read_state.filter(|r| !r.is_null() && status == "completed") {
            self.send(shapes::notification(
                "thread/readState/changed",
                json!({"threadId": thread_id, "readState": read_state}),
            ));
        }
        self.send(shapes::thread_status(&thread_id, shapes::idle_status()));
        self.send(shapes::notification(
            "turn/completed",
            json!({"threadId": thread_id, "turn": summary}),
        ));
    }

    /// Input steered into the turn reaches the model with its next request (Codex 0.169,
    /// measured): Codex shows each as a userMessage item of the turn, and the model, having read
    /// more user messages, plays the script of its new position (`threads::steered_script`),
    /// from its start, its templates reading the last steered text. `None` when nothing was
    /// steered since the last request.
    fn steered_script(&mut self) -> Option<ScenarioTurn> {
        if self.steered.is_empty() {
            return None;
        }
        let inputs = std::mem::take(&mut self.steered);
        let mut text = String::new();
        for input in &inputs {
            let (id, now) = (ids::uuid_v7(), shapes::now_ms());
            let (thread_id, turn_id) = self.ids();
            self.send(shapes::item_started(
                shapes::user_message_item(&id, input, now, None),
                thread_id,
                turn_id,
                now,
            ));
            self.complete_item(shapes::user_message_item(&id, input, now, Some(now)), now);
            text = super::threads::user_text(input.as_array().map_or(&[], Vec::as_slice));
            self.log(ModelLogEntry::UserInput { text: text.clone() });
        }
        let script =
            super::threads::steered_script(&self.shared, &self.plan.thread_id, inputs.len())?;
        self.template.user_marker = find_marker(&text);
        self.template.write_outcome = None;
        self.plan.script = script.clone();
        Some(script)
    }

    /// Handle signals that arrived; `Interrupted` if the client interrupted the turn.
    fn drain_signals(&mut self) -> Flow {
        while let Ok(signal) = self.plan.signals.try_recv() {
            match signal {
                TurnSignal::Interrupt => return Flow::Interrupted,
                TurnSignal::Steer(input) => self.steered.push(input),
                TurnSignal::ClientAnswer(message) => {
                    eprintln!("WARN fake-app-server: late client answer ignored: {message}");
                }
            }
        }
        Flow::Continue
    }

    /// Wait (bounded) for the answer to server request `id`.
    fn wait_answer(&mut self, id: u64) -> Result<Value, Flow> {
        let limit = Duration::from_millis(self.shared.scenario.limits.client_answer_ms);
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.plan.signals.recv_timeout(left) {
                Ok(TurnSignal::ClientAnswer(message)) => return Ok(message),
                Ok(TurnSignal::Steer(input)) => self.steered.push(input),
                Ok(TurnSignal::Interrupt) => {
                    self.shared.forget_request(id);
                    return Err(Flow::Interrupted);
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    self.shared.forget_request(id);
                    eprintln!(
                        "fake-app-server: no answer to server request {id} within {limit:?}; the turn is interrupted"
                    );
                    return Err(Flow::Interrupted);
                }
            }
        }
    }

    fn inject_fault(&mut self) {
        let Some(fault) = self.plan.script.fault.clone() else {
            return;
        };
        let (thread_id, turn_id) = self.ids();
        match fault.kind {
            TurnFaultKind::Crash => self.shared.out.crash("crash-mid-turn fault"),
            TurnFaultKind::Hang => {
                let limit = Duration::from_millis(self.shared.scenario.limits.hang_ms);
                eprintln!("fake-app-server: turn {turn_id} hangs for up to {limit:?} as the scenario asks");
                std::thread::sleep(limit);
                self.shared.out.crash("hang fault reached limits.hang_ms");
            }
            TurnFaultKind::GarbageLine => {
                self.shared
                    .out
                    .send_garbage("fake-app-server garbage-line fault: this line is not JSON {");
            }
            TurnFaultKind::OversizedLine => {
                let bytes = fault.bytes.unwrap_or(8 * 1024 * 1024);
                let delta = "x".repeat(bytes);
                let message = shapes::notification(
                    "item/agentMessage/delta",
                    json!({"threadId": thread_id, "turnId": turn_id, "itemId": ids::message_id(), "delta": delta}),
                );
                self.send(message);
            }
        }
    }

    fn step(&mut self, step: &ModelStep) -> Flow {
        match step {
            ModelStep::Shell {
                cmd,
                escalate,
                justification,
                review,
            } => self.shell(
                &self.template.expand(cmd),
                *escalate,
                justification.as_deref(),
                review.as_ref(),
            ),
            ModelStep::Plan { text } if self.plan.plan_mode => {
                self.plan_item(&self.template.expand(text));
                Flow::Continue
            }
            ModelStep::Plan { text } => {
                // Outside plan mode Codex 0.169 leaves the model's `<proposed_plan>` block in
                // the agent message, tags included (measured with the SDK's read-only run).
                self.message(&proposed_plan_block(&self.template.expand(text)));
                Flow::Continue
            }
            ModelStep::PlanUpdate { explanation, steps } => {
                self.plan_update(explanation.as_deref(), steps);
                Flow::Continue
            }
            ModelStep::Message { text } => {
                self.message(&self.template.expand(text));
                Flow::Continue
            }
            ModelStep::ToolCall { name, arguments } => {
                let arguments = self.template.expand_value(arguments);
                self.tool_call(name, &arguments)
            }
        }
    }

    fn log(&self, entry: ModelLogEntry) {
        self.shared.model_log.write(&entry);
    }

    /// An agent message as Codex plays a streamed one: `item/started` with an empty text, one
    /// `item/agentMessage/delta` per chunk the model streamed, then `item/completed` with the
    /// whole text.
    fn message(&mut self, text: &str) {
        let id = ids::message_id();
        self.streamed_item(
            &id,
            text,
            shapes::agent_message_item,
            "item/agentMessage/delta",
        );
    }

    /// A `<proposed_plan>` block: Codex streams the block's body as `item/plan/delta`s (one per
    /// chunk) into a `plan` item, and a message holding nothing but the block yields no
    /// agentMessage item.
    fn plan_item(&mut self, plan: &str) {
        let id = match crate::persona::current().plan_item_ids {
            crate::persona::PlanItemIds::TurnSuffix => format!("{}-plan", self.plan.turn_id),
            crate::persona::PlanItemIds::Uuid => ids::uuid_v7(),
        };
        let text = plan_item_text(plan);
        self.streamed_item(&id, &text, shapes::plan_item, "item/plan/delta");
    }

    /// A streamed text item: `item/started` with an empty text, one `delta_method`
    /// notification per chunk the model streamed, then `item/completed` with the whole text.
    fn streamed_item(
        &mut self,
        id: &str,
        text: &str,
        item: fn(&str, &str, u64, Option<u64>) -> Value,
        delta_method: &str,
    ) {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let now = shapes::now_ms();
        self.send(shapes::item_started(
            item(id, "", now, None),
            &thread_id,
            &turn_id,
            now,
        ));
        for chunk in stream_chunks(text) {
            self.send(shapes::notification(
                delta_method,
                json!({"threadId": thread_id, "turnId": turn_id, "itemId": id, "delta": chunk}),
            ));
        }
        let completed = shapes::now_ms();
        self.complete_item(item(id, text, now, Some(completed)), completed);
    }

    /// Record a finished item in the turn and announce it with `item/completed`.
    fn complete_item(&mut self, done: Value, completed: u64) {
        let (thread_id, turn_id) = self.ids();
        let message = shapes::item_completed(done.clone(), thread_id, turn_id, completed);
        self.items.push(done);
        self.send(message);
    }

    fn plan_update(&mut self, explanation: Option<&str>, steps: &[PlanStepSpec]) {
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

    fn tool_call(&mut self, name: &str, arguments: &Value) -> Flow {
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
        let answer = match self.wait_answer(request_id) {
            Ok(answer) => answer,
            Err(flow) => return flow,
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

/// Step `index` is the first of a model response (each response is a request the model answers).
fn begins_response(steps: &[ModelStep], index: usize) -> bool {
    index == 0 || ends_response(&steps[index - 1])
}

/// A step whose tool output the model must wait for ends a model response (as the mock model
/// API cuts turns into responses).
fn ends_response(step: &ModelStep) -> bool {
    matches!(
        step,
        ModelStep::Shell { .. } | ModelStep::ToolCall { .. } | ModelStep::PlanUpdate { .. }
    )
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
