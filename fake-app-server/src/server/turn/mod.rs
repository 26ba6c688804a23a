//! Playing one turn of the model script: the notifications and server requests Codex emits for
//! each model step, the tool outputs the model gets back (model log), the scenario's server
//! steps and faults, and the turns the server starts on its own while a goal is active.

use super::auto_review;
use super::state::TurnSignal;
use super::{Shared, TurnPlayerGuard};
use crate::ids;
use crate::model_log::ModelLogEntry;
use crate::protocol::shapes;
use crate::scenario::model::{find_marker, proposed_plan_block, ModelStep, TemplateContext};
use crate::scenario::{ScenarioTurn, ServerStep, TurnFaultKind, FAKE_LOG_BYTES, MAX_STREAM_DROPS};
use serde_json::{json, Value};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod codex_tools;
mod commands;
mod ending;
mod exec_approval;
mod items;
mod model_tools;
mod plan;
mod raw_events;
pub(crate) mod remembered;
mod server_actions;
mod server_requests;

pub(super) use plan::{TurnPlan, TurnStart};
pub(super) use raw_events::RawEventsTurn;

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
    /// The tools the model called this turn, by call id ([`raw_events`]).
    raw_calls: std::cell::RefCell<Vec<(String, String)>>,
    /// Model responses ended this turn ([`raw_events`]).
    raw_responses: std::cell::Cell<usize>,
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
pub(super) fn play(shared: Arc<Shared>, plan: TurnPlan, _running: TurnPlayerGuard) {
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
        raw_calls: Default::default(),
        raw_responses: Default::default(),
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
        self.begin(started_s);
        let mut script = self.plan.script.clone();
        let mut status = self.play_script(&mut script);
        if status == "completed" && script.fail.is_none() && !script.interrupted {
            // The final model response (the one that ends the turn).
            self.raw_response_completed();
            self.token_usage();
        }
        if status == "completed" && script.interrupted {
            let turn_id = &self.plan.turn_id;
            eprintln!("fake-app-server: the server interrupts turn {turn_id} as the scenario asks");
            status = "interrupted";
        }
        let mut error = Value::Null;
        let mut ending = Ending::Normal;
        if status == "completed" {
            if let Some(failure) = &script.fail {
                error = self.stream_failed(failure);
                status = "failed";
                ending = Ending::StreamFailed;
            }
        }
        self.end(&script, status, error, ending, started_s, started);
        status
    }

    /// The turn as started: the thread active, `turn/started`, and for a turn the client
    /// started, the user's input.
    fn begin(&mut self, started_s: u64) {
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
            self.raw_turn_input(&input);
            self.user_message(&input);
            // A turn the server started itself has no user input for the model to read.
            self.log(ModelLogEntry::UserInput {
                text: self.plan.user_text.clone(),
            });
        }
    }

    /// The model script's steps with the server steps and the fault between them, until its
    /// last response or the turn's interruption; `script` becomes the script the model switched
    /// to when steered input reached it. The turn's status so far.
    fn play_script(&mut self, script: &mut ScenarioTurn) -> &'static str {
        let mut status = "completed";
        if script
            .fault
            .as_ref()
            .is_some_and(|f| f.after_step.is_none())
        {
            self.inject_fault();
        }
        if self.shared.scenario.app_server_log.is_some() {
            server_actions::stderr_flood(FAKE_LOG_BYTES);
        }
        for attempt in 1..=script.stream_drops {
            let message = format!("Reconnecting... {attempt}/{MAX_STREAM_DROPS}");
            self.error_notification(true, Some(&message));
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
                        *script = next;
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
                *script = next;
                continue;
            }
            break;
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
            self.raw_steered_input(input);
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

    /// What the model was told or did, in the model log; the same as raw events
    /// ([`raw_events`]) for a thread that asked for them (a dynamic tool's output is reported
    /// with its content items where it is known, [`Self::raw_dynamic_tool_output`]).
    fn log(&self, entry: ModelLogEntry) {
        match &entry {
            ModelLogEntry::ToolCall {
                call_id,
                name,
                arguments,
            } => self.raw_tool_call(call_id, name, arguments),
            ModelLogEntry::ToolOutput { call_id, output } if !self.is_dynamic_call(call_id) => {
                self.raw_tool_output(call_id, json!(output))
            }
            _ => {}
        }
        self.shared.model_log.write(&entry);
    }

    /// Whether `call_id` called one of the thread's dynamic tools.
    fn is_dynamic_call(&self, call_id: &str) -> bool {
        self.raw_calls
            .borrow()
            .iter()
            .any(|(id, name)| id == call_id && self.plan.dynamic_tools.contains(name))
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
