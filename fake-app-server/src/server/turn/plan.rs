//! A turn's plan: everything its player needs, captured from its thread when the turn begins
//! (a client's turn/start, or a turn the server starts on its own).

use super::RawEventsTurn;
use crate::ids;
use crate::sandbox::policy::Permissions;
use crate::scenario::ScenarioTurn;
use crate::server::state::{ActiveTurn, ThreadState, TurnSignal};
use crate::server::Shared;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;

/// Everything a turn needs, captured when turn/start was accepted.
pub(in crate::server) struct TurnPlan {
    pub thread_id: String,
    pub turn_id: String,
    pub cwd: PathBuf,
    pub permissions: Permissions,
    pub approval_policy: Value,
    /// `user` or `auto_review` (see [`super::TurnRun::auto_review`]).
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
    /// `Some` for a thread started with `experimentalRawEvents: true` ([`super::raw_events`]).
    pub raw_events: Option<RawEventsTurn>,
}

/// What a turn's own start gives it; the rest of its plan is its thread's.
pub(in crate::server) struct TurnStart {
    /// The turn's index among the thread's turns (the script's and the raw events' count).
    pub index: usize,
    /// Whether turn/start asked for an output schema.
    pub output_schema: bool,
    pub input: Value,
    pub user_text: String,
    pub script: ScenarioTurn,
}

impl TurnPlan {
    /// A turn begun on `thread`, which runs none: a fresh turn id, the thread marked as running
    /// it (the signals that reach the turn's player), and the plan from what the thread holds
    /// now with what `start` gives.
    pub(in crate::server) fn begin(
        shared: &Arc<Shared>,
        thread: &mut ThreadState,
        start: TurnStart,
    ) -> TurnPlan {
        let turn_id = ids::uuid_v7();
        let (signals_tx, signals_rx) = std::sync::mpsc::channel();
        thread.active = Some(ActiveTurn {
            id: turn_id.clone(),
            signals: signals_tx.clone(),
            output_schema: start.output_schema,
        });
        TurnPlan {
            thread_id: thread.id.clone(),
            turn_id,
            cwd: thread.cwd.clone(),
            permissions: thread.permissions.clone(),
            approval_policy: thread.approval_policy.clone(),
            approvals_reviewer: thread.approvals_reviewer.clone(),
            plan_mode: thread
                .collaboration_mode
                .as_ref()
                .is_some_and(|mode| mode["mode"] == "plan"),
            tokens_before: thread.tokens_used,
            dynamic_tools: thread.dynamic_tools.clone(),
            request_permissions_tool: crate::server::settings::feature_enabled(
                shared,
                thread,
                "request_permissions_tool",
            ),
            input: start.input,
            user_text: start.user_text,
            script: start.script,
            signals: signals_rx,
            self_signal: signals_tx,
            raw_events: thread.raw_events.then_some(RawEventsTurn {
                turn_index: start.index,
            }),
        }
    }
}
