//! A mock of the model API (the Responses API, streaming) for the real Codex, on loopback.
//!
//! Codex is configured with a custom provider whose `base_url` points here
//! (`model_providers.mock={base_url="http://127.0.0.1:PORT/v1", wire_api="responses", …}`).
//! The mock plays a scenario's model script (see [`script`]) — the same script the fake
//! app-server plays — records every request, and writes the model log
//! (`fake_app_server::model_log::ModelLogEntry` JSONL), as the fake writes its own: each user
//! message the model read, each tool call it made and each tool output Codex sent back. For a
//! command Codex judges refused by the sandbox that output is the only trace (Codex emits no
//! command item for it).
//!
//! Routes: `POST /v1/responses` streams a response; a WebSocket upgrade `GET /v1/responses` gets
//! 426 (Codex then falls back to POST); everything else 404.
//!
//! Turn and step are derived from each request's history ([`position`]); the only state kept is
//! what was already logged (Codex resends the whole history every time). How a call is made
//! (Codex's freeform `apply_patch`, the driver's first dynamic tool) follows what the request
//! offered ([`tools`]).

mod answer;
pub(crate) mod position;
pub(crate) mod script;
pub(crate) mod sse;
pub(crate) mod tools;

pub use script::{FailureKind, MockScript, ScriptedFailure};

use anyhow::{Context, Result};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use driver::bounds::MOCK_API_SHUTDOWN_GRACE;
use fake_app_server::model_log::ModelLogEntry;
use fake_app_server::scenario::model::Review;
use position::Position;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Largest request body accepted (Codex's first request is ~40 KB; long histories stay far
/// below this).
pub const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;
/// Requests served before the mock answers 500 to everything: a runaway loop fails the turn
/// instead of spinning.
pub(crate) const MAX_REQUESTS: usize = 256;

/// The mock's lifetime: it starts right before the app-server is launched and stops right after
/// the driver ended, so `served_ms` brackets the app-server's whole life (plus the launcher's
/// set-up and the driver's own bookkeeping).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct MockTiming {
    pub served_ms: u128,
    pub first_request_ms: Option<u128>,
    pub last_request_ms: Option<u128>,
    pub requests: usize,
}

/// Where the mock writes what it saw.
#[derive(Debug, Clone)]
pub struct MockConfig {
    pub script: MockScript,
    /// Model log JSONL (tool calls and tool outputs).
    pub model_log: PathBuf,
    /// Every request (headers + body) as JSONL, when set.
    pub request_log: Option<PathBuf>,
}

/// One request the mock received.
#[derive(Debug, Clone, Serialize)]
pub struct RecordedRequest {
    pub index: usize,
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    /// The body as JSON, or as a string when it was not JSON.
    pub body: Value,
    pub position: Option<Position>,
    /// What the mock answered: `stream`, `failed`, `closed-early`, `dropped`, `http-NNN`, `426`,
    /// `404`.
    pub answer: String,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

struct Shared {
    script: MockScript,
    started: std::time::Instant,
    /// Milliseconds since `started` of the first and the latest request.
    request_span: Mutex<Option<(u128, u128)>>,
    records: Mutex<Vec<RecordedRequest>>,
    request_log: Option<Mutex<std::fs::File>>,
    model_log: Mutex<ModelLogWriter>,
    /// The reviews of escalations the mock asked for, in order: Codex's automatic reviewer
    /// (`approvalsReviewer: auto_review`) asks the model for each one in a review request.
    reviews: Mutex<std::collections::VecDeque<Review>>,
    /// Thread ids in the order of their first request: the mock's stand-in for the order of
    /// `thread/start` (a thread's first request follows its start; two threads started before
    /// either asks the model may swap).
    thread_order: Mutex<Vec<String>>,
    /// Requests so far per (thread, turn, response): Codex sends a cut stream's request again,
    /// with the same history, and a scripted cut may let a later attempt through.
    attempts: Mutex<HashMap<(String, usize, usize), usize>>,
}

struct ModelLogWriter {
    file: std::fs::File,
    /// Tool outputs by call id; user messages by thread and their key in its history.
    logged: HashSet<String>,
    /// Everything written, digested as written: the harness can tell its model log from one
    /// rewritten behind its back ([`MockModelApi::seal_model_log`]).
    hasher: Sha256,
    bytes: u64,
    /// Sealed: later writes are dropped, so the file stays what the seal says.
    sealed: bool,
}

impl ModelLogWriter {
    fn write(&mut self, entry: &ModelLogEntry) {
        if self.sealed {
            return;
        }
        let mut line = serde_json::to_string(entry).expect("model log entries serialize");
        line.push('\n');
        // A write failure must not break the stream Codex is waiting for; it shows up as a
        // missing line, which the graders treat as missing evidence (fail closed).
        match self.file.write_all(line.as_bytes()) {
            Ok(()) => {
                self.hasher.update(line.as_bytes());
                self.bytes += line.len() as u64;
            }
            Err(error) => tracing::error!("mock model API: writing the model log: {error}"),
        }
    }
}

/// What the mock wrote into its model log: its size and SHA-256 (the shape of
/// `tap::record::Seal`, which this crate does not depend on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelLogSeal {
    pub bytes: u64,
    pub sha256: String,
}

/// A running mock; shuts down when dropped (or explicitly with [`MockModelApi::shutdown`]).
pub struct MockModelApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    timing_path: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl MockModelApi {
    /// Start a mock playing `script`, writing the model log to `model_log`.
    pub async fn start(
        script: Vec<fake_app_server::scenario::model::ModelTurn>,
        model_log: &Path,
    ) -> Result<Self> {
        Self::start_with(MockConfig {
            script: MockScript::new(script),
            model_log: model_log.to_path_buf(),
            request_log: None,
        })
        .await
    }

    pub async fn start_with(config: MockConfig) -> Result<Self> {
        let model_log = create_file(&config.model_log)?;
        let request_log = match &config.request_log {
            Some(path) => Some(Mutex::new(create_file(path)?)),
            None => None,
        };
        let shared = Arc::new(Shared {
            script: config.script,
            started: std::time::Instant::now(),
            request_span: Mutex::new(None),
            records: Mutex::new(Vec::new()),
            request_log,
            model_log: Mutex::new(ModelLogWriter {
                file: model_log,
                logged: HashSet::new(),
                hasher: Sha256::new(),
                bytes: 0,
                sealed: false,
            }),
            reviews: Mutex::new(std::collections::VecDeque::new()),
            thread_order: Mutex::new(Vec::new()),
            attempts: Mutex::new(HashMap::new()),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("binding the mock model API on 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/v1/responses", post(handle_responses).get(handle_get))
            .fallback(handle_other)
            .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
            .with_state(shared.clone());
        // Next to the model log, in the cell's evidence layout.
        let timing_path = config
            .model_log
            .with_file_name(report::layout::MODEL_API_TIMING);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let server = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            if let Err(error) = server.await {
                tracing::error!("mock model API stopped: {error}");
            }
        });
        Ok(Self {
            addr,
            shared,
            timing_path,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT/v1`, the provider's `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.records.lock().expect("records lock").clone()
    }

    /// Stop serving; waits (bounded) for the server task.
    /// Stop writing the model log and say what was written (later writes, from a request
    /// still in flight when its Codex was killed, are dropped).
    pub fn seal_model_log(&self) -> ModelLogSeal {
        let mut log = self.shared.model_log.lock().expect("model log lock");
        log.sealed = true;
        ModelLogSeal {
            bytes: log.bytes,
            sha256: hex::encode(log.hasher.clone().finalize()),
        }
    }

    pub async fn shutdown(mut self) {
        self.stop_now();
        if let Some(task) = self.task.take() {
            if tokio::time::timeout(MOCK_API_SHUTDOWN_GRACE, task)
                .await
                .is_err()
            {
                tracing::warn!("mock model API did not stop within {MOCK_API_SHUTDOWN_GRACE:?}");
            }
        }
    }

    /// How long the mock served so far, and when its requests came.
    pub(crate) fn timing(&self) -> MockTiming {
        let span = *self.shared.request_span.lock().expect("span lock");
        MockTiming {
            served_ms: self.shared.started.elapsed().as_millis(),
            first_request_ms: span.map(|(first, _)| first),
            last_request_ms: span.map(|(_, last)| last),
            requests: self.shared.records.lock().expect("records lock").len(),
        }
    }

    fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            // Written once, when serving ends: the cell's timing report reads it from the
            // evidence folder after the mock is gone.
            let timing = self.timing();
            if let Ok(text) = serde_json::to_string_pretty(&timing) {
                if let Err(error) = std::fs::write(&self.timing_path, text + "\n") {
                    tracing::warn!("writing {}: {error}", self.timing_path.display());
                }
            }
        }
    }
}

impl Drop for MockModelApi {
    fn drop(&mut self) {
        self.stop_now();
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

fn create_file(path: &Path) -> Result<std::fs::File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))
}

/// The short id a thread's probe files carry: derived from the thread id so parallel runs never
/// collide and a resumed thread keeps its id.
pub fn probe_id_for(thread_id: &str) -> String {
    let digest = Sha256::digest(thread_id.as_bytes());
    hex::encode(&digest[..4])
}

/// The thread a request is for. `thread-id` first: a sub-agent's requests carry the root
/// thread's `session-id` and their own `thread-id` (measured, 0.160 to 0.171; the two are equal
/// for a thread the client started), so by `session-id` a sub-agent would play its parent's
/// script.
fn thread_id(headers: &HeaderMap, body: &Value) -> String {
    ["thread-id", "session-id", "session_id"]
        .iter()
        .find_map(|name| headers.get(*name).and_then(|v| v.to_str().ok()))
        .map(str::to_string)
        .or_else(|| {
            body.get("prompt_cache_key")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| "no-thread-id".to_string())
}

async fn handle_responses(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let mut record = RecordedRequest {
        index: 0,
        method: "POST".into(),
        path: "/v1/responses".into(),
        headers: header_map(&headers),
        body: parsed,
        position: None,
        answer: String::new(),
    };
    let response = answer::answer(&shared, &headers, &mut record);
    remember(&shared, record);
    response
}

async fn handle_get(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let upgrade = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let (status, answer) = if upgrade {
        (StatusCode::UPGRADE_REQUIRED, "426")
    } else {
        (StatusCode::NOT_FOUND, "404")
    };
    remember(
        &shared,
        RecordedRequest {
            index: 0,
            method: "GET".into(),
            path: "/v1/responses".into(),
            headers: header_map(&headers),
            body: Value::Null,
            position: None,
            answer: answer.into(),
        },
    );
    error_response(status, "the mock model API speaks HTTP streaming only")
}

async fn handle_other(
    State(shared): State<Arc<Shared>>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: HeaderMap,
) -> Response {
    remember(
        &shared,
        RecordedRequest {
            index: 0,
            method: method.to_string(),
            path: uri.path().to_string(),
            headers: header_map(&headers),
            body: Value::Null,
            position: None,
            answer: "404".into(),
        },
    );
    error_response(StatusCode::NOT_FOUND, "not a route of the mock model API")
}

fn error_response(status: StatusCode, message: &str) -> Response {
    let body = serde_json::json!({"error": {"message": message, "type": "mock_error"}});
    (status, axum::Json(body)).into_response()
}

fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn remember(shared: &Shared, mut record: RecordedRequest) {
    let now = shared.started.elapsed().as_millis();
    {
        let mut span = shared.request_span.lock().expect("span lock");
        *span = Some(span.map_or((now, now), |(first, _)| (first, now)));
    }
    let mut records = shared.records.lock().expect("records lock");
    record.index = records.len();
    if let Some(file) = &shared.request_log {
        let line = serde_json::to_string(&record).expect("records serialize");
        if let Err(error) = writeln!(file.lock().expect("request log lock"), "{line}") {
            tracing::error!("mock model API: writing the request log: {error}");
        }
    }
    records.push(record);
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    /// A sub-agent's request (0.169, measured): the root's `session-id`, its own `thread-id`.
    /// Taken by `session-id`, the sub-agent played its parent's script (it spawned and waited
    /// in turn) instead of the default turn.
    #[test]
    fn a_sub_agents_request_is_its_own_threads() {
        let mut headers = HeaderMap::new();
        headers.insert("session-id", HeaderValue::from_static("root-thread"));
        headers.insert("thread-id", HeaderValue::from_static("child-thread"));
        let body = serde_json::json!({"prompt_cache_key": "root-thread"});
        assert_eq!(thread_id(&headers, &body), "child-thread");
        headers.remove("thread-id");
        assert_eq!(thread_id(&headers, &body), "root-thread");
        assert_eq!(thread_id(&HeaderMap::new(), &body), "root-thread");
    }
}
