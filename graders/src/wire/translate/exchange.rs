//! The protocol-level events of the fold (`protocol.*`, docs/events.md "Protocol exchanges"):
//! requests and answers both ways, one event each, up to a bound per kind; the app-server's
//! notifications only counted, per method, into one summary written at the end — so a burst of
//! 100 000 deltas costs a counter, not 100 000 events.

use super::{text, text_at, Fold};
use crate::events::{
    AppServerLaunched, Body, ClientNotification, ClientRequest, ClientRequestAnswered, InputPart,
    Kind, NotRecorded, NotificationCount, RpcError, SchemaVerdict, ServerNotifications,
    ServerRequest, ServerRequestAnswered, SettingsSent, TurnStatus,
};
use crate::excerpt::excerpt;
use crate::protocol::Release;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// Most events of one `protocol.*` kind written per run; past it they are counted in
/// `protocol.not-recorded`.
pub(crate) const MAX_EVENTS_PER_KIND: u64 = 10_000;
/// Most notification methods listed in the summary (the rest are counted as `unlisted`).
const MAX_NOTIFICATION_METHODS: usize = 512;
/// How many notifications of each method are checked against the release's schema: enough to
/// see an unknown enum value or item type, bounded so a burst costs nothing more.
const SCHEMA_CHECKS_PER_METHOD: u64 = 64;
/// Longest excerpt of an answer's result or an error message.
const ANSWER_EXCERPT_CHARS: usize = 240;
/// Fields a JSON-RPC message may carry besides its body.
const ENVELOPE_FIELDS: &[&str] = &["jsonrpc", "id", "method", "params"];
/// Most input parts kept of one request, turns of one answer, environment names of one launch.
const MAX_INPUT_PARTS: usize = 32;
const MAX_TURNS_LISTED: usize = 64;
const MAX_ENV_NAMES: usize = 256;
/// Longest excerpt of an input part's text.
const INPUT_TEXT_CHARS: usize = 500;

/// `params.input`, part by part.
fn input_parts(params: &Value) -> Vec<InputPart> {
    params
        .get("input")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .take(MAX_INPUT_PARTS)
        .map(|part| InputPart {
            kind: text(part, "type").unwrap_or_default(),
            text: text(part, "text").map(|t| excerpt(&t, INPUT_TEXT_CHARS)),
            name: text(part, "name"),
            path: text(part, "path"),
        })
        .collect()
}

/// `result.thread.turns`, each turn's id and status (the last ones, bounded).
fn turn_statuses(result: &Value) -> Option<Vec<TurnStatus>> {
    let turns = result.pointer("/thread/turns")?.as_array()?;
    let skip = turns.len().saturating_sub(MAX_TURNS_LISTED);
    Some(
        turns
            .iter()
            .skip(skip)
            .map(|t| TurnStatus {
                id: text(t, "id").unwrap_or_default(),
                status: text(t, "status").unwrap_or_default(),
            })
            .collect(),
    )
}

/// The release the answers are checked against, or why there is none.
pub(super) type ReleaseOrWhy = Result<&'static Release, String>;

pub(super) fn release_for(release: Option<&str>) -> ReleaseOrWhy {
    match release {
        None => Err("the release whose protocol applies is not known to the translator".into()),
        Some(version) => crate::protocol::release(version).map_err(|e| e.to_string()),
    }
}

/// A server request the driver answered at least once, or an id it answered unasked.
#[derive(Debug, Clone)]
pub(super) struct Answered {
    method: Option<String>,
    answers: u32,
    asked_at: u64,
}

#[derive(Debug, Default)]
pub(super) struct ExchangeState {
    /// Events written per kind.
    written: HashMap<Kind, u64>,
    /// Events left out per kind.
    left_out: BTreeMap<&'static str, u64>,
    /// Answered server request ids, by launch.
    answered: HashMap<(u64, String), Answered>,
    notifications: BTreeMap<String, NotificationCount>,
    unlisted: u64,
    largest_line: u64,
    cut_line: Option<u64>,
}

fn rpc_error(error: &Value) -> RpcError {
    RpcError {
        code: error.get("code").and_then(Value::as_i64),
        message: excerpt(
            &text(error, "message").unwrap_or_default(),
            ANSWER_EXCERPT_CHARS,
        ),
    }
}

/// An approval's decision: a string, or the key of an object decision.
pub fn decision_of(result: &Value) -> Option<String> {
    match result.get("decision")? {
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => map.keys().next().cloned(),
        other => Some(other.to_string()),
    }
}

/// The size of `message` as one JSON line, without building the line.
fn line_bytes(message: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` into a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, message);
    count.0
}

impl Fold {
    /// Write a protocol event unless its kind reached the bound.
    pub(super) fn push_exchange(&mut self, body: Body) {
        let kind = body.kind();
        let written = self.exchange.written.entry(kind).or_default();
        if *written >= MAX_EVENTS_PER_KIND {
            *self.exchange.left_out.entry(kind.as_str()).or_default() += 1;
            return;
        }
        *written += 1;
        self.push(body);
    }

    pub(super) fn record_client_request(
        &mut self,
        launch: u64,
        id: &str,
        method: &str,
        params: &Value,
    ) {
        self.push_exchange(Body::ClientRequest(ClientRequest {
            launch,
            id: id.to_string(),
            method: method.to_string(),
            thread_id: text(params, "threadId"),
            turn_id: text(params, "turnId"),
            expected_turn_id: text(params, "expectedTurnId"),
            sandbox: params.get("sandbox").filter(|v| !v.is_null()).cloned(),
            sandbox_policy: params
                .get("sandboxPolicy")
                .filter(|v| !v.is_null())
                .cloned(),
            inputs: input_parts(params),
            skill_instructions: params
                .pointer("/config/skills/include_instructions")
                .cloned(),
            ephemeral: params.get("ephemeral").and_then(Value::as_bool),
            settings: SettingsSent {
                cwd: text(params, "cwd"),
                permissions: text(params, "permissions"),
                approval_policy: params
                    .get("approvalPolicy")
                    .filter(|v| !v.is_null())
                    .cloned(),
                approvals_reviewer: text(params, "approvalsReviewer"),
                collaboration_mode: text_at(params, "/collaborationMode/mode"),
                model: text(params, "model"),
            },
        }));
    }

    /// A launch record of the tap: the names of the environment the driver passed.
    pub(super) fn record_launch(&mut self, launch: u64, env_names: &[String], cwd: Option<&str>) {
        let mut names = env_names.to_vec();
        names.sort();
        names.dedup();
        let left_out = names.len().saturating_sub(MAX_ENV_NAMES) as u64;
        names.truncate(MAX_ENV_NAMES);
        self.push_exchange(Body::AppServerLaunched(AppServerLaunched {
            launch,
            env_names: names,
            env_names_left_out: left_out,
            cwd: cwd.map(str::to_string),
        }));
    }

    pub(super) fn record_client_notification(&mut self, launch: u64, method: &str, params: &Value) {
        self.push_exchange(Body::ClientNotification(ClientNotification {
            launch,
            method: method.to_string(),
            thread_id: text(params, "threadId"),
            turn_id: text(params, "turnId"),
        }));
    }

    /// The app-server's answer to a request of the driver, sent at `asked_at`.
    pub(super) fn record_client_answer(
        &mut self,
        launch: u64,
        id: &str,
        method: &str,
        asked_at: u64,
        message: &Value,
    ) {
        let result = message.get("result").unwrap_or(&Value::Null);
        self.push_exchange(Body::ClientRequestAnswered(ClientRequestAnswered {
            launch,
            id: id.to_string(),
            method: method.to_string(),
            error: message.get("error").map(rpc_error),
            thread_id: text_at(result, "/thread/id").or_else(|| text(result, "threadId")),
            turn_id: text_at(result, "/turn/id").or_else(|| text(result, "turnId")),
            sandbox: result.get("sandbox").filter(|v| !v.is_null()).cloned(),
            latency_ms: self.now.saturating_sub(asked_at),
            cwd: text_at(result, "/thread/cwd"),
            turns: turn_statuses(result),
            codex_home: text(result, "codexHome"),
            approval_policy: result
                .get("approvalPolicy")
                .filter(|v| !v.is_null())
                .cloned(),
            approvals_reviewer: text(result, "approvalsReviewer"),
            model: text(result, "model"),
        }));
    }

    pub(super) fn record_server_request(
        &mut self,
        launch: u64,
        id: &str,
        method: &str,
        params: &Value,
    ) {
        self.push_exchange(Body::ServerRequest(ServerRequest {
            launch,
            id: id.to_string(),
            method: method.to_string(),
            thread_id: text(params, "threadId").or_else(|| text(params, "conversationId")),
            turn_id: text(params, "turnId"),
            item_id: text(params, "itemId").or_else(|| text(params, "callId")),
        }));
    }

    /// The driver's answer to the server request `id`. `first` is the request when this is its
    /// first answer (method and when it was sent); otherwise the answer repeats an earlier one,
    /// or answers an id the app-server never asked.
    pub(super) fn record_server_answer(
        &mut self,
        launch: u64,
        id: &str,
        first: Option<(&str, u64)>,
        message: &Value,
    ) {
        let key = (launch, id.to_string());
        let answered = match first {
            Some((method, asked_at)) => Answered {
                method: Some(method.to_string()),
                answers: 1,
                asked_at,
            },
            None => match self.exchange.answered.get(&key) {
                Some(earlier) => Answered {
                    answers: earlier.answers.saturating_add(1),
                    ..earlier.clone()
                },
                None => Answered {
                    method: None,
                    answers: 1,
                    asked_at: self.now,
                },
            },
        };
        if self.exchange.answered.len() < MAX_EVENTS_PER_KIND as usize
            || self.exchange.answered.contains_key(&key)
        {
            self.exchange.answered.insert(key, answered.clone());
        }
        let error = message.get("error").map(rpc_error);
        let result = message.get("result").unwrap_or(&Value::Null);
        let schema = match (&error, &answered.method) {
            (Some(_), _) => None,
            (None, None) => Some(SchemaVerdict::Unchecked {
                why: "the app-server never sent a request with this id".into(),
            }),
            (None, Some(method)) => Some(match &self.release.0 {
                Ok(release) => release.check_answer(method, result),
                Err(why) => SchemaVerdict::Unchecked { why: why.clone() },
            }),
        };
        self.push_exchange(Body::ServerRequestAnswered(ServerRequestAnswered {
            launch,
            id: id.to_string(),
            latency_ms: answered
                .method
                .as_ref()
                .map(|_| self.now.saturating_sub(answered.asked_at)),
            method: answered.method,
            answer_number: answered.answers,
            decision: error.is_none().then(|| decision_of(result)).flatten(),
            result_excerpt: error
                .is_none()
                .then(|| excerpt(&result.to_string(), ANSWER_EXCERPT_CHARS)),
            error,
            schema,
        }));
    }

    /// Count one notification of the app-server (never an event of its own).
    pub(super) fn count_notification(&mut self, method: &str, params: &Value, message: &Value) {
        let release = self.release.0.as_ref().ok().copied();
        let listed = self.exchange.notifications.len();
        let entry = match self.exchange.notifications.get_mut(method) {
            Some(entry) => entry,
            None if listed >= MAX_NOTIFICATION_METHODS => {
                self.exchange.unlisted += 1;
                return;
            }
            None => self
                .exchange
                .notifications
                .entry(method.to_string())
                .or_insert_with(|| NotificationCount {
                    method: method.to_string(),
                    count: 0,
                    known: release.map(|r| r.has_notification(method)),
                    checked: 0,
                    invalid: 0,
                    extra_fields: 0,
                }),
        };
        entry.count += 1;
        let Some(release) = release.filter(|r| r.has_notification(method)) else {
            return;
        };
        let envelope_extra = message
            .as_object()
            .is_some_and(|m| m.keys().any(|k| !ENVELOPE_FIELDS.contains(&k.as_str())));
        if envelope_extra || release.extra_params_fields(method, params).unwrap_or(0) > 0 {
            entry.extra_fields += 1;
        }
        if entry.checked < SCHEMA_CHECKS_PER_METHOD {
            entry.checked += 1;
            if !release.notification_is_valid(message) {
                entry.invalid += 1;
            }
        }
    }

    /// Note the size of a line the app-server sent.
    pub(super) fn note_server_line(&mut self, message: Option<&Value>, noted_bytes: Option<u64>) {
        let bytes = message.map_or(0, line_bytes).max(noted_bytes.unwrap_or(0));
        self.exchange.largest_line = self.exchange.largest_line.max(bytes);
    }

    /// Note a line of the app-server its output ended inside: `bytes` of it were read.
    pub(super) fn note_cut_server_line(&mut self, bytes: u64) {
        self.exchange.largest_line = self.exchange.largest_line.max(bytes);
        let cut = self.exchange.cut_line.get_or_insert(0);
        *cut = (*cut).max(bytes);
    }

    /// The release's notifications the app-server owed none of the launches the driver
    /// initialized: each opted out of it, or did not declare the experimental API it needs.
    /// Empty when no launch was initialized.
    pub(super) fn not_owed(&self, experimental_only: &[String]) -> Vec<String> {
        let declared: Vec<_> = self
            .launches
            .values()
            .filter_map(|l| l.initialized.as_ref())
            .collect();
        let Some(first) = declared.first() else {
            return Vec::new();
        };
        let withheld = |d: &super::InitializeDeclared, method: &str| {
            d.opted_out.iter().any(|m| m == method)
                || (!d.experimental_api && experimental_only.iter().any(|m| m == method))
        };
        let candidates = first
            .opted_out
            .iter()
            .chain(experimental_only)
            .cloned()
            .collect::<std::collections::BTreeSet<String>>();
        candidates
            .into_iter()
            .filter(|method| declared.iter().all(|d| withheld(d, method)))
            .collect()
    }

    /// The summary of notifications and what was left out: the fold's last protocol events.
    pub(super) fn finish_exchange(&mut self, release: Option<&str>, not_owed: Vec<String>) {
        let summary = ServerNotifications {
            release: release.map(str::to_string),
            methods: std::mem::take(&mut self.exchange.notifications)
                .into_values()
                .collect(),
            unlisted: self.exchange.unlisted,
            largest_line_bytes: self.exchange.largest_line,
            cut_line_bytes: self.exchange.cut_line,
            not_owed,
        };
        self.push(Body::ServerNotifications(summary));
        for (what, count) in std::mem::take(&mut self.exchange.left_out) {
            self.push(Body::NotRecorded(NotRecorded {
                what: what.to_string(),
                count,
            }));
        }
    }
}
