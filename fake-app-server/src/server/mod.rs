//! The JSON-RPC server over stdio: a reader thread feeds lines to the dispatcher; slow work
//! (turns, command/exec, delayed answers) runs on its own threads, so answers may come out of
//! order, as with the real server.

mod admin;
mod auto_review;
mod gate;
mod handlers;
mod interrupt;
mod services;
mod settings;
mod state;
mod threads;
mod turn;

use crate::config::Config;
use crate::model_log_writer::ModelLog;
use crate::output::Output;
use crate::protocol::shapes;
use crate::protocol::{self, Incoming, RpcError};
use crate::sandbox::Sandbox;
use crate::scenario::{MethodBehaviour, Scenario, TurnsShown};
use serde_json::{json, Value};
use state::{State, TurnSignal};
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub(crate) use state::codex_home;

/// Everything the server's threads share.
pub(crate) struct Shared {
    pub out: Output,
    pub scenario: Scenario,
    pub config: Config,
    pub sandbox: Sandbox,
    pub model_log: ModelLog,
    state: Mutex<State>,
    /// Server requests waiting for the client's answer: id key → the waiting turn.
    pending: Mutex<HashMap<String, Sender<TurnSignal>>>,
    next_request_id: AtomicU64,
    method_calls: Mutex<HashMap<String, u32>>,
    startup_probe: Mutex<Option<JoinHandle<Option<&'static str>>>>,
    /// Turns whose `turn/completed` is out (what a held-back `turn/start` answer waits for).
    finished_turns: (Mutex<HashSet<String>>, Condvar),
    /// How many turn players are running (a client's turn and the turns the server starts on
    /// its own after it): what end of input waits for, briefly.
    turn_players: (Mutex<usize>, Condvar),
    /// Turns the reader accepted, started once it has handled the lines it already read
    /// ([`Shared::start_turn`]).
    held_turns: Mutex<Vec<Box<dyn FnOnce() + Send>>>,
    /// The goal of each thread that has one (`thread/goal/updated`'s `goal`).
    pub(crate) goals: Mutex<HashMap<String, Value>>,
    /// What the client's approvals left behind (`turn::remembered`).
    approvals_memory: Mutex<turn::remembered::Remembered>,
}

/// A handler's answer: the result, the notifications that go before and after the response,
/// and work to start once they are out (a turn).
pub(crate) struct Reply {
    pub result: Result<Value, RpcError>,
    pub before: Vec<Value>,
    pub then: Vec<Value>,
    pub after: Option<Box<dyn FnOnce() + Send>>,
}

impl Reply {
    pub(crate) fn ok(result: Value) -> Self {
        Self::from(Ok(result))
    }
    pub(crate) fn err(error: RpcError) -> Self {
        Self::from(Err(error))
    }
    /// `result`, then the notifications `then`.
    pub(crate) fn then(result: Value, then: Vec<Value>) -> Self {
        Self {
            then,
            ..Self::ok(result)
        }
    }
    /// The same answer, with `notification` sent before it.
    pub(crate) fn before(mut self, notification: Value) -> Self {
        self.before.push(notification);
        self
    }
}

impl From<Result<Value, RpcError>> for Reply {
    fn from(result: Result<Value, RpcError>) -> Self {
        Self {
            result,
            before: Vec::new(),
            then: Vec::new(),
            after: None,
        }
    }
}

impl Shared {
    pub(crate) fn new(
        scenario: Scenario,
        config: Config,
        sandbox: Sandbox,
        out: Output,
        model_log: ModelLog,
    ) -> Arc<Self> {
        let probe_sandbox = sandbox.clone();
        // The probe spawns bubblewrap; run it while the client is still starting up.
        let probe = std::thread::spawn(move || probe_sandbox.startup_warning());
        Arc::new(Self {
            out,
            scenario,
            config,
            sandbox,
            model_log,
            state: Mutex::new(State::default()),
            pending: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(0),
            method_calls: Mutex::new(HashMap::new()),
            startup_probe: Mutex::new(Some(probe)),
            finished_turns: (Mutex::new(HashSet::new()), Condvar::new()),
            turn_players: (Mutex::new(0), Condvar::new()),
            held_turns: Mutex::new(Vec::new()),
            goals: Mutex::new(HashMap::new()),
            approvals_memory: Mutex::new(Default::default()),
        })
    }

    pub(crate) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn remembered(&self) -> std::sync::MutexGuard<'_, turn::remembered::Remembered> {
        self.approvals_memory
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn startup_warning(&self) -> Option<&'static str> {
        let handle = self
            .startup_probe
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()?;
        handle.join().ok().flatten()
    }

    /// Send a server request; its answer is delivered to `waiter` as `ClientAnswer`.
    pub(crate) fn request_client(
        &self,
        method: &str,
        params: Value,
        waiter: &Sender<TurnSignal>,
    ) -> u64 {
        let id = self.next_request_id.fetch_add(1, Ordering::SeqCst);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(protocol::id_key(&json!(id)), waiter.clone());
        self.out
            .send(&json!({"method": method, "id": id, "params": params}));
        // The client cannot answer a request it never got: whatever was held goes out with it.
        self.out.release();
        id
    }

    /// Send `message`, a request with a method no release has, as server request; its answer is
    /// delivered like any other's.
    pub(crate) fn request_client_off_schema(
        &self,
        mut message: Value,
        waiter: &Sender<TurnSignal>,
    ) -> u64 {
        let id = self.next_request_id.fetch_add(1, Ordering::SeqCst);
        message["id"] = json!(id);
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(protocol::id_key(&json!(id)), waiter.clone());
        self.out.send_off_schema(&message);
        self.out.release();
        id
    }

    pub(crate) fn forget_request(&self, id: u64) {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&protocol::id_key(&json!(id)));
    }

    /// Note that turn `turn_id`'s `turn/completed` is out.
    pub(crate) fn turn_finished(&self, turn_id: &str) {
        let (done, changed) = &self.finished_turns;
        done.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(turn_id.to_string());
        changed.notify_all();
    }

    /// Wait until turn `turn_id` has finished; false when `limit` passed first.
    fn wait_turn_finished(&self, turn_id: &str, limit: Duration) -> bool {
        let (done, changed) = &self.finished_turns;
        let guard = done.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = changed
            .wait_timeout_while(guard, limit, |done| !done.contains(turn_id))
            .unwrap_or_else(|p| p.into_inner());
        guard.contains(turn_id)
    }

    /// A turn is under way until the guard drops: from its `turn/start` (before its player's
    /// thread exists) to the end of the turns its player plays.
    pub(crate) fn turn_player(self: &Arc<Self>) -> TurnPlayerGuard {
        *self
            .turn_players
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner()) += 1;
        TurnPlayerGuard(Arc::clone(self))
    }

    /// Start a turn's player: on the reader's thread, once the reader has handled every line it
    /// had already read, so input that came with the `turn/start` (a copy in the same write,
    /// say) reaches the turn before its first step whichever thread runs first; elsewhere (a
    /// delayed answer) at once.
    pub(crate) fn start_turn(&self, start: Box<dyn FnOnce() + Send>) {
        if ON_READER.get() {
            self.held_turns
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(start);
        } else {
            start();
        }
    }

    fn start_held_turns(&self) {
        let held = std::mem::take(&mut *self.held_turns.lock().unwrap_or_else(|p| p.into_inner()));
        for start in held {
            start();
        }
    }

    /// Wait (at most `limit`) until no turn player runs.
    fn wait_turn_players(&self, limit: Duration) {
        let (running, changed) = &self.turn_players;
        let guard = running.lock().unwrap_or_else(|p| p.into_inner());
        let _ = changed
            .wait_timeout_while(guard, limit, |running| *running > 0)
            .unwrap_or_else(|p| p.into_inner());
    }

    /// The scenario's behaviour for this call of `method`, counting calls for `times`.
    fn behaviour_for(&self, method: &str) -> Option<MethodBehaviour> {
        let behaviour = self.scenario.method(method)?;
        let mut calls = self.method_calls.lock().unwrap_or_else(|p| p.into_inner());
        let count = calls.entry(method.to_string()).or_insert(0);
        *count += 1;
        match behaviour.times {
            Some(times) if *count > times => None,
            _ => Some(behaviour.clone()),
        }
    }
}

/// A turn under way (`Shared::turn_player`).
pub(crate) struct TurnPlayerGuard(Arc<Shared>);

impl Drop for TurnPlayerGuard {
    fn drop(&mut self) {
        let (running, changed) = &self.0.turn_players;
        let mut running = running.lock().unwrap_or_else(|p| p.into_inner());
        *running = running.saturating_sub(1);
        changed.notify_all();
    }
}

/// After end of input, how long turns already under way may go on writing: what the server was
/// doing as the client hung up (a turn it starts on its own right after the client's, say) still
/// reaches the wire, and no wait of a scenario keeps the process alive.
const TURNS_AFTER_END_OF_INPUT: Duration = Duration::from_millis(250);

thread_local! {
    /// Whether this thread is the one reading stdin ([`Shared::start_turn`]).
    static ON_READER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Serve stdin/stdout until stdin closes. Returns the process exit code.
pub(crate) fn serve(shared: Arc<Shared>) -> u8 {
    // Lines are handled on this thread as they arrive (turns and slow requests run elsewhere):
    // no hand-off between threads on the request path keeps round trips cheap. Its own buffer
    // shows what was read and not handled yet (stdin's smaller one is bypassed by its reads).
    let mut reader = std::io::BufReader::with_capacity(64 * 1024, std::io::stdin());
    ON_READER.set(true);
    let mut raw = Vec::new();
    loop {
        // No whole line left unhandled (the start of one may wait for its end: not the turn).
        if !reader.buffer().contains(&b'\n') {
            shared.start_held_turns();
        }
        raw.clear();
        match reader.read_until(b'\n', &mut raw) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&raw);
        let line = text.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        shared.out.record_incoming(line);
        handle_line(&shared, line);
    }
    shared.start_held_turns();
    shared.wait_turn_players(TURNS_AFTER_END_OF_INPUT);
    shared.out.flush();
    0
}

fn handle_line(shared: &Arc<Shared>, line: &str) {
    match protocol::classify(line) {
        Err(err) => {
            // The real server logs and keeps serving; no answer goes out.
            eprintln!("ERROR codex_app_server_transport::transport: Failed to deserialize JSONRPCMessage: {err}");
        }
        Ok(Incoming::Invalid(reason)) => {
            eprintln!("ERROR codex_app_server_transport::transport: Failed to deserialize JSONRPCMessage: {reason}");
        }
        Ok(Incoming::Notification { .. }) => {}
        Ok(Incoming::Response { id, message }) => {
            let waiter = shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&protocol::id_key(&id));
            match waiter {
                Some(waiter) => {
                    let _ = waiter.send(TurnSignal::ClientAnswer(message));
                }
                None => {
                    eprintln!("WARN fake-app-server: response to unknown server request id {id}")
                }
            }
        }
        Ok(Incoming::Request { id, method, params }) => dispatch(shared, id, method, params),
    }
}

fn dispatch(shared: &Arc<Shared>, id: Value, method: String, params: Option<Value>) {
    let behaviour = shared.behaviour_for(&method);
    let slow = behaviour
        .as_ref()
        .is_some_and(|b| b.delay_ms.is_some() || b.hang || b.answer_after_turn)
        || method == "command/exec";
    if slow {
        let shared = Arc::clone(shared);
        std::thread::spawn(move || answer(&shared, id, &method, params, behaviour.as_ref()));
    } else {
        answer(shared, id, &method, params, behaviour.as_ref());
    }
}

fn answer(
    shared: &Arc<Shared>,
    id: Value,
    method: &str,
    params: Option<Value>,
    behaviour: Option<&MethodBehaviour>,
) {
    if let Some(delay) = behaviour.and_then(|b| b.delay_ms) {
        std::thread::sleep(Duration::from_millis(delay));
    }
    let behaviour = behaviour.cloned().unwrap_or_default();
    if behaviour.hang {
        eprintln!("fake-app-server: not answering {method} (id {id}) as the scenario asks");
        return;
    }
    if behaviour.malformed {
        shared
            .out
            .send_garbage(&format!("{{\"id\":{id},\"result\":{{\"malformed"));
        return;
    }
    let reply = match &behaviour.error {
        Some(error) => Reply::err(RpcError {
            code: error.code,
            message: expand_error(&error.message, params.as_ref()),
        }),
        None => {
            // The handler still runs (a scripted thread/start still creates its thread); a
            // scripted result replaces its answer, even an error (a method the fake does not
            // implement).
            let mut reply = handlers::handle(shared, method, params.as_ref());
            if let Some(result) = behaviour.scripted_result() {
                reply.result = Ok(result);
            }
            if behaviour.fork_thread {
                fork_resumed_thread(shared, &mut reply);
            }
            if let Some(shown) = behaviour.turns_shown {
                show_turns(shown, &mut reply);
            }
            reply
        }
    };
    let mut reply = reply;
    if behaviour.answer_after_turn {
        // The turn runs first; its answer follows its turn/completed (bounded like a hang).
        let turn_id = reply
            .result
            .as_ref()
            .ok()
            .and_then(|r| r["turn"]["id"].as_str())
            .map(str::to_string);
        if let (Some(turn_id), Some(after)) = (turn_id, reply.after.take()) {
            for notification in &reply.before {
                shared.out.send(notification);
            }
            after();
            let limit = Duration::from_millis(shared.scenario.limits.hang_ms);
            if !shared.wait_turn_finished(&turn_id, limit) {
                eprintln!("fake-app-server: turn {turn_id} did not finish within {limit:?}; answering turn/start now");
            }
            let response = json!({"id": id, "result": reply.result.unwrap_or_default()});
            shared.out.send(&response);
            return;
        }
    }
    for notification in &reply.before {
        shared.out.send(notification);
    }
    let response = match &reply.result {
        Ok(result) => json!({"id": id, "result": result}),
        Err(error) => json!({"error": error.to_json(), "id": id}),
    };
    if let Some(bytes) = behaviour.crash_after_bytes {
        shared.out.crash_after(&response, bytes);
    }
    if behaviour.oversized_bytes.is_some() || behaviour.split_writes.is_some() {
        shared
            .out
            .send_shaped(&response, behaviour.oversized_bytes, behaviour.split_writes);
    } else {
        shared.out.send(&response);
    }
    for notification in &reply.then {
        shared.out.send(notification);
    }
    if let Some(after) = reply.after {
        after();
    }
}

/// `{threadId}` in a scripted error message stands for the request's `params.threadId` (Codex's
/// texts name the thread, e.g. `no rollout found for thread id …`).
fn expand_error(message: &str, params: Option<&Value>) -> String {
    let thread = params
        .and_then(|p| p.get("threadId"))
        .and_then(Value::as_str)
        .unwrap_or("");
    message.replace("{threadId}", thread)
}

/// A `thread/read` answer that lists other turns than the thread's, as the scenario asks.
fn show_turns(shown: TurnsShown, reply: &mut Reply) {
    let Some(turns) = reply
        .result
        .as_mut()
        .ok()
        .and_then(|r| r.pointer_mut("/thread/turns"))
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    match shown {
        TurnsShown::None => turns.clear(),
        TurnsShown::AnotherActive => {
            let id = crate::ids::uuid_v7();
            turns.push(shapes::turn(&shapes::TurnView {
                id: &id,
                items: Vec::new(),
                items_view: "notLoaded",
                status: "inProgress",
                error: Value::Null,
                started_at: Some(shapes::now_s()),
                completed_at: None,
                duration_ms: None,
            }));
        }
    }
    eprintln!("fake-app-server: thread/read lists {shown:?} turns, as the scenario asks");
}

/// A `thread/resume` answered for another thread id, as a resume that silently forks: the
/// answer and the notifications after it carry a new id (the old one as `forkedFromId`), and the
/// thread is known by the new id from then on (persisted under it).
fn fork_resumed_thread(shared: &Shared, reply: &mut Reply) {
    let Ok(result) = reply.result.as_mut() else {
        return;
    };
    let Some(old) = result["thread"]["id"].as_str().map(str::to_string) else {
        return;
    };
    let new = crate::ids::uuid_v7();
    result["thread"]["id"] = json!(new);
    result["thread"]["sessionId"] = json!(new);
    result["thread"]["forkedFromId"] = json!(old);
    let path = state::new_thread_file(&new);
    result["thread"]["path"] = json!(path.as_ref().map(|p| p.display().to_string()));
    for notification in &mut reply.then {
        if notification["params"]["threadId"] == json!(old) {
            notification["params"]["threadId"] = json!(new);
        }
    }
    let mut state = shared.state();
    if let Some(mut thread) = state.threads.remove(&old) {
        thread.id = new.clone();
        thread.path = path;
        thread.persist();
        state.threads.insert(new.clone(), thread);
    }
    eprintln!(
        "fake-app-server: thread/resume of {old} answered as thread {new}, as the scenario asks"
    );
}

#[cfg(test)]
mod tests {
    /// The server's modules and the siblings each one uses (`super::NAME`): the graph must have
    /// no cycle, so each module can be read (and changed) knowing only what it builds on.
    #[test]
    fn the_server_modules_import_each_other_without_a_cycle() {
        let sources: &[(&str, &str)] = &[
            ("admin", include_str!("admin.rs")),
            ("auto_review", include_str!("auto_review.rs")),
            ("gate", include_str!("gate.rs")),
            ("handlers", include_str!("handlers.rs")),
            ("services", include_str!("services.rs")),
            ("settings", include_str!("settings.rs")),
            ("state", include_str!("state.rs")),
            ("threads", include_str!("threads.rs")),
            ("turn", include_str!("turn/mod.rs")),
        ];
        let uses = |text: &str| -> Vec<&str> {
            sources
                .iter()
                .map(|(name, _)| *name)
                .filter(|name| {
                    text.contains(&format!("super::{name}::"))
                        || text.contains(&format!("super::{name};"))
                        || text.contains(&format!("super::{{{name}"))
                        || text.contains(&format!("super::{name}::{{"))
                })
                .collect()
        };
        let edges: Vec<(&str, Vec<&str>)> = sources
            .iter()
            .map(|(name, text)| (*name, uses(text)))
            .collect();
        assert!(
            edges
                .iter()
                .any(|(name, used)| *name == "threads" && used.contains(&"gate")),
            "the scan must see `threads` using `gate`: {edges:?}"
        );
        // Depth-first search for a path from a module back to itself.
        fn reaches(
            edges: &[(&str, Vec<&str>)],
            from: &str,
            to: &str,
            seen: &mut Vec<String>,
        ) -> bool {
            let Some((_, used)) = edges.iter().find(|(name, _)| *name == from) else {
                return false;
            };
            used.iter().any(|next| {
                *next == to
                    || (!seen.contains(&next.to_string()) && {
                        seen.push(next.to_string());
                        reaches(edges, next, to, seen)
                    })
            })
        }
        for (name, _) in &edges {
            assert!(
                !reaches(&edges, name, name, &mut Vec::new()),
                "server module `{name}` imports itself through its siblings: {edges:?}"
            );
        }
    }
}
