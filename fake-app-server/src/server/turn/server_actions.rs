//! The server steps of a turn (`crate::scenario::ServerAction`): turn-level errors, other
//! threads' and turns' events, forward-compatibility probes, volume, and waiting for the
//! client's control requests.

use super::{Flow, TurnRun};
use crate::ids;
use crate::protocol::{instances, release_schema, shapes};
use crate::scenario::server_steps::BURST_ITEM_DELTAS;
use crate::scenario::{ForeignScope, ServerAction};
use crate::server::state::TurnSignal;
use serde_json::{json, Value};
use std::io::Write;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

/// What the deliberate unknowns are called: no release has them.
const UNKNOWN_VALUE: &str = "harnessUnknownValue";
/// Readable filler for big legal lines (never whitespace padding).
const FILLER: &str = "The quick brown fox jumps over the lazy dog; ";

/// How long the turn waits after a foreign `turn/completed` (see `let_the_client_react`): far
/// above any client's reaction to a line it has read, far below a turn's bounds.
const CLIENT_REACTION: std::time::Duration = std::time::Duration::from_millis(400);

impl TurnRun {
    /// Run one server step; `finished` when it runs after the turn's `turn/completed`.
    pub(super) fn server_step(&mut self, action: &ServerAction, finished: bool) -> Flow {
        match action {
            ServerAction::Request { method, cmd, patch } => {
                self.server_request(method, cmd.as_deref(), patch.as_deref(), finished)
            }
            ServerAction::UnknownRequest { method } => self.unknown_request(method),
            ServerAction::Error {
                will_retry,
                message,
            } => {
                self.error_notification(*will_retry, message.as_deref());
                Flow::Continue
            }
            ServerAction::ForeignTurn { of } => {
                self.foreign_turn(*of);
                self.let_the_client_react();
                Flow::Continue
            }
            ServerAction::StrayEvents {} => {
                self.stray_events();
                Flow::Continue
            }
            ServerAction::EveryNotification {} => {
                self.every_notification();
                self.let_the_client_react();
                Flow::Continue
            }
            ServerAction::UnknownNotification { method } => {
                let (thread_id, turn_id) = self.ids();
                let message =
                    shapes::notification(method, json!({"threadId": thread_id, "turnId": turn_id}));
                self.shared.out.send_off_schema(&message);
                Flow::Continue
            }
            ServerAction::UnknownItem { item_type } => {
                self.unknown_item(item_type);
                Flow::Continue
            }
            ServerAction::UnknownEnumValues {} => {
                self.unknown_enum_values();
                Flow::Continue
            }
            ServerAction::LongLine { bytes } => {
                self.long_line(*bytes as usize);
                Flow::Continue
            }
            ServerAction::DeltaBurst { count } => {
                self.delta_burst(*count);
                Flow::Continue
            }
            ServerAction::StderrFlood { bytes } => {
                stderr_flood(*bytes as usize);
                Flow::Continue
            }
            ServerAction::WaitForControl { max_ms } => {
                self.wait_for_control(Duration::from_millis(*max_ms))
            }
        }
    }

    /// An `error` notification of the turn: the real Codex's retried stream (`willRetry`), or
    /// its stream failure.
    pub(super) fn error_notification(&self, will_retry: bool, message: Option<&str>) {
        let (thread_id, turn_id) = self.ids();
        let error = if will_retry {
            json!({"message": message.unwrap_or("Reconnecting... 1/5"),
                   "codexErrorInfo": {"responseStreamDisconnected": {"httpStatusCode": null}},
                   "additionalDetails": "stream disconnected before completion: mock failure for testing",
                   "misalignment": null})
        } else {
            json!({"message": message.unwrap_or("stream disconnected before completion: mock failure for testing"),
                   "codexErrorInfo": "other", "additionalDetails": null, "misalignment": null})
        };
        self.send(shapes::notification(
            "error",
            json!({"error": error, "willRetry": will_retry, "threadId": thread_id, "turnId": turn_id}),
        ));
    }

    /// A whole turn that is not the driver's: another thread's (announced by
    /// `thread/started`), or another turn id of the driver's thread.
    /// Hold the turn a moment after sending what a client may wrongly take for the end of its
    /// own turn (another turn's `turn/completed`): a client that ends on it does so before its
    /// own turn completes, whatever its speed, so the wire shows which it waited for.
    fn let_the_client_react(&self) {
        self.shared.out.flush();
        std::thread::sleep(CLIENT_REACTION);
    }

    fn foreign_turn(&mut self, of: ForeignScope) {
        let turn_id = ids::uuid_v7();
        let thread_id = match of {
            ForeignScope::SameThread => self.plan.thread_id.clone(),
            ForeignScope::OtherThread => {
                let thread_id = ids::uuid_v7();
                let (model, provider) = super::super::settings::model_of(&self.shared, None);
                let cwd = self.plan.cwd.display().to_string();
                let now = shapes::now_s();
                let originator = self.shared.state().client_name.clone();
                let thread = shapes::thread(&shapes::ThreadView {
                    id: &thread_id,
                    cwd: &cwd,
                    ephemeral: true,
                    path: None,
                    model: &model,
                    model_provider: &provider,
                    originator: &originator,
                    preview: "",
                    created_at: now,
                    updated_at: now,
                    status: shapes::idle_status(),
                    turns: Vec::new(),
                    history: &shapes::HistoryChoice::default(),
                });
                self.send(shapes::notification(
                    "thread/started",
                    json!({"thread": thread}),
                ));
                self.send(shapes::thread_status(
                    &thread_id,
                    shapes::active_status(&[]),
                ));
                thread_id
            }
        };
        let started_s = shapes::now_s();
        let turn = |status: &str, items: Vec<Value>, done: bool| {
            shapes::turn(&shapes::TurnView {
                id: &turn_id,
                items_view: if done { "summary" } else { "notLoaded" },
                items,
                status,
                error: Value::Null,
                started_at: Some(started_s),
                completed_at: done.then(shapes::now_s),
                duration_ms: done.then_some(1),
            })
        };
        self.send(shapes::notification(
            "turn/started",
            json!({"threadId": thread_id, "turn": turn("inProgress", Vec::new(), false)}),
        ));
        let now = shapes::now_ms();
        let input = json!([{"type": "text", "text": "A turn of someone else."}]);
        let user_id = ids::uuid_v7();
        for (method, completed) in [("item/started", None), ("item/completed", Some(now))] {
            let item = shapes::user_message_item(&user_id, &input, now, completed);
            self.send(item_notification(method, item, &thread_id, &turn_id, now));
        }
        let [started, delta, completed] =
            one_delta_message("Not your turn's answer.", &thread_id, &turn_id);
        let done = completed["params"]["item"].clone();
        for message in [started, delta, completed] {
            self.send(message);
        }
        if of == ForeignScope::OtherThread {
            self.send(shapes::thread_status(&thread_id, shapes::idle_status()));
        }
        self.send(shapes::notification(
            "turn/completed",
            json!({"threadId": thread_id, "turn": turn("completed", vec![done], true)}),
        ));
    }

    /// Item and status notifications of this turn's ids, as if the turn were still going.
    fn stray_events(&self) {
        let (thread_id, turn_id) = self.ids();
        for message in
            one_delta_message("A late line of a turn that has ended.", thread_id, turn_id)
        {
            self.send(message);
        }
        self.send(shapes::thread_status(thread_id, shapes::idle_status()));
    }

    /// Every notification of the release, generated from its schema, for another thread.
    fn every_notification(&self) {
        let generated = release_schema::current().and_then(|release| {
            instances::every_notification(release, &ids::uuid_v7(), &ids::uuid_v7())
        });
        match generated {
            Ok(notifications) => {
                for (method, params) in notifications {
                    self.send(shapes::notification(&method, params));
                }
            }
            // Checked when the scenario loaded; a generator failure is a fake bug.
            Err(err) => eprintln!("fake-app-server BUG: generating every notification: {err}"),
        }
    }

    fn unknown_item(&self, item_type: &str) {
        let (thread_id, turn_id) = self.ids();
        let id = ids::uuid_v7();
        let now = shapes::now_ms();
        for (method, completed) in [
            ("item/started", Value::Null),
            ("item/completed", json!(now)),
        ] {
            let item = json!({"type": item_type, "id": id, "startedAtMs": now, "completedAtMs": completed});
            self.shared
                .out
                .send_off_schema(&item_notification(method, item, thread_id, turn_id, now));
        }
    }

    /// Known notifications of this turn with enum values no release has: the thread's status
    /// type (then its real status again), an agent message's phase, a plan step's status.
    fn unknown_enum_values(&self) {
        let (thread_id, turn_id) = self.ids();
        let out = &self.shared.out;
        out.send_off_schema(&shapes::thread_status(
            thread_id,
            json!({"type": UNKNOWN_VALUE}),
        ));
        self.send(shapes::thread_status(thread_id, shapes::active_status(&[])));
        let id = ids::message_id();
        let now = shapes::now_ms();
        let text = "An answer of an unknown phase.";
        for (method, item_text, completed) in [
            ("item/started", "", None),
            ("item/completed", text, Some(now)),
        ] {
            let mut item = shapes::agent_message_item(&id, item_text, now, completed);
            item["phase"] = json!(UNKNOWN_VALUE);
            out.send_off_schema(&item_notification(method, item, thread_id, turn_id, now));
        }
        out.send_off_schema(&shapes::notification(
            "turn/plan/updated",
            json!({"threadId": thread_id, "turnId": turn_id, "explanation": null,
                   "plan": [{"step": "A step of an unknown status.", "status": UNKNOWN_VALUE}]}),
        ));
    }

    /// An agent message whose `item/completed` line is exactly `bytes` long; its one delta's
    /// line is shorter (a smaller envelope around the same text).
    fn long_line(&self, bytes: usize) {
        let (thread_id, turn_id) = self.ids();
        let [_, _, empty] = one_delta_message("", thread_id, turn_id);
        let text = filler(bytes.saturating_sub(line_len(&empty)));
        let messages = one_delta_message(&text, thread_id, turn_id);
        debug_assert_eq!(line_len(&messages[2]), bytes.max(line_len(&empty)));
        for message in messages {
            self.send(message);
        }
    }

    /// `count` one-character deltas in agent messages of at most [`BURST_ITEM_DELTAS`] deltas,
    /// each item written as one buffered burst.
    fn delta_burst(&self, count: u64) {
        let (thread_id, turn_id) = self.ids();
        let letters: Vec<char> = FILLER.chars().collect();
        let mut left = count;
        let mut sent = 0usize;
        while left > 0 {
            let here = left.min(BURST_ITEM_DELTAS) as usize;
            left -= here as u64;
            let id = ids::message_id();
            let now = shapes::now_ms();
            let mut burst = Vec::with_capacity(here + 2);
            burst.push(item_notification(
                "item/started",
                shapes::agent_message_item(&id, "", now, None),
                thread_id,
                turn_id,
                now,
            ));
            let mut text = String::with_capacity(here);
            for _ in 0..here {
                let delta = letters[sent % letters.len()].to_string();
                sent += 1;
                text.push_str(&delta);
                burst.push(json!({"method": "item/agentMessage/delta",
                    "params": {"threadId": thread_id, "turnId": turn_id, "itemId": id, "delta": delta},
                    "emittedAtMs": now}));
            }
            burst.push(item_notification(
                "item/completed",
                shapes::agent_message_item(&id, &text, now, Some(shapes::now_ms())),
                thread_id,
                turn_id,
                now,
            ));
            self.shared.out.send_burst(&burst);
        }
    }

    /// Wait for the client's `turn/interrupt` or `turn/steer` (at most `max`).
    fn wait_for_control(&mut self, max: Duration) -> Flow {
        let deadline = Instant::now() + max;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.plan.signals.recv_timeout(left) {
                Ok(TurnSignal::Interrupt(answer)) => {
                    self.interrupt_answer = Some(answer);
                    return Flow::Interrupted;
                }
                Ok(TurnSignal::Steer(input)) => {
                    self.steer(input);
                    return Flow::Continue;
                }
                Ok(TurnSignal::ClientAnswer(message)) => {
                    eprintln!("WARN fake-app-server: late client answer ignored: {message}");
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    eprintln!("fake-app-server: no turn/interrupt or turn/steer within {max:?}; the turn goes on");
                    return Flow::Continue;
                }
            }
        }
    }
}

/// `item/started` / `item/completed` of `item` (the timestamp key follows the method).
fn item_notification(method: &str, item: Value, thread_id: &str, turn_id: &str, at: u64) -> Value {
    if method == "item/started" {
        shapes::item_started(item, thread_id, turn_id, at)
    } else {
        shapes::item_completed(item, thread_id, turn_id, at)
    }
}

/// An agent message streamed as one delta: its `item/started`, delta and `item/completed`
/// (one timestamp throughout, so the lines' lengths depend on the text alone).
fn one_delta_message(text: &str, thread_id: &str, turn_id: &str) -> [Value; 3] {
    let id = ids::message_id();
    let now = shapes::now_ms();
    let item = |text: &str, completed| shapes::agent_message_item(&id, text, now, completed);
    let mut delta = shapes::notification(
        "item/agentMessage/delta",
        json!({"threadId": thread_id, "turnId": turn_id, "itemId": id, "delta": text}),
    );
    delta["emittedAtMs"] = json!(now);
    let mut started = item_notification("item/started", item("", None), thread_id, turn_id, now);
    let mut completed = item_notification(
        "item/completed",
        item(text, Some(now)),
        thread_id,
        turn_id,
        now,
    );
    started["emittedAtMs"] = json!(now);
    completed["emittedAtMs"] = json!(now);
    [started, delta, completed]
}

fn line_len(message: &Value) -> usize {
    serde_json::to_vec(message)
        .expect("serializing a JSON value cannot fail")
        .len()
}

/// `len` bytes of readable ASCII text (no character JSON escapes).
fn filler(len: usize) -> String {
    FILLER.chars().cycle().take(len).collect()
}

/// Write `bytes` of log lines on stderr, blocking as long as the reader does not drain them.
pub(super) fn stderr_flood(bytes: usize) {
    let mut stderr = std::io::stderr().lock();
    let mut written = 0;
    let mut line_no = 0u64;
    while written < bytes {
        line_no += 1;
        let mut line =
            format!("fake-app-server stderr flood line {line_no:08}: {FILLER}{FILLER}\n");
        line.truncate((bytes - written).max(1));
        if stderr.write_all(line.as_bytes()).is_err() {
            return;
        }
        written += line.len();
    }
    let _ = stderr.flush();
}
