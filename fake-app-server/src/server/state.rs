//! Per-server state: the client's handshake and the threads, with on-disk persistence so a
//! later process can `thread/resume` (like Codex's rollouts under `CODEX_HOME`).

use crate::config::Config;
use crate::protocol::shapes::{self, ThreadView};
use crate::protocol::RpcError;
use crate::sandbox::policy::{LegacyPolicy, Permissions};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::Digest;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;

#[derive(Default)]
pub(crate) struct State {
    pub initialized: bool,
    pub experimental_api: bool,
    pub client_name: String,
    pub threads: HashMap<String, ThreadState>,
    /// How many `thread/start` calls created a thread (a thread's `start_index`).
    pub threads_started: usize,
}

impl State {
    /// The loaded thread `id`, or Codex's error for an id it does not hold.
    pub(crate) fn thread_mut(&mut self, id: &str) -> Result<&mut ThreadState, RpcError> {
        self.threads
            .get_mut(id)
            .ok_or_else(|| super::gate::thread_not_found(id))
    }
}

/// What a running turn can be told.
#[derive(Debug)]
pub(crate) enum TurnSignal {
    /// `turn/interrupt`, answered when the turn is ready for it.
    Interrupt(super::interrupt::InterruptAnswer),
    Steer(Value),
    /// The client's answer to a server request (the whole JSON-RPC message).
    ClientAnswer(Value),
}

pub(crate) struct ActiveTurn {
    pub id: String,
    pub signals: Sender<TurnSignal>,
    /// Its `turn/start` had an `outputSchema` (what a scenario's `threads` selector may ask).
    pub output_schema: bool,
}

pub(crate) struct ThreadState {
    pub id: String,
    pub cwd: PathBuf,
    pub ephemeral: bool,
    /// Which `thread/start` created it, from 0 (what a scenario's `threads` selector counts).
    pub start_index: usize,
    pub path: Option<PathBuf>,
    pub permissions: Permissions,
    pub approval_policy: Value,
    /// `user` (the client is asked) or `auto_review` (a model review decides).
    pub approvals_reviewer: String,
    /// `thread/start.model` (else the configured model).
    pub model: Option<String>,
    /// The collaboration mode a client set (`turn/start` or `thread/settings/update`), as sent;
    /// `None`: never set (Codex then reports the default mode with no instructions).
    pub collaboration_mode: Option<Value>,
    /// Reasoning effort, summary, service tier and personality, as a client set them.
    pub model_settings: ModelSettings,
    /// `thread/start`'s `historyMode` and `daybreakEnabled`.
    pub history: shapes::HistoryChoice,
    /// `thread/name/set`.
    pub name: Option<String>,
    /// The thread `thread/fork` copied it from.
    pub forked_from: Option<String>,
    pub dynamic_tools: Vec<String>,
    /// `thread/start`'s `experimentalRawEvents` (raw events are not kept when the thread is
    /// persisted: `thread/resume` has no such field).
    pub raw_events: bool,
    /// The `features` table of `thread/start`'s `config`, when it names one: it replaces the
    /// configuration's whole `features` table for this thread (measured with 0.169: a
    /// `-c features.request_permissions_tool=true` is lost for a thread started with
    /// `config.features = {cwd_relative_turn_diffs = false}`, as codex-acp starts its threads).
    pub features: Option<serde_json::Map<String, serde_json::Value>>,
    pub instruction_sources: Vec<String>,
    pub preview: String,
    /// Tokens the scripted model used on this thread so far (`thread/tokenUsage/updated`).
    pub tokens_used: u64,
    pub created_at: u64,
    pub updated_at: u64,
    /// Finished turns, full items (for thread/read and thread/resume).
    pub turns: Vec<Value>,
    /// How many turns were started (turn N plays script turn N).
    pub turns_started: usize,
    pub active: Option<ActiveTurn>,
}

/// The model settings a client may set on a thread, echoed in `thread/settings/updated` (JSON
/// `null` until set).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ModelSettings {
    pub effort: Value,
    pub summary: Value,
    pub service_tier: Value,
    pub personality: Value,
}

/// The persisted form of a thread.
#[derive(Debug, Serialize, Deserialize)]
struct Persisted {
    id: String,
    #[serde(default)]
    start_index: usize,
    cwd: PathBuf,
    profile: Option<String>,
    legacy_policy: Option<Value>,
    approval_policy: Value,
    #[serde(default = "user_reviewer")]
    approvals_reviewer: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    collaboration_mode: Option<Value>,
    #[serde(default)]
    model_settings: ModelSettings,
    #[serde(default)]
    history: shapes::HistoryChoice,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    forked_from: Option<String>,
    dynamic_tools: Vec<String>,
    instruction_sources: Vec<String>,
    preview: String,
    created_at: u64,
    updated_at: u64,
    turns: Vec<Value>,
    turns_started: usize,
    /// The turn in progress when the record was written. A process that loads the record
    /// knows it as `interrupted`: it died before the turn ended, as Codex 0.169 shows a turn a
    /// crash cut short (`thread/read`, `thread/turns/list`: measured).
    #[serde(default)]
    active_turn: Option<PersistedTurn>,
    /// The thread's token usage, reported again when it is resumed (absent in older files).
    #[serde(default)]
    tokens_used: u64,
}

/// Whether a turn object (any items view) holds an agent message: what makes a turn unread.
pub(super) fn has_agent_message(turn: &Value) -> bool {
    turn["items"]
        .as_array()
        .is_some_and(|items| items.iter().any(|item| item["type"] == "agentMessage"))
}

#[derive(Debug, Serialize, Deserialize)]
struct PersistedTurn {
    id: String,
    started_at: u64,
}

fn user_reviewer() -> String {
    "user".into()
}

impl ThreadState {
    /// The thread's read receipt as Codex 0.169 reports it (`thread/read.readState`,
    /// `thread/readState/changed`): `null` for a thread with no rollout yet, ephemeral or before
    /// its first turn (no durable state: measured with `harness explore`, corpus
    /// `thread-read-before-a-turn`); else the
    /// earliest completed turn with an agent message is the first unread one (a turn that only
    /// planned leaves nothing to read: measured with 0.169; the fake implements no
    /// `thread/readState/update`, so nothing is ever marked read), with an opaque revision that
    /// changes with every finished turn.
    pub(crate) fn read_state(&self) -> Value {
        if !self.has_rollout() {
            return Value::Null;
        }
        let first_unread = self
            .turns
            .iter()
            .find(|turn| turn["status"] == "completed" && has_agent_message(turn))
            .and_then(|turn| turn["id"].as_str())
            .map(|id| serde_json::json!({"type": "turn", "turnId": id}));
        let digest = sha2::Sha256::digest(format!("{}/{}", self.id, self.turns.len()).as_bytes());
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        let revision = uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string();
        serde_json::json!({"firstUnread": first_unread, "revision": revision})
    }

    pub(crate) fn view<'a>(
        &'a self,
        model: &'a str,
        provider: &'a str,
        originator: &'a str,
        with_turns: bool,
    ) -> ThreadView<'a> {
        ThreadView {
            id: &self.id,
            cwd: self.cwd.to_str().unwrap_or(""),
            ephemeral: self.ephemeral,
            path: self.path.as_deref().and_then(Path::to_str),
            model,
            model_provider: provider,
            originator,
            preview: &self.preview,
            created_at: self.created_at,
            updated_at: self.updated_at,
            status: if self.active.is_some() {
                shapes::active_status(&[])
            } else {
                shapes::idle_status()
            },
            turns: if with_turns {
                self.turns.clone()
            } else {
                Vec::new()
            },
            history: &self.history,
        }
    }

    /// Whether Codex has written the thread's rollout: when its first turn started (never for
    /// an ephemeral thread). Until then `thread/resume` finds nothing (measured with 0.169).
    pub(crate) fn has_rollout(&self) -> bool {
        !self.ephemeral && self.turns_started > 0
    }

    /// The thread as Codex shows it (`thread/start`, `thread/read`, `thread/list`, …).
    pub(crate) fn json(
        &self,
        model: &str,
        provider: &str,
        originator: &str,
        with_turns: bool,
    ) -> Value {
        let mut thread = shapes::thread(&self.view(model, provider, originator, with_turns));
        thread["name"] = serde_json::json!(self.name);
        thread["forkedFromId"] = serde_json::json!(self.forked_from);
        thread
    }

    /// Write the thread's file, once it has a rollout ([`Self::has_rollout`]).
    pub(crate) fn persist(&self) {
        if self.has_rollout() {
            self.write_record();
        }
    }

    /// Write the thread's file at `path`, rollout or not (an archived thread is remembered even
    /// when it never ran a turn, as Codex remembers it).
    pub(crate) fn write_record(&self) {
        let Some(path) = &self.path else { return };
        let (profile, legacy_policy) = match &self.permissions {
            Permissions::Profile(p) => (Some(p.id.clone()), None),
            Permissions::Legacy(_) => (None, Some(self.permissions.projection())),
        };
        let record = Persisted {
            id: self.id.clone(),
            start_index: self.start_index,
            cwd: self.cwd.clone(),
            profile,
            legacy_policy,
            approval_policy: self.approval_policy.clone(),
            approvals_reviewer: self.approvals_reviewer.clone(),
            model: self.model.clone(),
            collaboration_mode: self.collaboration_mode.clone(),
            model_settings: self.model_settings.clone(),
            history: self.history.clone(),
            name: self.name.clone(),
            forked_from: self.forked_from.clone(),
            dynamic_tools: self.dynamic_tools.clone(),
            instruction_sources: self.instruction_sources.clone(),
            preview: self.preview.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
            turns: self.turns.clone(),
            turns_started: self.turns_started,
            active_turn: self.active.as_ref().map(|active| PersistedTurn {
                id: active.id.clone(),
                started_at: self.updated_at,
            }),
            tokens_used: self.tokens_used,
        };
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let tmp = path.with_extension("json.tmp");
            let mut line = serde_json::to_vec(&record)?;
            line.push(b'\n');
            std::fs::write(&tmp, line)?;
            std::fs::rename(tmp, path)
        };
        if let Err(err) = write() {
            eprintln!(
                "fake-app-server: cannot persist thread {} to {}: {err}",
                self.id,
                path.display()
            );
        }
    }

    /// Load a persisted thread; its profile is resolved against this process's config.
    pub(crate) fn load(path: &Path, config: &Config) -> Option<ThreadState> {
        let record: Persisted = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        let permissions = match (&record.profile, &record.legacy_policy) {
            (Some(id), _) => Permissions::Profile(
                config
                    .profile(Some(id))
                    .or_else(|_| config.profile(None))
                    .ok()?,
            ),
            (None, Some(policy)) => {
                Permissions::Legacy(LegacyPolicy::from_policy_json(policy).ok()?)
            }
            (None, None) => Permissions::Profile(config.profile(None).ok()?),
        };
        let mut turns = record.turns;
        if let Some(cut) = record.active_turn {
            if !turns.iter().any(|t| t["id"] == cut.id.as_str()) {
                turns.push(shapes::turn(&shapes::TurnView {
                    id: &cut.id,
                    items: Vec::new(),
                    items_view: "full",
                    status: "interrupted",
                    error: Value::Null,
                    started_at: Some(cut.started_at),
                    completed_at: None,
                    duration_ms: None,
                }));
            }
        }
        Some(ThreadState {
            id: record.id,
            cwd: record.cwd,
            ephemeral: false,
            start_index: record.start_index,
            path: Some(path.to_path_buf()),
            permissions,
            approval_policy: record.approval_policy,
            approvals_reviewer: record.approvals_reviewer,
            model: record.model,
            collaboration_mode: record.collaboration_mode,
            model_settings: record.model_settings,
            history: record.history,
            name: record.name,
            forked_from: record.forked_from,
            dynamic_tools: record.dynamic_tools,
            raw_events: false,
            features: None,
            instruction_sources: record.instruction_sources,
            preview: record.preview,
            tokens_used: record.tokens_used,
            created_at: record.created_at,
            updated_at: record.updated_at,
            turns,
            turns_started: record.turns_started,
            active: None,
        })
    }
}

/// `$CODEX_HOME` (else `~/.codex`), as Codex reports it in the initialize result.
pub(crate) fn codex_home() -> PathBuf {
    if let Some(home) = std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home);
    }
    std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".codex"))
        .unwrap_or_else(|| PathBuf::from(".codex"))
}

/// The installation's id: Codex 0.169 keeps a v4 uuid in `$CODEX_HOME/installation_id` and
/// reports the same one on every launch in that home (measured with `harness explore`, corpus
/// `second-launch-installation-id`). Read back when the file holds one, else a new one written
/// there; a home that cannot be written still gets an id for this launch, as the id is only
/// reported, never checked.
pub(super) fn installation_id() -> String {
    let file = codex_home().join("installation_id");
    let kept = std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| uuid::Uuid::parse_str(text.trim()).ok());
    if let Some(kept) = kept {
        return kept.hyphenated().to_string();
    }
    let id = uuid::Uuid::new_v4().to_string();
    let _ = std::fs::write(&file, &id);
    id
}

/// Where a new non-ephemeral thread is persisted: Codex 0.169's rollout path,
/// `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<id>.jsonl` in local time
/// (measured), which `thread.path` reports. The file holds the fake's own record of the
/// thread on one line, not Codex's rollout items. Only when `CODEX_HOME` is set: the fake
/// never writes into a real user's `~/.codex`.
pub(super) fn new_thread_file(thread_id: &str) -> Option<PathBuf> {
    let home = std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty())?;
    let now = chrono::Local::now();
    Some(
        PathBuf::from(home)
            .join("sessions")
            .join(now.format("%Y/%m/%d").to_string())
            .join(format!(
                "rollout-{}-{thread_id}.jsonl",
                now.format("%Y-%m-%dT%H-%M-%S")
            )),
    )
}

/// The persisted file of thread `thread_id` ([`new_thread_file`]), found by the id at the end
/// of its name in `$CODEX_HOME/sessions/YYYY/MM/DD/` (or, `archived`, in `archived_sessions/`).
pub(super) fn thread_file_in(thread_id: &str, archived: bool) -> Option<PathBuf> {
    let suffix = format!("-{thread_id}.jsonl");
    thread_files(archived).into_iter().find(|file| {
        file.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(&suffix))
    })
}

/// The file of a thread that is not archived ([`thread_file_in`]).
pub(super) fn thread_file(thread_id: &str) -> Option<PathBuf> {
    thread_file_in(thread_id, false)
}

/// `$CODEX_HOME/sessions`, where threads are persisted (below `YYYY/MM/DD/`).
pub(super) fn sessions_dir() -> Option<PathBuf> {
    let home = std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty())?;
    Some(PathBuf::from(home).join("sessions"))
}

/// `$CODEX_HOME/archived_sessions`, where Codex moves an archived thread's rollout (measured).
pub(super) fn archive_dir() -> Option<PathBuf> {
    let home = std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty())?;
    Some(PathBuf::from(home).join("archived_sessions"))
}

/// Every persisted thread file: below `sessions/YYYY/MM/DD/`, or in `archived_sessions/`.
pub(super) fn thread_files(archived: bool) -> Vec<PathBuf> {
    let children = |dir: &Path| -> Vec<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        found.sort();
        found
    };
    let is_rollout = |file: &PathBuf| {
        file.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"))
    };
    if archived {
        return archive_dir()
            .map(|dir| children(&dir).into_iter().filter(is_rollout).collect())
            .unwrap_or_default();
    }
    let Some(home) = std::env::var_os("CODEX_HOME").filter(|v| !v.is_empty()) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for year in children(&PathBuf::from(home).join("sessions")) {
        for month in children(&year) {
            for day in children(&month) {
                files.extend(children(&day).into_iter().filter(is_rollout));
            }
        }
    }
    files
}

/// The server's working directory: a thread's cwd when the client names none.
pub(super) fn server_cwd() -> PathBuf {
    std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
}
