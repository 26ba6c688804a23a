//! How a turn ends: the usage and rate limits after each model response, a failed model stream,
//! and `turn/completed` with the thread's state after it.

use super::{codex_tools, Ending, TurnRun, TOKENS_IN, TOKENS_OUT};
use crate::protocol::shapes;
use crate::scenario::{ScenarioTurn, TurnFailure};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

impl TurnRun {
    /// `thread/tokenUsage/updated` after one model response, with the mock model API's usage.
    pub(super) fn token_usage(&mut self) {
        let responses_before = self.plan.tokens_before / (TOKENS_IN + TOKENS_OUT);
        self.tokens += TOKENS_IN + TOKENS_OUT;
        let responses = responses_before + self.tokens / (TOKENS_IN + TOKENS_OUT);
        let (thread_id, turn_id) = self.ids();
        self.send(shapes::token_usage_updated(
            thread_id,
            turn_id,
            responses,
            crate::server::settings::FALLBACK_CONTEXT_WINDOW,
        ));
        // Codex 0.169 follows every usage report with the account's rate limits.
        self.rate_limits();
        // Once a patch changed files, every later response repeats the turn's diff, unless it
        // is empty (a file added then deleted: measured with 0.169).
        if !crate::apply_patch::turn_diff(&self.changes).is_empty() {
            self.turn_diff();
        }
        if !std::mem::take(&mut self.goal_changed) {
            self.goal_tokens(TOKENS_IN + TOKENS_OUT);
        }
    }

    /// The account's rate limits after a model response; against a custom provider they are
    /// all unknown (measured with 0.169).
    pub(super) fn rate_limits(&self) {
        self.send(shapes::notification(
            "account/rateLimits/updated",
            json!({"rateLimits": {"limitId": "codex", "limitName": null, "normalModelSlug": null,
                "primary": null, "secondary": null, "credits": null, "individualLimit": null,
                "spendControlReached": null, "planType": null, "rateLimitReachedType": null}}),
        ));
    }

    pub(super) fn turn_diff(&self) {
        let (thread_id, turn_id) = self.ids();
        self.send(shapes::notification(
            "turn/diff/updated",
            json!({"threadId": thread_id, "turnId": turn_id, "diff": crate::apply_patch::turn_diff(&self.changes)}),
        ));
    }

    pub(super) fn finish(
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
        let has_message = crate::server::state::has_agent_message(&full);
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

    /// The model's stream failed (the scenario's `fail`): what Codex 0.169 sends before the
    /// turn ends failed; the turn's error.
    pub(super) fn stream_failed(&mut self, failure: &TurnFailure) -> Value {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
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
        turn_error
    }

    /// The turn's end and what follows it: `turn/completed`, the requests an interrupt left
    /// unanswered, the steps after the turn.
    pub(super) fn end(
        &mut self,
        script: &ScenarioTurn,
        status: &str,
        error: Value,
        ending: Ending,
        started_s: u64,
        started: Instant,
    ) {
        let thread_id = self.plan.thread_id.clone();
        // What follows the turn's end reaches the client in the same write as its
        // `turn/completed` (`Output::hold`): the requests an interrupt left unanswered (their
        // `serverRequest/resolved` before anything a client's next request causes: measured
        // with 0.169, a plan-mode `turn/start` sent at `turn/completed`), the steps after the
        // turn, the turns the server starts on its own while a goal is active (whole: released
        // once the chain is over, so a client that hangs up at its own turn's end has them all,
        // every run).
        if let Some(answer) = self.interrupt_answer.take() {
            answer.answer_now();
        }
        let goal_goes_on =
            status == "completed" && codex_tools::goal_active(&self.shared, &thread_id);
        if goal_goes_on
            || !self.unresolved.is_empty()
            || script.server_steps.iter().any(|s| s.after_turn)
        {
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
    }
}
