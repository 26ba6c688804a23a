//! Transcripts in the tap's format (`graders::wire::transcript`), built line by line, and a run
//! around one (what the cell knew, how the driver ended). Tests grade them through the real
//! translator (`graders::wire::translate`), then break them the way real drivers do; a healthy
//! run of every protocol case to break is in `healthy` (its names are this module's).

use super::{codex_exec_output, grade_both, tool_call, tool_output, workspace, Stream};
use graders::events::*;
use graders::verdict::{Verdict, VerdictKind};
use graders::wire::{self, Context, DriverEnd};
use serde_json::{json, Value};

mod healthy;
pub use healthy::*;

pub const RELEASE: &str = "0.169.0";
pub const THREAD: &str = "thr-1";
pub const TURN: &str = "turn-1";
/// Request ids of the handshake helpers.
pub const INITIALIZE_ID: u64 = 1;
pub const THREAD_START_ID: u64 = 2;
pub const TURN_START_ID: u64 = 3;
/// The side thread of [`Transcript::title_thread`] and its `thread/start` request id.
pub const TITLE_THREAD: &str = "thr-title";
pub const TITLE_THREAD_START_ID: u64 = 90;

#[derive(Debug, Clone)]
pub struct Transcript {
    lines: Vec<String>,
    pub time: u64,
    launch: u64,
}

impl Default for Transcript {
    fn default() -> Self {
        Self::new()
    }
}

impl Transcript {
    /// A transcript with its first launch recorded.
    pub fn new() -> Self {
        Self {
            lines: Vec::new(),
            time: 1_000,
            launch: 0,
        }
        .relaunch()
    }

    fn push(mut self, mut line: Value) -> Self {
        self.time += 1;
        line["time"] = json!(self.time);
        line["launch"] = json!(self.launch);
        self.lines.push(line.to_string());
        self
    }

    /// The next launch of the app-server.
    pub fn relaunch(self) -> Self {
        self.relaunch_with(&["PATH"])
    }

    /// The next launch of the app-server, started with an environment of these names.
    pub fn relaunch_with(self, env_names: &[&str]) -> Self {
        self.launch_as(&["app-server"], env_names, WORKSPACE)
    }

    /// The next launch of the app-server, started with `argv` in the folder `cwd`.
    pub fn launch_as(mut self, argv: &[&str], env_names: &[&str], cwd: &str) -> Self {
        self.launch += 1;
        self.push(
            json!({"kind": "launch", "argv": argv, "env_names": env_names,
            "cwd": cwd, "added_args": []}),
        )
    }

    /// A transcript whose first launch is `codex app-server` started in the folder `cwd`.
    pub fn started_in(cwd: &str) -> Self {
        Self::nothing().launch_as(&["app-server"], &["PATH"], cwd)
    }

    /// A transcript with no launch at all: the driver never ran `codex`.
    pub fn nothing() -> Self {
        Self {
            lines: Vec::new(),
            time: 1_000,
            launch: 0,
        }
    }

    /// A line from the driver.
    pub fn send(self, message: Value) -> Self {
        self.push(json!({"direction": "in", "message": message}))
    }

    /// A line from the app-server.
    pub fn recv(self, message: Value) -> Self {
        self.push(json!({"direction": "out", "message": message}))
    }

    /// A line too long for the tap to keep.
    pub fn oversized(self, bytes: u64) -> Self {
        self.push(json!({"direction": "out", "note": "oversized line", "bytes": bytes}))
    }

    /// The first `bytes` of an app-server line whose end never came (the recording ended inside
    /// it): a `partial` line.
    pub fn cut_off(self, bytes: usize) -> Self {
        let mut line = r#"{"method":"item/agentMessage/delta","params":{"delta":""#.to_string();
        line.push_str(&"x".repeat(bytes.saturating_sub(line.len())));
        self.push(json!({"direction": "out", "raw": line, "partial": true}))
    }

    /// The harness killed the app-server: the driver let go of its `codex`.
    pub fn killed_by_harness(self) -> Self {
        self.push(
            json!({"kind": "exit", "status": null, "signal": 9, "error": null,
            "killed_by_harness": "the tap's connection closed before the app-server's exit"}),
        )
    }

    pub fn wait(mut self, ms: u64) -> Self {
        self.time += ms;
        self
    }

    pub fn stdin_closed(self) -> Self {
        self.push(json!({"kind": "stdin-closed"}))
    }

    pub fn exit(self, status: i64) -> Self {
        self.push(json!({"kind": "exit", "status": status, "signal": null, "error": null}))
    }

    /// The driver sends its `codex` `signal`, which the tap passes on (the recorder's record).
    pub fn driver_signal(self, signal: i64) -> Self {
        self.push(json!({"kind": "driver-signal", "signal": signal}))
    }

    /// The app-server ends by `signal`.
    pub fn exit_by_signal(self, signal: i64) -> Self {
        self.push(json!({"kind": "exit", "status": null, "signal": signal, "error": null}))
    }

    /// The app-server dies on its own.
    pub fn crash(self) -> Self {
        self.push(json!({"kind": "exit", "status": null, "signal": 9, "error": null}))
    }

    /// The driver closes stdin and the app-server exits 0.
    pub fn close(self) -> Self {
        self.stdin_closed().exit(0)
    }

    pub fn request(self, id: u64, method: &str, params: Value) -> Self {
        self.send(json!({"id": id, "method": method, "params": params}))
    }

    pub fn result(self, id: u64, result: Value) -> Self {
        self.recv(json!({"id": id, "result": result}))
    }

    pub fn error(self, id: u64, code: i64, message: &str) -> Self {
        self.recv(json!({"id": id, "error": {"code": code, "message": message}}))
    }

    /// `initialize`, its answer, `initialized`.
    pub fn handshake(self) -> Self {
        self.request(
            INITIALIZE_ID,
            "initialize",
            json!({"clientInfo": {"name": "t"}}),
        )
        .result(INITIALIZE_ID, json!({"userAgent": "codex"}))
        .send(json!({"method": "initialized"}))
    }

    /// `thread/start` with `params`, answered for [`THREAD`] with a read-only sandbox and the
    /// `reported` settings.
    pub fn open_thread_with(self, params: Value, reported: Value) -> Self {
        let mut result = json!({"thread": {"id": THREAD, "cwd": WORKSPACE}, "sandbox": {"type": "readOnly"}, "approvalPolicy": "on-request"});
        for (key, value) in reported.as_object().into_iter().flatten() {
            result[key] = value.clone();
        }
        self.request(THREAD_START_ID, "thread/start", params)
            .result(THREAD_START_ID, result)
    }

    pub fn open_thread(self, thread: &str) -> Self {
        self.request(THREAD_START_ID, "thread/start", json!({"cwd": "/w"}))
            .result(
                THREAD_START_ID,
                json!({"thread": {"id": thread}, "sandbox": {"type": "readOnly"}, "approvalPolicy": "on-request"}),
            )
    }

    pub fn start_turn(self, id: u64, thread: &str, turn: &str) -> Self {
        self.request(
            id,
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "go"}]}),
        )
        .result(id, json!({"turn": {"id": turn}}))
        .turn_started(thread, turn)
    }

    pub fn turn_started(self, thread: &str, turn: &str) -> Self {
        self.recv(
            json!({"method": "turn/started", "params": {"threadId": thread,
            "turn": {"id": turn, "items": [], "status": "inProgress"}}}),
        )
    }

    pub fn complete_turn(self, thread: &str, turn: &str, status: &str) -> Self {
        let error = (status == "failed").then(|| json!({"message": "the model stream failed"}));
        self.recv(
            json!({"method": "turn/completed", "params": {"threadId": thread,
            "turn": {"id": turn, "items": [], "status": status, "error": error}}}),
        )
    }

    pub fn item(self, thread: &str, turn: &str, item: Value) -> Self {
        self.recv(
            json!({"method": "item/completed", "params": {"threadId": thread, "turnId": turn,
            "completedAtMs": 1_700_000_000_000u64, "item": item}}),
        )
    }

    /// A server request of `method` about the driver's turn.
    pub fn server_request(self, id: u64, method: &str) -> Self {
        self.recv(
            json!({"id": id, "method": method, "params": {"threadId": THREAD,
            "turnId": TURN, "itemId": "item-1", "reason": "write the probe"}}),
        )
    }

    pub fn answer(self, id: u64, result: Value) -> Self {
        self.send(json!({"id": id, "result": result}))
    }

    pub fn answer_error(self, id: u64, code: i64, message: &str) -> Self {
        self.send(json!({"id": id, "error": {"code": code, "message": message}}))
    }

    /// Handshake, thread, and the driver's turn started.
    pub fn session() -> Self {
        Self::new()
            .handshake()
            .open_thread(THREAD)
            .start_turn(TURN_START_ID, THREAD, TURN)
    }

    /// The same session with every thread the driver starts ephemeral (`thread/start
    /// {ephemeral: true}`: a thread Codex does not persist), a choice the protocol leaves to it.
    pub fn ephemeral_threads(mut self) -> Self {
        for line in &mut self.lines {
            let mut value: Value = serde_json::from_str(line).expect("a transcript line");
            if value["direction"] == "in" && value["message"]["method"] == "thread/start" {
                value["message"]["params"]["ephemeral"] = json!(true);
                *line = value.to_string();
            }
        }
        self
    }

    /// What codex-acp does after its turn: it opens an ephemeral thread to title the session
    /// and starts a turn on it, and it may end before that turn completes.
    pub fn title_thread(self) -> Self {
        self.request(
            TITLE_THREAD_START_ID,
            "thread/start",
            json!({"cwd": "/w", "ephemeral": true}),
        )
        .result(
            TITLE_THREAD_START_ID,
            json!({"thread": {"id": TITLE_THREAD}, "sandbox": {"type": "readOnly"}, "approvalPolicy": "on-request"}),
        )
        .start_turn(TITLE_THREAD_START_ID + 1, TITLE_THREAD, "turn-title")
    }

    /// The driver's turn completes and the driver ends.
    pub fn finish(self) -> Self {
        self.complete_turn(THREAD, TURN, "completed").close()
    }

    pub fn text(&self) -> String {
        if self.lines.is_empty() {
            return String::new();
        }
        self.lines.join("\n") + "\n"
    }
}

/// Codex 0.169's one notification for experimental clients only (measured by `harness drift`).
pub const EXPERIMENTAL_ONLY: &str = "thread/readState/changed";

pub fn outcome() -> Declarations {
    Declarations {
        outcome: Some(OutcomeDeclaration::ExitStatus),
        ..Declarations::default()
    }
}

pub fn context(
    suite: &str,
    case: &str,
    mode: Mode,
    declarations: Declarations,
    release: Option<&str>,
    canaries: Option<PlantedCanaries>,
    experimental_only_notifications: Vec<String>,
) -> Context {
    Context {
        cell: CellId::new(suite, "my-runner-fake", "local", case),
        driver: "my-runner".into(),
        mode,
        target: Target::Local,
        network_enabled: false,
        policy: PolicyGeneration::Current,
        protocol: ProtocolSetup {
            release: release.map(str::to_string),
            declarations,
            canaries,
            experimental_only_notifications,
            task: None,
        },
    }
}

/// One run: what crossed the wire, what the cell knew, how the driver ended, and what the
/// harness added.
#[derive(Debug, Clone)]
pub struct Run {
    pub suite: String,
    pub case: String,
    pub mode: Mode,
    pub transcript: Transcript,
    pub declarations: Declarations,
    pub release: Option<String>,
    pub end: DriverEnd,
    pub extras: Vec<(Source, Body)>,
    /// What the harness recorded planting in the driver's environment (every protocol cell).
    pub canaries: Option<PlantedCanaries>,
    /// What the release sends only to experimental clients (the persona's measured list).
    pub experimental_only: Vec<String>,
    /// The task's choices the harness recorded (`run.started.protocol.task`).
    pub task: Option<TaskChoices>,
}

/// The workspace every transcript here runs in.
pub const WORKSPACE: &str = "/w";

/// The task of a run in [`WORKSPACE`], naming `approvals` when given.
pub fn task_in_workspace(approvals: Option<&str>) -> TaskChoices {
    TaskChoices {
        workspace: vec![WORKSPACE.into()],
        approvals: approvals.map(str::to_string),
        model: None,
    }
}

/// The record of the canaries a harness plants (names and a digest, never the values).
pub fn planted() -> PlantedCanaries {
    PlantedCanaries {
        names: vec!["GITHUB_TOKEN".into(), "OPENAI_API_KEY".into()],
        digest: format!("sha256:{}", "0".repeat(64)),
    }
}

impl Run {
    pub fn new(suite: &str, case: &str, transcript: Transcript) -> Self {
        Self {
            suite: suite.into(),
            case: case.into(),
            mode: Mode::Standard,
            transcript,
            declarations: Declarations::default(),
            release: Some(RELEASE.into()),
            end: DriverEnd::Exited { code: 0 },
            extras: Vec::new(),
            canaries: Some(planted()),
            experimental_only: vec![EXPERIMENTAL_ONLY.into()],
            task: Some(task_in_workspace(None)),
        }
    }

    pub fn in_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub fn with_task(mut self, task: Option<TaskChoices>) -> Self {
        self.task = task;
        self
    }

    pub fn declaring(mut self, declarations: Declarations) -> Self {
        self.declarations = declarations;
        self
    }

    pub fn exits(mut self, code: i32) -> Self {
        self.end = DriverEnd::Exited { code };
        self
    }

    pub fn killed_at_bound(mut self) -> Self {
        self.end = DriverEnd::KilledAtBound {
            reason: "the run's bound of 30 s passed".into(),
        };
        self
    }

    pub fn with(mut self, source: Source, body: Body) -> Self {
        self.extras.push((source, body));
        self
    }

    pub fn transcript(mut self, change: impl FnOnce(Transcript) -> Transcript) -> Self {
        self.transcript = change(self.transcript);
        self
    }

    /// The run's event stream: the translator's events (written as the harness writes them:
    /// source `driver`), the harness's extras, and the terminal.
    pub fn stream(&self) -> Stream {
        let t = self.translated();
        let mut stream = Stream::new();
        for body in t.events {
            stream = stream.driver(body);
        }
        for (source, body) in &self.extras {
            stream = stream.push(*source, body.clone());
        }
        stream.harness(Body::RunEnded(t.terminal))
    }

    /// The run's terminal, as the wire and the driver's end show it.
    pub fn terminal(&self) -> graders::events::RunEnded {
        self.translated().terminal
    }

    /// The transcript translated as the harness translates it.
    fn translated(&self) -> wire::Translation {
        let ctx = context(
            &self.suite,
            &self.case,
            self.mode,
            self.declarations.clone(),
            self.release.as_deref(),
            self.canaries.clone(),
            self.experimental_only.clone(),
        );
        let ctx = Context {
            protocol: ProtocolSetup {
                task: self.task.clone(),
                ..ctx.protocol
            },
            ..ctx
        };
        let text = self.transcript.text();
        wire::translate(text.as_bytes(), &ctx, &self.end).expect("a readable transcript")
    }

    pub fn grade(&self) -> Verdict {
        grade_both(&self.suite, &self.case, &self.stream())
    }
}

/// `verdict` is `kind`, decided by the named check.
pub fn check(verdict: &Verdict, kind: VerdictKind, check: &str) {
    assert_eq!(verdict.verdict, kind, "{verdict:?}");
    assert!(
        verdict.reason.contains(&format!("`{check}`")),
        "expected check `{check}`: {}",
        verdict.reason
    );
}
