//! Transport timing: what the recorder ([`crate::session`]) does to WHEN a message crosses the
//! wire, never to what it says, so a real app-server that always answers at once can be met
//! with the orderings the protocol allows but it does not produce on demand. A cell's scenario
//! chooses it (the matrix reads it from the scenario's method behaviours the fake plays itself:
//! `hang`, `answer_after_turn`); the fake's cells get none, as the fake plays them already.
//!
//! - [`Rule::Withhold`]: the driver's requests of a method are never delivered to the
//!   app-server, which then stays silent on them as a frozen one would; the driver must end
//!   within its own bound.
//! - [`Rule::AnswerAfterEvents`]: the app-server's answer to a `turn/start` is held until the
//!   `turn/completed` of the turn it started has been delivered (JSON-RPC orders neither;
//!   observed from Codex: openai/codex#41078), or until [`Timing::bound`] passed.
//!
//! Every application is said in the transcript by a `timing` record (the rule, the request id,
//! what was done), next to the line it concerns; the lines are recorded in the order the driver
//! got them. So the sealed evidence says the ordering was the harness's, not the app-server's.
//!
//! This module is the rules' logic alone, one message at a time ([`TimingState`]); the relays
//! that cut the streams into lines and apply it are `session::timed`. It is not a mutation
//! (`harness mutate` rewrites the driver's bytes to play a buggy driver; a timing plays a
//! legitimate app-server). In a mutated cell both apply: the driver's lines go through the
//! operator, then the timing; the app-server's through the timing, then the operator, which so
//! sees them in the order the driver gets them.

use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One rule of a cell's transport timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// The driver's requests of `method` are not delivered to the app-server.
    Withhold { method: String },
    /// The app-server's answer to a request of `method` (`turn/start`: its result names the
    /// turn) waits for that turn's `turn/completed`.
    AnswerAfterEvents { method: String },
}

/// A cell's transport timing: its rules, and how long an answer may be held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timing {
    pub rules: Vec<Rule>,
    /// The longest an answer is held; then it is delivered anyway (and the record says so).
    pub bound: Duration,
}

impl Timing {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    fn withholds(&self, method: &str) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r, Rule::Withhold { method: m } if m == method))
    }

    fn holds_answer_of(&self, method: &str) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r, Rule::AnswerAfterEvents { method: m } if m == method))
    }
}

/// What becomes of a line the driver sent.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverLine {
    Deliver,
    /// Not delivered; the `timing` record's fields.
    Withheld(Map<String, Value>),
}

/// Why a held answer went on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Right after its turn's `turn/completed`.
    AfterTurnCompleted,
    /// [`Timing::bound`] passed first.
    Bound,
    /// The app-server's output ended first.
    StreamEnded,
}

impl Release {
    fn name(self) -> &'static str {
        match self {
            Release::AfterTurnCompleted => "after-turn-completed",
            Release::Bound => "bound",
            Release::StreamEnded => "stream-ended",
        }
    }
}

/// An answer going on after it was held: the line, and the `timing` record's fields.
#[derive(Debug, Clone, PartialEq)]
pub struct Released {
    pub line: Vec<u8>,
    pub record: Map<String, Value>,
}

/// What becomes of a line the app-server sent: held (nothing goes on now), or passed on, then
/// the answers it releases.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerLine {
    Held,
    Pass(Vec<Released>),
}

#[derive(Debug)]
struct Held {
    line: Vec<u8>,
    id: Value,
    method: String,
    turn: String,
    since: Instant,
}

/// One launch's timing: the requests whose answers are awaited, the answers held.
#[derive(Debug)]
pub struct TimingState {
    timing: Timing,
    /// Requests of a held method not answered yet: id (its JSON text) → method.
    awaited: HashMap<String, String>,
    held: Vec<Held>,
}

fn method(message: &Value) -> Option<&str> {
    message.get("method").and_then(Value::as_str)
}

impl TimingState {
    pub fn new(timing: Timing) -> Self {
        Self {
            timing,
            awaited: HashMap::new(),
            held: Vec::new(),
        }
    }

    /// A JSON line the driver sent.
    pub fn driver_line(&mut self, message: &Value) -> DriverLine {
        let (Some(method), Some(id)) = (method(message), message.get("id")) else {
            return DriverLine::Deliver;
        };
        if self.timing.withholds(method) {
            let record = json!({
                "rule": "withhold",
                "method": method,
                "id": id,
                "did": format!("the harness's tap did not deliver the driver's {method} request to the app-server, which so never answered it (transport timing of the case's scenario, not the app-server's doing)"),
            });
            return DriverLine::Withheld(object(record));
        }
        if self.timing.holds_answer_of(method) {
            self.awaited.insert(id.to_string(), method.to_string());
        }
        DriverLine::Deliver
    }

    /// A JSON line the app-server sent, at `now`.
    pub fn server_line(&mut self, line: &[u8], message: &Value, now: Instant) -> ServerLine {
        let is_answer = method(message).is_none()
            && (message.get("result").is_some() || message.get("error").is_some());
        if let (true, Some(id)) = (is_answer, message.get("id")) {
            if let Some(method) = self.awaited.remove(&id.to_string()) {
                // An error answer starts no turn: nothing to wait for.
                if let Some(turn) = message.pointer("/result/turn/id").and_then(Value::as_str) {
                    self.held.push(Held {
                        line: line.to_vec(),
                        id: id.clone(),
                        method,
                        turn: turn.to_string(),
                        since: now,
                    });
                    return ServerLine::Held;
                }
            }
            return ServerLine::Pass(Vec::new());
        }
        if method(message) == Some("turn/completed") {
            if let Some(turn) = message.pointer("/params/turn/id").and_then(Value::as_str) {
                return ServerLine::Pass(
                    self.release(now, Release::AfterTurnCompleted, |h| h.turn == turn),
                );
            }
        }
        ServerLine::Pass(Vec::new())
    }

    /// The held answers whose bound passed by `now`.
    pub fn due(&mut self, now: Instant) -> Vec<Released> {
        let bound = self.timing.bound;
        self.release(now, Release::Bound, |h| now >= h.since + bound)
    }

    /// When the first held answer's bound passes, if one is held.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.held.iter().map(|h| h.since + self.timing.bound).min()
    }

    /// The app-server's output ended: every held answer goes on.
    pub fn finish(&mut self, now: Instant) -> Vec<Released> {
        self.release(now, Release::StreamEnded, |_| true)
    }

    fn release(
        &mut self,
        now: Instant,
        why: Release,
        which: impl Fn(&Held) -> bool,
    ) -> Vec<Released> {
        let (go, stay): (Vec<Held>, Vec<Held>) =
            std::mem::take(&mut self.held).into_iter().partition(which);
        self.held = stay;
        go.into_iter()
            .map(|held| {
                let held_ms = now.saturating_duration_since(held.since).as_millis() as u64;
                let after = match why {
                    Release::AfterTurnCompleted => {
                        format!("right after turn {}'s turn/completed", held.turn)
                    }
                    Release::Bound => format!(
                        "after {} ms without turn {}'s turn/completed (the timing's bound)",
                        self.timing.bound.as_millis(),
                        held.turn
                    ),
                    Release::StreamEnded => "when the app-server's output ended".to_string(),
                };
                let record = json!({
                    "rule": "answer-after-events",
                    "method": held.method,
                    "id": held.id,
                    "turn": held.turn,
                    "held_ms": held_ms,
                    "released": why.name(),
                    "did": format!("the harness's tap held the app-server's answer to {} for {held_ms} ms and delivered it {after}: the order the driver got is the tap's (transport timing of the case's scenario), not the app-server's", held.method),
                });
                Released {
                    line: held.line,
                    record: object(record),
                }
            })
            .collect()
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests;
