//! Mutation operators (`harness mutate`, `docs/mutate.md`): each is a rewrite of what the DRIVER
//! sends, as a driver with one realistic bug would have sent it, applied by the recorder
//! ([`crate::session`]) before the bytes reach the app-server — never to what the app-server
//! sends. A mutant the cells' verdicts do not notice is a bug of that driver the selected suites
//! would let through.
//!
//! Each operator is a small pure function of ONE message the driver sent and the context it
//! needs ([`Pending`]: the server requests of the launch not yet answered, to know what an
//! answer answers and which decisions it offered). [`WireMutation`] keeps that context for one
//! launch and says what becomes of each line in either direction. An operator *applies* only
//! where it changes something: a driver that already approves everything is no mutant of
//! `approve-everything`, so that operator is not applicable to it rather than survived.
//!
//! `exit-zero` is no rewrite of the wire: the harness forces the driver's exit status once it
//! ended (`matrix::mutation`, asked by the matrix's driver stage), for drivers whose outcome is
//! their exit status.

use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

/// One mutation operator. Names are kebab-case, as on the command line and in `mutation.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// An answer to an approval request becomes the most permissive decision the request
    /// offers.
    ApproveEverything,
    /// Answers to server requests are not forwarded.
    DropAnswers,
    /// Answers to server requests become a shape the schema rejects.
    MalformedAnswers,
    /// `thread/start` / `turn/start` ask for a sandbox one step wider (a permission profile:
    /// full access; network on).
    WidenSandbox,
    /// `thread/start` / `turn/start` ask for `approvalPolicy: never`.
    ApprovalNever,
    /// The `initialized` notification is not forwarded.
    DropInitialized,
    /// The app-server's stdin is closed right after the `turn/start` answer reached the driver,
    /// and the app-server's part ends there ([`Received::ForwardThenCut`]).
    CloseAfterTurnStart,
    /// Every request is sent twice (the copy with a fresh id; its answer is not forwarded).
    DuplicateRequests,
    /// The driver's exit status is forced to 0 (drivers declaring `outcome = "exit-status"`).
    ExitZero,
}

impl Operator {
    pub const ALL: [Operator; 9] = [
        Operator::ApproveEverything,
        Operator::DropAnswers,
        Operator::MalformedAnswers,
        Operator::WidenSandbox,
        Operator::ApprovalNever,
        Operator::DropInitialized,
        Operator::CloseAfterTurnStart,
        Operator::DuplicateRequests,
        Operator::ExitZero,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Operator::ApproveEverything => "approve-everything",
            Operator::DropAnswers => "drop-answers",
            Operator::MalformedAnswers => "malformed-answers",
            Operator::WidenSandbox => "widen-sandbox",
            Operator::ApprovalNever => "approval-never",
            Operator::DropInitialized => "drop-initialized",
            Operator::CloseAfterTurnStart => "close-after-turn-start",
            Operator::DuplicateRequests => "duplicate-requests",
            Operator::ExitZero => "exit-zero",
        }
    }

    /// The bug of a driver this operator plays, in words (reports).
    pub fn bug(self) -> &'static str {
        match self {
            Operator::ApproveEverything => {
                "the driver approves every approval request with the most permissive decision offered"
            }
            Operator::DropAnswers => "the driver never answers the app-server's requests",
            Operator::MalformedAnswers => {
                "the driver answers the app-server's requests with a shape the schema rejects"
            }
            Operator::WidenSandbox => {
                "the driver asks for a wider sandbox than it was told (one step up, a permission profile as full access, network on)"
            }
            Operator::ApprovalNever => "the driver sets approvalPolicy to never",
            Operator::DropInitialized => "the driver never sends the `initialized` notification",
            Operator::CloseAfterTurnStart => {
                "the driver closes the app-server's stdin as soon as its turn has started"
            }
            Operator::DuplicateRequests => "the driver sends every request twice",
            Operator::ExitZero => {
                "the driver exits with status 0 whatever happened (its outcome is its exit status)"
            }
        }
    }

    /// Whether the recorder applies it on the wire (`exit-zero` is the harness's).
    pub fn on_the_wire(self) -> bool {
        self != Operator::ExitZero
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Operator {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operator::ALL
            .into_iter()
            .find(|op| op.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown mutation operator `{s}` (known: {})",
                    Operator::ALL.map(Operator::name).join(", ")
                )
            })
    }
}

/// A server request the driver has not answered yet: what an answer to it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerRequest {
    pub method: String,
    /// `availableDecisions` of the request, when it listed them.
    pub offered: Option<Vec<Value>>,
    /// What it asked for (`item/permissions/requestApproval`'s `permissions`).
    pub asked: Option<Value>,
}

impl ServerRequest {
    pub fn of(method: &str, params: Option<&Value>) -> Self {
        let params = params.unwrap_or(&Value::Null);
        Self {
            method: method.to_string(),
            offered: params
                .get("availableDecisions")
                .and_then(Value::as_array)
                .cloned(),
            asked: params.get("permissions").cloned(),
        }
    }
}

/// The server requests of one launch not yet answered, by id (its JSON text: `1` and `"1"` are
/// different ids).
pub type Pending = HashMap<String, ServerRequest>;

/// The key of a JSON-RPC id in [`Pending`].
fn id_key(id: &Value) -> String {
    id.to_string()
}

/// Whether `message` is an answer (a response: an id, a result or an error, no method).
pub fn is_answer(message: &Value) -> bool {
    message.get("method").is_none()
        && message.get("id").is_some()
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// Whether `message` is a request (a method and an id).
pub fn is_request(message: &Value) -> bool {
    message.get("method").is_some_and(Value::is_string) && message.get("id").is_some()
}

fn method(message: &Value) -> Option<&str> {
    message.get("method").and_then(Value::as_str)
}

/// An answer with this result in place of what the driver sent (result or error), in the
/// driver's envelope (a driver that leaves `jsonrpc` out, as the app-server's dialect allows,
/// keeps it out).
fn answer_with(answer: &Value, result: Value) -> Value {
    let mut out = Map::new();
    if let Some(version) = answer.get("jsonrpc") {
        out.insert("jsonrpc".into(), version.clone());
    }
    out.insert("id".into(), answer["id"].clone());
    out.insert("result".into(), result);
    Value::Object(out)
}

/// The most permissive of `offered`: a session-wide acceptance before a one-off one (either
/// form: `acceptForSession`/`accept`, or the legacy `approved_for_session`/`approved`), then
/// any other acceptance the request offered (an amendment), else the first offered.
fn most_permissive(offered: &[Value]) -> Option<Value> {
    const RANK: [&str; 4] = [
        "acceptForSession",
        "approved_for_session",
        "accept",
        "approved",
    ];
    RANK.iter()
        .find_map(|best| offered.iter().find(|d| d.as_str() == Some(best)).cloned())
        .or_else(|| {
            offered
                .iter()
                .find(|d| {
                    d.as_object().is_some_and(|o| {
                        o.keys()
                            .any(|k| k.starts_with("accept") || k.starts_with("approved"))
                    })
                })
                .cloned()
        })
        .or_else(|| offered.first().cloned())
}

/// `approve-everything`: the answer to an approval request, as the most permissive decision
/// the request offers (`availableDecisions` when present, else the schema's most permissive:
/// `acceptForSession`; `approved_for_session` for the legacy `execCommandApproval` /
/// `applyPatchApproval`); `item/permissions/requestApproval` is granted what it asked, for the
/// session. `None`: not an approval's answer, or already that.
pub fn approve_everything(answer: &Value, request: &ServerRequest) -> Option<Value> {
    let result = match request.method.as_str() {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            let decision = request
                .offered
                .as_deref()
                .and_then(most_permissive)
                .unwrap_or_else(|| json!("acceptForSession"));
            json!({"decision": decision})
        }
        "execCommandApproval" | "applyPatchApproval" => {
            let decision = request
                .offered
                .as_deref()
                .and_then(most_permissive)
                .unwrap_or_else(|| json!("approved_for_session"));
            json!({"decision": decision})
        }
        "item/permissions/requestApproval" => json!({
            "permissions": request.asked.clone().unwrap_or_else(|| json!({})),
            "scope": "session",
        }),
        _ => return None,
    };
    changed(answer, answer_with(answer, result))
}

/// `malformed-answers`: the answer to a server request as a result no answer's schema accepts
/// (a `decision` that is a number, and none of the fields any other answer requires).
pub fn malformed_answer(answer: &Value) -> Option<Value> {
    changed(answer, answer_with(answer, json!({"decision": 42})))
}

/// The sandbox mode one step wider (`thread/start`'s `sandbox`).
fn wider_mode(mode: &str) -> &'static str {
    match mode {
        "read-only" => "workspace-write",
        _ => "danger-full-access",
    }
}

/// The sandbox policy one step wider (`turn/start`'s `sandboxPolicy`), network on.
fn wider_policy(policy: &Value) -> Value {
    match policy.get("type").and_then(Value::as_str) {
        Some("readOnly") => json!({"type": "workspaceWrite", "networkAccess": true}),
        Some("externalSandbox") => {
            let mut wider = policy.clone();
            wider["networkAccess"] = json!("enabled");
            wider
        }
        _ => json!({"type": "dangerFullAccess"}),
    }
}

fn params_mut(request: &mut Value) -> Option<&mut Map<String, Value>> {
    request.get_mut("params").and_then(Value::as_object_mut)
}

/// `widen-sandbox`: a `thread/start` asks for the sandbox mode one step wider (`read-only` →
/// `workspace-write` → `danger-full-access`; none: `danger-full-access`, as no step up from an
/// unknown default is surely wider); a `turn/start` that names a `sandboxPolicy` gets it one
/// step wider, with network on (`readOnly` → `workspaceWrite` → `dangerFullAccess`). A
/// permission profile (`permissions`) is replaced by full access.
pub fn widen_sandbox(request: &Value) -> Option<Value> {
    let mut wider = request.clone();
    match method(request) {
        Some("thread/start") => {
            let params = params_mut(&mut wider)?;
            let profile = params.remove("permissions").is_some_and(|p| !p.is_null());
            let mode = match params.get("sandbox").and_then(Value::as_str) {
                Some(mode) if !profile => wider_mode(mode),
                _ => "danger-full-access",
            };
            params.insert("sandbox".into(), mode.into());
        }
        Some("turn/start") => {
            let params = params_mut(&mut wider)?;
            let profile = params.remove("permissions").is_some_and(|p| !p.is_null());
            let policy = params.get("sandboxPolicy").filter(|p| !p.is_null());
            let policy = match policy {
                Some(policy) if !profile => wider_policy(policy),
                None if !profile => return None,
                _ => json!({"type": "dangerFullAccess"}),
            };
            params.insert("sandboxPolicy".into(), policy);
        }
        _ => return None,
    }
    changed(request, wider)
}

/// `approval-never`: `thread/start` and `turn/start` ask for `approvalPolicy: never`, whether
/// they named another policy or none.
pub fn approval_never(request: &Value) -> Option<Value> {
    if !matches!(method(request), Some("thread/start" | "turn/start")) {
        return None;
    }
    let mut never = request.clone();
    if never.get("params").is_none_or(Value::is_null) {
        never["params"] = json!({});
    }
    params_mut(&mut never)?.insert("approvalPolicy".into(), "never".into());
    changed(request, never)
}

/// `drop-initialized`: whether `message` is the `initialized` notification.
pub fn is_initialized(message: &Value) -> bool {
    method(message) == Some("initialized") && message.get("id").is_none()
}

/// `duplicate-requests`: the copy of a request, with `id` in place of its own.
pub fn duplicate(request: &Value, id: &str) -> Value {
    let mut copy = request.clone();
    copy["id"] = id.into();
    copy
}

fn changed(original: &Value, rewritten: Value) -> Option<Value> {
    (rewritten != *original).then_some(rewritten)
}

/// What becomes of one line the driver sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Sent {
    /// Forwarded as it was sent.
    Unchanged,
    /// Not forwarded.
    Dropped,
    /// This is forwarded instead.
    Replaced(Value),
    /// Forwarded as it was sent, then this copy.
    Twice(Value),
}

/// What becomes of one line the app-server sent (it is recorded whatever becomes of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// Forwarded to the driver.
    Forward,
    /// Not forwarded: the answer to a copy the relay sent (`duplicate-requests`).
    Swallow,
    /// Forwarded, then the app-server's part ends at once (`close-after-turn-start`): its stdin
    /// is closed, it is stopped, and nothing it sent after this line reaches the driver or the
    /// transcript's messages. A defined point of the wire: how much of the turn an app-server
    /// would still play after its input ended (the fake up to 250 ms of it, against the turn's
    /// own length) is a race, and a mutant's verdict must not rest on one.
    ForwardThenCut,
}

/// One launch's mutation: the operator and the context its rewrites need.
#[derive(Debug)]
pub struct WireMutation {
    operator: Operator,
    pending: Pending,
    /// Ids of the driver's `turn/start` requests not yet answered.
    turn_starts: HashSet<String>,
    /// Ids of the copies sent by `duplicate-requests` not yet answered.
    copies: HashSet<String>,
    next_copy: u64,
}

impl WireMutation {
    pub fn new(operator: Operator) -> Self {
        Self {
            operator,
            pending: Pending::new(),
            turn_starts: HashSet::new(),
            copies: HashSet::new(),
            next_copy: 0,
        }
    }

    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// What becomes of `message`, a line the driver sent.
    pub fn driver_sent(&mut self, message: &Value) -> Sent {
        if is_request(message) && method(message) == Some("turn/start") {
            self.turn_starts.insert(id_key(&message["id"]));
        }
        let answered = if is_answer(message) {
            self.pending.remove(&id_key(&message["id"]))
        } else {
            None
        };
        let rewritten = match self.operator {
            Operator::ApproveEverything => {
                answered.and_then(|request| approve_everything(message, &request))
            }
            Operator::DropAnswers => return answered.map_or(Sent::Unchanged, |_| Sent::Dropped),
            Operator::MalformedAnswers => answered.and_then(|_| malformed_answer(message)),
            Operator::WidenSandbox => widen_sandbox(message),
            Operator::ApprovalNever => approval_never(message),
            Operator::DropInitialized => {
                return if is_initialized(message) {
                    Sent::Dropped
                } else {
                    Sent::Unchanged
                }
            }
            Operator::DuplicateRequests if is_request(message) => {
                self.next_copy += 1;
                let id = format!("harness-mutation-duplicate-{}", self.next_copy);
                self.copies.insert(id_key(&Value::from(id.as_str())));
                return Sent::Twice(duplicate(message, &id));
            }
            Operator::DuplicateRequests | Operator::CloseAfterTurnStart | Operator::ExitZero => {
                None
            }
        };
        rewritten.map_or(Sent::Unchanged, Sent::Replaced)
    }

    /// What becomes of `message`, a line the app-server sent (seen before the driver sees it,
    /// so a request is known before it can be answered).
    pub fn server_sent(&mut self, message: &Value) -> Received {
        if is_request(message) {
            let request = ServerRequest::of(method(message).unwrap_or(""), message.get("params"));
            self.pending.insert(id_key(&message["id"]), request);
            return Received::Forward;
        }
        if !is_answer(message) {
            return Received::Forward;
        }
        let id = id_key(&message["id"]);
        if self.copies.remove(&id) {
            return Received::Swallow;
        }
        if self.turn_starts.remove(&id)
            && self.operator == Operator::CloseAfterTurnStart
            && message.get("result").is_some()
        {
            return Received::ForwardThenCut;
        }
        Received::Forward
    }
}

#[cfg(test)]
mod tests;
