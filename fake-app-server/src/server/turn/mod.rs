//! Playing one turn of the model script: the notifications and server requests Codex emits for
//! each model step, the tool outputs the model gets back (model log), the scenario's server
//! steps and faults, and the turns the server starts on its own while a goal is active.

use super::auto_review;
use super::state::TurnSignal;
use super::{Shared, TurnPlayerGuard};
use crate::ids;
use crate::model_log::ModelLogEntry;
use crate::protocol::shapes;
use crate::sandbox::policy::Permissions;
use crate::scenario::model::{
    find_marker, plan_item_text, proposed_plan_block, stream_chunks, ModelStep, TemplateContext,
};
use crate::scenario::{ScenarioTurn, ServerStep, TurnFaultKind};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod codex_tools;
mod commands;
mod model_tools;
mod server_actions;
mod server_requests;

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
    /// Whether Codex offers the model `request_permissions` (feature `request_permissions_tool`,
    /// off by default in 0.169).
    pub request_permissions_tool: bool,
    pub input: Value,
    pub user_text: String,
    pub script: ScenarioTurn,
    pub signals: Receiver<TurnSignal>,
    pub self_signal: Sender<TurnSignal>,
}

/// Why a wait for the client's answer ended without one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitEnd {
    /// The client interrupted the turn.
    Interrupted,
    /// `limits.client_answer_ms` passed.
    TimedOut,
}

/// How a step (or the whole turn) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Interrupted,
}

struct TurnRun {
    shared: Arc<Shared>,
    plan: TurnPlan,
    template: TemplateContext,
    items: Vec<Value>,
    steered: Vec<Value>,
    /// Whether input steered into the turn reaches the model's next request. Not before the
    /// first response of a turn the client started: Codex samples a turn's own input alone
    /// first and takes input that arrived meanwhile with the request after it (codex-rs
    /// `run_turn`, `can_drain_pending_input`), so a steer that reaches the fake before the
    /// first step begins plays as one that arrives during it, whichever thread ran first.
    takes_steered_input: bool,
    /// Tokens used so far in this turn.
    tokens: u64,
    /// The files this turn's patches changed: Codex repeats the turn's diff
    /// (`turn/diff/updated`) after every later model response of the turn.
    changes: Vec<crate::apply_patch::Change>,
    /// For a turn the server started on its own (a goal's continuation): the turn that started
    /// the chain (`rootTurnId`); such a turn has no user message.
    root_turn: Option<String>,
    /// The model created or updated the thread's goal in the current response: that response's
    /// tokens do not count for the goal (measured with 0.169: `tokensUsed` counts only the
    /// responses the goal was active through).
    goal_changed: bool,
    /// Server requests the client's interrupt left unanswered: Codex 0.169 resolves them
    /// (`serverRequest/resolved`) only after the interrupted turn's `turn/completed`
    /// (measured with `harness explore`: an approval pending when `turn/interrupt` came).
    unresolved: Vec<u64>,
    /// The client's `turn/interrupt`, answered right before the turn ends
    /// (`server::interrupt`).
    interrupt_answer: Option<crate::server::interrupt::InterruptAnswer>,
}

/// How a turn ends, beyond its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Normal,
    /// The model's stream failed (the scenario's `fail`).
    StreamFailed,
}

/// What the mock model API reports per response (`usage`), so both players report the same.
use shapes::{TOKENS_IN, TOKENS_OUT};

/// How long after a turn completes Codex starts the next one of an active goal: 8 to 65 ms
/// (measured, 0.169 and 0.171).
const SERVER_TURN_DELAY: std::time::Duration = std::time::Duration::from_millis(20);

/// Play a turn the client started, then the turns the server starts on its own after it (while
/// a goal the model created is active, at most `limits.goal_turns`). Codex starts no turn once
/// it has read the end of stdin, so a client that hangs up at `turn/completed` races Codex's
/// timer (measured both ways in one run). The fake always plays the ordering where Codex's
/// timer wins (observed: `turn/started` 11 ms after `turn/completed`, stdin closed 4 ms later):
/// a case that needs the server's turn must not depend on the machine's load. `_running`
/// counts the turn as under way until the chain is over ([`Shared::turn_player`]).
pub fn play(shared: Arc<Shared>, plan: TurnPlan, _running: TurnPlayerGuard) {
    let root = plan.turn_id.clone();
    let mut next = Some((plan, None));
    let mut continuations = 0;
    while let Some((plan, root_turn)) = next.take() {
        let thread_id = plan.thread_id.clone();
        let status = play_one(Arc::clone(&shared), plan, root_turn);
        if status != "completed" || !codex_tools::goal_active(&shared, &thread_id) {
            break;
        }
        if continuations >= shared.scenario.limits.goal_turns {
            eprintln!("fake-app-server: the goal of thread {thread_id} is still active after {continuations} turns the server started (limits.goal_turns); no more");
            break;
        }
        std::thread::sleep(SERVER_TURN_DELAY);
        continuations += 1;
        next =
            codex_tools::server_started_plan(&shared, &thread_id).map(|p| (p, Some(root.clone())));
    }
    // No turn followed: what the last one held back goes out now.
    shared.out.release();
}

/// Play one turn; its final status.
fn play_one(shared: Arc<Shared>, plan: TurnPlan, root_turn: Option<String>) -> &'static str {
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
        // A turn the server started has no input of its own: steered input goes first.
        takes_steered_input: root_turn.is_some(),
        tokens: 0,
        changes: Vec::new(),
        unresolved: Vec::new(),
        interrupt_answer: None,
        root_turn,
        goal_changed: false,
    };
    run.play()
}

impl TurnRun {
    fn send(&self, message: Value) {
        self.shared.out.send(&message);
    }

    fn ids(&self) -> (&str, &str) {
        (&self.plan.thread_id, &self.plan.turn_id)
    }

    fn play(&mut self) -> &'static str {
        let started = Instant::now();
        let started_s = shapes::now_s();
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        self.persist_turn_count();
        self.send(shapes::thread_status(
            &thread_id,
            shapes::active_status(&[]),
        ));
        let turn_started = self.turn_object(&shapes::TurnView {
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
        if self.root_turn.is_none() {
            let input = self.plan.input.clone();
            self.user_message(&input);
            // A turn the server started itself has no user input for the model to read.
            self.log(ModelLogEntry::UserInput {
                text: self.plan.user_text.clone(),
            });
        }
        let mut script = self.plan.script.clone();
        let mut status = "completed";
        let mut error = Value::Null;
        if script
            .fault
            .as_ref()
            .is_some_and(|f| f.after_step.is_none())
        {
            self.inject_fault();
        }
        if self.server_steps(&script.server_steps, |s| {
            s.after_step.is_none() && !s.after_turn
        }) == Flow::Interrupted
        {
            status = "interrupted";
        }
        // A script plays until its last response, unless input steered into the turn reaches
        // the model first: then the script the model switches to plays, in the same turn.
        'script: while status == "completed" {
            for (index, step) in script.steps.iter().enumerate() {
                if let Flow::Interrupted = self.drain_signals() {
                    status = "interrupted";
                    break 'script;
                }
                if self.takes_steered_input && begins_response(&script.steps, index) {
                    if let Some(next) = self.steered_script() {
                        script = next;
                        continue 'script;
                    }
                }
                if let Flow::Interrupted = self.step(step) {
                    // The response that called the tool had ended: Codex 0.169 still reports its
                    // usage before the interrupted turn ends (measured with a cancelled approval).
                    if ends_response(step) {
                        self.token_usage();
                    }
                    status = "interrupted";
                    break 'script;
                }
                if ends_response(step) {
                    self.token_usage();
                    self.takes_steered_input = true;
                }
                if self.server_steps(&script.server_steps, |s| s.after_step == Some(index))
                    == Flow::Interrupted
                {
                    status = "interrupted";
                    break 'script;
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
            self.takes_steered_input = true;
            // Input steered in meanwhile reaches the model with one more request: after a tool
            // step, or in place of the final response it arrived during (measured: Codex 0.169
            // drops a response the steer cut short and asks again with both inputs).
            if let Some(next) = self.steered_script() {
                script = next;
                continue;
            }
            break;
        }
        if status == "completed" && script.fail.is_none() && !script.interrupted {
            // The final model response (the one that ends the turn).
            self.token_usage();
        }
        if status == "completed" && script.interrupted {
            eprintln!("fake-app-server: the server interrupts turn {turn_id} as the scenario asks");
            status = "interrupted";
        }
        let mut ending = Ending::Normal;
        if status == "completed" {
            if let Some(failure) = &script.fail {
                let message = format!("stream disconnected before completion: {}", failure.message);
                let turn_error = json!({"message": message, "codexErrorInfo": "other", "additionalDetails": null, "misalignment": null});
                // Codex 0.169 when the model's stream fails (measured with a `response.failed`):
                // the account's rate limits (no usage: the response had none), the thread in
                // `systemError`, the `error`, then the turn ends failed (see `finish`).
                self.rate_limits();
                self.send(shapes::thread_status(
                    &thread_id,
                    json!({"type": "systemError"}),
                ));
                if failure.error_notification {
                    self.send(shapes::notification(
                        "error",
                        json!({"error": turn_error, "willRetry": false, "threadId": thread_id, "turnId": turn_id}),
                    ));
                }
                status = "failed";
                error = turn_error;
                ending = Ending::StreamFailed;
            }
        }
        // What follows the turn's end reaches the client in the same write as its
        // `turn/completed` (`Output::hold`): the steps after the turn, the turns the server
        // starts on its own while a goal is active (whole: released once the chain is over, so
        // a client that hangs up at its own turn's end has them all, every run).
        if let Some(answer) = self.interrupt_answer.take() {
            answer.answer_now();
        }
        let goal_goes_on =
            status == "completed" && codex_tools::goal_active(&self.shared, &thread_id);
        if goal_goes_on || script.server_steps.iter().any(|s| s.after_turn) {
            self.shared.out.hold();
        }
        self.finish(status, error, ending, started_s, started.elapsed());
        for request_id in std::mem::take(&mut self.unresolved) {
            self.send(shapes::notification(
                "serverRequest/resolved",
                json!({"threadId": thread_id, "requestId": request_id}),
            ));
        }
        self.server_steps(&script.server_steps, |s| s.after_turn);
        if !goal_goes_on {
            self.shared.out.release();
        }
        status
    }

    /// Run the server steps `which` selects, in order; `Interrupted` when one ended the turn.
    fn server_steps(&mut self, steps: &[ServerStep], which: impl Fn(&ServerStep) -> bool) -> Flow {
        for step in steps.iter().filter(|s| which(s)) {
            if self.server_step(&step.action, step.after_turn) == Flow::Interrupted {
                return Flow::Interrupted;
            }
        }
        Flow::Continue
    }

    /// A turn object, rooted in the chain's first turn for a turn the server started.
    fn turn_object(&self, view: &shapes::TurnView) -> Value {
        let mut turn = shapes::turn(view);
        if let Some(root) = &self.root_turn {
            turn["rootTurnId"] = json!(root);
        }
        turn
    }

    /// Record that the thread started this turn before anything can go wrong in it: a
    /// relaunched server resuming the thread after a crash plays the script's next turn, as
    /// Codex's rollout keeps the interrupted turn.
    fn persist_turn_count(&self) {
        if let Some(thread) = self.shared.state().threads.get(&self.plan.thread_id) {
            thread.persist();
        }
    }

    /// The user's input as a `userMessage` item of the turn (`item/started` + `item/completed`).
    fn user_message(&mut self, input: &Value) {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let now = shapes::now_ms();
        let user_id = ids::uuid_v7();
        let user_item = shapes::user_message_item(&user_id, input, now, None);
        self.send(shapes::item_started(user_item, &thread_id, &turn_id, now));
        let user_done = shapes::user_message_item(&user_id, input, now, Some(now));
        self.complete_item(user_done, now);
    }

    /// `thread/tokenUsage/updated` after one model response, with the mock model API's usage.
    fn token_usage(&mut self) {
        let responses_before = self.plan.tokens_before / (TOKENS_IN + TOKENS_OUT);
        self.tokens += TOKENS_IN + TOKENS_OUT;
        let responses = responses_before + self.tokens / (TOKENS_IN + TOKENS_OUT);
        let (thread_id, turn_id) = self.ids();
        self.send(shapes::token_usage_updated(
            thread_id,
            turn_id,
            responses,
            super::settings::FALLBACK_CONTEXT_WINDOW,
        ));
        // Codex 0.169 follows every usage report with the account's rate limits.
        self.rate_limits();
        // Once a patch changed files, every later response repeats the turn's diff (measured).
        if !self.changes.is_empty() {
            self.turn_diff();
        }
        if !std::mem::take(&mut self.goal_changed) {
            self.goal_tokens(TOKENS_IN + TOKENS_OUT);
        }
    }

    /// The account's rate limits after a model response; against a custom provider they are
    /// all unknown (measured with 0.169).
    fn rate_limits(&self) {
        self.send(shapes::notification(
            "account/rateLimits/updated",
            json!({"rateLimits": {"limitId": "codex", "limitName": null, "normalModelSlug": null,
                "primary": null, "secondary": null, "credits": null, "individualLimit": null,
                "spendControlReached": null, "planType": null, "rateLimitReachedType": null}}),
        ));
    }

    fn turn_diff(&self) {
        let (thread_id, turn_id) = self.ids();
        self.send(shapes::notification(
            "turn/diff/updated",
            json!({"threadId": thread_id, "turnId": turn_id, "diff": crate::apply_patch::turn_diff(&self.changes)}),
        ));
    }

    fn finish(
        &mut self,
        status: &str,
        error: Value,
        ending: Ending,
        started_s: u64,
        elapsed: Duration,
    ) {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let completed_s = shapes::now_s();
        let duration_ms = Some(elapsed.as_millis() as u64);
        let full = self.turn_object(&shapes::TurnView {
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
        // A failed or interrupted turn without an agent message reports its items as not loaded,
        // and so does a turn whose model stream failed, whatever it said before (measured with
        // 0.169).
        let (summary_items, view) = if status != "completed" && summary_items.is_empty()
            || ending == Ending::StreamFailed
        {
            (Vec::new(), "notLoaded")
        } else {
            (summary_items, "summary")
        };
        let summary = self.turn_object(&shapes::TurnView {
            id: &turn_id,
            items: summary_items,
            items_view: view,
            status,
            error,
            started_at: Some(started_s),
            completed_at: Some(completed_s),
            duration_ms,
        });
        let has_message = super::state::has_agent_message(&full);
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
        // A completed turn of a durable thread that said something (an agent message; a turn
        // that only planned does not count) is unread: Codex 0.169 says so before the thread
        // goes idle (measured), and so for a turn whose model stream failed, whose thread stays
        // in `systemError` (no idle status; measured).
        // While a goal is active the server goes on with the thread: nothing is unread yet
        // (measured: no `thread/readState/changed` until the goal's last turn).
        let goal_goes_on = codex_tools::goal_active(&self.shared, &thread_id);
        let unread = (status == "completed" && has_message || ending == Ending::StreamFailed)
            && !goal_goes_on;
        if let Some(read_state) = read_state.filter(|r| !r.is_null() && unread) {
            self.send(shapes::notification(
                "thread/readState/changed",
                json!({"threadId": thread_id, "readState": read_state}),
            ));
        }
        if ending != Ending::StreamFailed {
            self.send(shapes::thread_status(&thread_id, shapes::idle_status()));
        }
        self.send(shapes::notification(
            "turn/completed",
            json!({"threadId": thread_id, "turn": summary}),
        ));
        self.shared.turn_finished(&turn_id);
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
                TurnSignal::Interrupt(answer) => {
                    self.interrupt_answer = Some(answer);
                    return Flow::Interrupted;
                }
                TurnSignal::Steer(input) => self.steer(input),
                TurnSignal::ClientAnswer(message) => {
                    eprintln!("WARN fake-app-server: late client answer ignored: {message}");
                }
            }
        }
        Flow::Continue
    }

    /// Input the client steered into the turn: Codex adds it as a `userMessage` item when the
    /// model's current response ends, and the model's next request holds it (measured with
    /// 0.169); [`Self::steered_script`] plays that moment.
    fn steer(&mut self, input: Value) {
        self.steered.push(input);
    }

    /// Wait (bounded by `limits.client_answer_ms`) for the answer to server request `id`.
    fn wait_answer(&mut self, id: u64) -> Result<Value, WaitEnd> {
        let limit = Duration::from_millis(self.shared.scenario.limits.client_answer_ms);
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.plan.signals.recv_timeout(left) {
                Ok(TurnSignal::ClientAnswer(message)) => return Ok(message),
                Ok(TurnSignal::Steer(input)) => self.steer(input),
                Ok(TurnSignal::Interrupt(answer)) => {
                    self.interrupt_answer = Some(answer);
                    self.shared.forget_request(id);
                    return Err(WaitEnd::Interrupted);
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    self.shared.forget_request(id);
                    eprintln!("fake-app-server: no answer to server request {id} within {limit:?}");
                    return Err(WaitEnd::TimedOut);
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
                let name = self.tool_name(name);
                match crate::scenario::codex_tools::parse(&name, &arguments) {
                    Some(Ok(call)) => self.codex_tool(&name, &arguments, call),
                    // Checked when the scenario loaded.
                    Some(Err(message)) => {
                        eprintln!("fake-app-server: {message}");
                        Flow::Continue
                    }
                    None => self.tool_call(&name, &arguments),
                }
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
