//! The transcript → run events fold (the rules are in `docs/events.md`, "Events from the
//! wire"). Launches are folded in record order; each keeps its own pending requests, so two
//! app-servers of one driver never mix their ids. What each side's lines mean is in
//! `from_driver` and `from_server`; this module holds the fold's state and its end.

use super::terminal::{self, LaunchEnd, WireTerminal};
use super::transcript::{Direction, Launch, Record};
use super::{launch_argv, launch_identity, Context};
use crate::events::{
    AppServerExited, Body, Diagnostic, LaunchSummary, Level, RunStarted, StdinClosed,
};
use crate::excerpt::excerpt;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

mod exchange;
mod from_driver;
mod from_server;

pub use exchange::decision_of;

/// Longest user text kept in `turn.submitted.input_excerpt`, and plan text in a plan approval.
const EXCERPT_CHARS: usize = 500;

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The string at a JSON pointer (`/review/status`).
fn text_at(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn non_null(v: &Value, key: &str) -> Option<Value> {
    v.get(key).filter(|v| !v.is_null()).cloned()
}

fn id_text(id: &Value) -> String {
    id.as_str().map_or_else(|| id.to_string(), str::to_string)
}

/// A request still waiting for its answer.
#[derive(Debug, Clone)]
struct Pending {
    method: String,
    params: Value,
    /// When it went through the tap (unix ms).
    time: u64,
}

/// The release the driver's answers are checked against, or why there is none.
#[derive(Debug)]
struct AnswerSchemas(exchange::ReleaseOrWhy);

impl Default for AnswerSchemas {
    fn default() -> Self {
        Self(exchange::release_for(None))
    }
}

#[derive(Debug, Default)]
struct LaunchState {
    record: Option<Launch>,
    experimental_api: bool,
    /// What the driver's `initialize` of this launch declared it does not want, if it sent one.
    initialized: Option<InitializeDeclared>,
    /// Client requests by id.
    requests: HashMap<String, Pending>,
    /// Server requests by id.
    server_requests: HashMap<String, Pending>,
    relaunch_noted: bool,
    messages: u64,
    end: LaunchEnd,
}

/// What a driver's `initialize` declared about the notifications it gets.
#[derive(Debug, Clone, Default)]
struct InitializeDeclared {
    experimental_api: bool,
    opted_out: Vec<String>,
}

/// What a turn carried, by turn id.
#[derive(Debug, Clone, Default)]
struct TurnInfo {
    /// The launch whose app-server the driver started it on (`None`: a turn the driver did not
    /// start, known from its notifications only).
    launch: Option<u64>,
    thread: Option<String>,
    permissions: Option<String>,
    plan_mode: bool,
    plan_item: Option<(String, String)>,
    completed: bool,
}

#[derive(Debug, Default)]
struct Fold {
    events: Vec<Body>,
    /// `times[i]`: when the wire line that produced `events[i]` went through the tap.
    times: Vec<u64>,
    /// The time of the record being folded.
    now: u64,
    launches: BTreeMap<u64, LaunchState>,
    turn_index: u32,
    opens: u32,
    rejections: u32,
    sessions: u32,
    /// The thread of the last session that opened, and the launch it opened in.
    last_session: Option<(u64, String)>,
    /// Turn ids announced in `turn/start` results, with what the turn carried.
    turns: HashMap<String, TurnInfo>,
    /// `turn/start` request ids not yet answered → what the turn carried.
    turn_requests: HashMap<(u64, String), TurnInfo>,
    plans_seen: u32,
    /// A plan approval the driver has not yet answered: (request id, thread).
    plan_pending: Option<(String, Option<String>)>,
    result_accepted: bool,
    /// Items whose approval the driver granted.
    approved_items: HashSet<String>,
    release: AnswerSchemas,
    exchange: exchange::ExchangeState,
}

/// Fold `records` into events (without `run.started`, which [`translate`] puts first).
fn fold(records: &[Record], ctx: &Context) -> Fold {
    let mut fold = Fold {
        release: AnswerSchemas(exchange::release_for(ctx.protocol.release.as_deref())),
        ..Fold::default()
    };
    for record in records {
        if let Record::Mutation { .. } = record {
            // The harness's own remark (`harness mutate`): the lines around it are what the
            // app-server received, and they are what is translated. Skipped before its launch
            // is looked up: `exit-zero`'s record may name a launch that recorded nothing else.
            continue;
        }
        fold.record(record, ctx);
    }
    fold.finish(ctx);
    fold
}

impl Fold {
    /// One record of the transcript, by what it is.
    fn record(&mut self, record: &Record, ctx: &Context) {
        self.now = record.time();
        let launch = record.launch();
        let state = self.state(launch);
        match record {
            Record::Launch(l) => {
                state.record = Some(l.clone());
                self.record_launch(launch, &l.env_names, l.cwd.as_deref());
            }
            Record::Message {
                direction, message, ..
            } => self.message(launch, *direction, message, ctx),
            Record::Raw {
                direction,
                text,
                partial,
                ..
            } => self.raw_line(launch, *direction, text, *partial),
            Record::Note {
                direction: Direction::Out,
                delivered: Some(delivered),
                ..
            } => {
                state.end.let_go_mid_line.get_or_insert(*delivered);
            }
            Record::Note {
                direction: Direction::Out,
                bytes: Some(bytes),
                ..
            } => {
                state.end.fault.get_or_insert(format!(
                    "the app-server sent an oversized line of {bytes} bytes"
                ));
                self.note_server_line(None, Some(*bytes));
            }
            Record::Note { .. } | Record::Stderr { .. } | Record::Mutation { .. } => {}
            // The harness's own doing, said where the events are read: what follows in the
            // order the driver got it is the tap's ordering, not the app-server's.
            Record::Timing { rule, did, .. } => self.push(Body::Diagnostic(Diagnostic {
                level: Level::Info,
                message: format!("transport timing `{rule}`: {did}"),
            })),
            Record::StdoutClosed { .. }
            | Record::DriverSignal { .. }
            | Record::StdinClosed { .. }
            | Record::Exit { .. } => self.stream_end(launch, record),
        }
    }

    /// The state of `launch`, begun by its first record.
    fn state(&mut self, launch: u64) -> &mut LaunchState {
        self.launches.entry(launch).or_default()
    }

    /// A JSON-RPC message, by its direction: the driver's (in) or the app-server's (out).
    fn message(&mut self, launch: u64, direction: Direction, message: &Value, ctx: &Context) {
        let now = self.now;
        let state = self.state(launch);
        state.messages += 1;
        if direction == Direction::Out {
            state.end.last_from_server = Some(now);
        }
        match direction {
            Direction::In => self.driver_line(launch, message, ctx),
            Direction::Out => self.server_line(launch, message),
        }
    }

    /// A line that is not JSON-RPC, by who wrote it and whether it ended.
    fn raw_line(&mut self, launch: u64, direction: Direction, text: &str, partial: bool) {
        let state = self.state(launch);
        match direction {
            Direction::Out if partial => {
                // The app-server's output ended inside this line (it was killed with the
                // driver's tap, or exited): how much of it the harness read, not a malformed
                // line of its own. The terminal says who cut it.
                let bytes = text.len() as u64;
                state.end.cut_line.get_or_insert(bytes);
                self.note_cut_server_line(bytes);
            }
            Direction::Out => {
                state.end.fault.get_or_insert(format!(
                    "the app-server sent a line that is not JSON-RPC: {}",
                    excerpt(text, 200)
                ));
            }
            Direction::In => self.push(Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message: format!(
                    "the driver sent a line that is not JSON: {}",
                    excerpt(text, 200)
                ),
            })),
        }
    }

    /// How the app-server's streams and process ended: its stdout closed, the driver's signal,
    /// its stdin closed, its exit.
    fn stream_end(&mut self, launch: u64, record: &Record) {
        let state = self.state(launch);
        match record {
            Record::StdoutClosed { .. } if state.end.stdin_closed.is_none() => {
                state.end.output_ended_first = true;
            }
            Record::DriverSignal { time, .. } => {
                state.end.driver_signal.get_or_insert(*time);
            }
            Record::StdinClosed { time, .. } => {
                let first = state.end.stdin_closed.is_none();
                state.end.stdin_closed.get_or_insert(*time);
                if first {
                    self.push_exchange(Body::StdinClosed(StdinClosed { launch }));
                }
            }
            Record::Exit {
                killed_by_harness: Some(_),
                ..
            } => {
                // Not an exit of the app-server's own: the harness ended it after its driver let
                // go of the tap (or at the cell's end), as a tap killed with its driver did.
            }
            Record::Exit {
                time,
                status,
                signal,
                error,
                killed_by_harness: None,
                ..
            } => {
                let exit = terminal::Exit {
                    time: *time,
                    status: *status,
                    signal: *signal,
                    error: error.clone(),
                };
                let exited = app_server_exited(&mut state.end, launch, exit);
                self.push_exchange(Body::AppServerExited(exited));
            }
            _ => {}
        }
    }

    /// What the records leave open at the transcript's end, per launch.
    fn finish(&mut self, ctx: &Context) {
        let not_owed = self.not_owed(&ctx.protocol.experimental_only_notifications);
        self.finish_exchange(ctx.protocol.release.as_deref(), not_owed);
        for state in self.launches.values_mut() {
            state.end.pending = state.requests.values().map(|p| p.method.clone()).collect();
            state.end.pending.sort();
            state.end.messages = state.messages;
        }
        // A turn still open at the end is pending on the launch the driver started it on (so a
        // turn a crashed app-server took with it is not charged to the app-server that replaced
        // it); one the driver did not start, on the last launch with messages.
        let last_talking = self
            .launches
            .iter()
            .rev()
            .find(|(_, s)| s.messages > 0)
            .map(|(launch, _)| *launch);
        let mut open: Vec<(u64, String)> = self
            .turns
            .iter()
            .filter(|(_, t)| !t.completed)
            .filter_map(|(id, t)| {
                let launch = t
                    .launch
                    .filter(|l| self.launches.contains_key(l))
                    .or(last_talking)?;
                Some((launch, id.clone()))
            })
            .collect();
        open.sort();
        for (launch, id) in open {
            if let Some(state) = self.launches.get_mut(&launch) {
                state.end.open_turns.push(id);
            }
        }
    }
}

/// The app-server's own exit, placed against the driver's stdin close and signal.
fn app_server_exited(end: &mut LaunchEnd, launch: u64, exit: terminal::Exit) -> AppServerExited {
    let after_stdin_closed =
        !end.output_ended_first && end.stdin_closed.is_some_and(|closed| closed <= exit.time);
    // Only where the driver had not closed its stdin first: a driver that closes
    // it and then signals a slow app-server ended it by the close either way (the
    // fake exits before the signal comes, the real Codex after).
    let after_driver_signal = !end.output_ended_first
        && !after_stdin_closed
        && end.driver_signal.is_some_and(|sent| sent <= exit.time);
    let exited = AppServerExited {
        launch,
        status: exit.status,
        signal: exit.signal,
        error: exit.error.clone(),
        after_stdin_closed,
        after_driver_signal,
    };
    end.exit = Some(exit);
    exited
}

impl Fold {
    fn push(&mut self, body: Body) {
        self.events.push(body);
        self.times.push(self.now);
    }
}

/// The first launch that talked (else the first launch): its argv is the run's launch.
fn first_server_launch(fold: &Fold) -> Option<&Launch> {
    fold.launches
        .values()
        .find(|s| s.messages > 0)
        .or_else(|| fold.launches.values().next())
        .and_then(|s| s.record.as_ref())
}

/// The events of `records` (`run.started` first, no `run.ended`) and the terminal the wire shows.
/// The events, the wire time of each (`run.started`: the first launch's), and the terminal.
pub(super) fn events_and_terminal(
    records: &[Record],
    ctx: &Context,
) -> (Vec<Body>, Vec<u64>, WireTerminal) {
    let fold = fold(records, ctx);
    let argv = launch_argv(first_server_launch(&fold).map_or(&[][..], |l| &l.argv));
    let first_of =
        |pick: fn(&Body) -> Option<Option<String>>| fold.events.iter().find_map(pick).flatten();
    let thread_permissions = first_of(|b| match b {
        Body::SessionOpenRequested(o) => Some(o.permissions.clone()),
        _ => None,
    });
    // A turn that carries no profile keeps the thread's (and so does a run that never got to a
    // turn): that is the profile its turns run under.
    let turn_permissions = first_of(|b| match b {
        Body::TurnSubmitted(t) => Some(t.permissions.clone()),
        _ => None,
    })
    .or_else(|| thread_permissions.clone());
    let cwd = fold
        .events
        .iter()
        .find_map(|b| match b {
            Body::SessionOpenRequested(o) => Some(o.cwd.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let identity = launch_identity(ctx, &argv, thread_permissions.as_deref(), &cwd);
    let mut events = vec![Body::RunStarted(RunStarted {
        cell: ctx.cell.clone(),
        driver: ctx.driver.clone(),
        launch: LaunchSummary {
            mode: ctx.mode,
            target: ctx.target,
            network_enabled: ctx.network_enabled,
            policy: ctx.policy,
            argv,
            thread_permissions,
            turn_permissions,
            identity,
        },
        protocol: Some(ctx.protocol.clone()),
    })];
    let launches: Vec<LaunchEnd> = fold.launches.values().map(|s| s.end.clone()).collect();
    let wire = WireTerminal {
        launches,
        opens: fold.opens,
        rejections: fold.rejections,
        sessions: fold.sessions,
    };
    let started_at = records.first().map_or(0, Record::time);
    let mut times = vec![started_at];
    times.extend(fold.times);
    events.extend(fold.events);
    (events, times, wire)
}
