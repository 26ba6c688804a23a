//! Play one [`Session`] against one app-server (the fake, or the real Codex with the mock model
//! API playing the scenario) and record every line both ways as a transcript of the tap's
//! records (`graders::wire::transcript::Record`), so the fidelity normaliser reads it as it
//! reads a cell's. Every wait is bounded; the child is always reaped.

use super::choices;
use super::session::{AnswerKind, Session, Transport};
use anyhow::{Context, Result};
use graders::wire::transcript::{Direction, Record};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The longest a request waits for its answer (the real Codex's first `thread/start` loads its
/// sandbox and config: well under a second measured).
const ANSWER_BOUND: Duration = Duration::from_secs(20);
/// The longest a turn may take to complete once started (the mock model API answers at once:
/// a turn still running after this waits on the client, which the transcript shows).
const TURN_BOUND: Duration = Duration::from_secs(8);
/// The longest an app-server may take to exit once its stdin closed or it was signalled.
const EXIT_BOUND: Duration = Duration::from_secs(10);
/// How long the client listens after the last step for what the app-server still says.
const SETTLE: Duration = Duration::from_millis(300);

/// How one side's app-server is started: its program and arguments (the session's own launch
/// arguments are appended), its complete environment, its folder, and the folders to write as
/// placeholders in its transcript.
#[derive(Debug, Clone)]
pub struct SideCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub aliases: Vec<(String, String)>,
}

impl SideCommand {
    fn command(&self, session: &Session) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .args(&session.launch_args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        command
    }
}

/// One launch in progress.
struct Launch {
    number: u64,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    started: Instant,
}

/// The recording of one session, and what the client still needs from it.
struct Recorder<'a> {
    session: &'a Session,
    records: Vec<Record>,
    thread_id: String,
    turn_id: String,
    next_id: u64,
    cwd: String,
    /// Server requests left for a late answer: their ids.
    owed: Vec<(Value, String)>,
    turn_completed: bool,
}

/// Play `session` against `side`; the transcript of every launch.
pub fn play(session: &Session, side: &SideCommand) -> Result<Vec<Record>> {
    let mut recorder = Recorder {
        session,
        records: Vec::new(),
        thread_id: String::new(),
        turn_id: String::new(),
        next_id: 1,
        cwd: side.cwd.display().to_string(),
        owed: Vec::new(),
        turn_completed: false,
    };
    let mut launch = start(side, session, 1)?;
    let outcome = recorder.first_launch(&mut launch);
    recorder.finish(&mut launch);
    outcome?;
    if session.transport == Transport::SecondLaunch && !recorder.thread_id.is_empty() {
        let mut second = start(side, session, 2)?;
        let outcome = recorder.second_launch(&mut second);
        recorder.finish(&mut second);
        outcome?;
    }
    Ok(recorder.records)
}

fn start(side: &SideCommand, session: &Session, number: u64) -> Result<Launch> {
    let mut command = side.command(session);
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {}", side.program.display()))?;
    let stdin = child.stdin.take().context("the app-server's stdin")?;
    let stdout = child.stdout.take().context("the app-server's stdout")?;
    let pause = match session.transport {
        Transport::SlowReader { pause_ms } => Duration::from_millis(pause_ms),
        _ => Duration::ZERO,
    };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
    });
    Ok(Launch {
        number,
        child,
        stdin: Some(stdin),
        lines: rx,
        started: Instant::now(),
    })
}

impl Recorder<'_> {
    fn time(launch: &Launch) -> u64 {
        u64::try_from(launch.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn send(&mut self, launch: &mut Launch, message: Value) -> Result<()> {
        self.records.push(Record::Message {
            launch: launch.number,
            direction: Direction::In,
            time: Self::time(launch),
            message: message.clone(),
        });
        let stdin = launch.stdin.as_mut().context("stdin already closed")?;
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .context("writing to the app-server")
    }

    fn close_stdin(&mut self, launch: &mut Launch) {
        if launch.stdin.take().is_some() {
            self.records.push(Record::StdinClosed {
                launch: launch.number,
                time: Self::time(launch),
            });
        }
    }

    /// Read the next line within `bound`, record it, and answer it when it is a server
    /// request. `None` at the bound or the end of output.
    fn next(&mut self, launch: &mut Launch, bound: Duration) -> Result<Option<Value>> {
        let line = match launch.lines.recv_timeout(bound) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return Ok(None),
        };
        let time = Self::time(launch);
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            self.records.push(Record::Raw {
                launch: launch.number,
                direction: Direction::Out,
                time,
                text: line,
                partial: false,
            });
            return Ok(Some(Value::Null));
        };
        self.records.push(Record::Message {
            launch: launch.number,
            direction: Direction::Out,
            time,
            message: message.clone(),
        });
        if message["method"] == "turn/completed" {
            self.turn_completed = true;
            for (id, method) in std::mem::take(&mut self.owed) {
                let answer = self.fill(&answer_to(&method, AnswerKind::Accept));
                self.send(launch, json!({"id": id, "result": answer}))?;
            }
        }
        if let (Some(method), Some(id)) = (message["method"].as_str(), message.get("id")) {
            self.answer_server_request(launch, id.clone(), method.to_string(), &message["params"])?;
        }
        Ok(Some(message))
    }

    fn answer_server_request(
        &mut self,
        launch: &mut Launch,
        id: Value,
        method: String,
        params: &Value,
    ) -> Result<()> {
        if let Some(choice) = self.choice_for(&method) {
            let accepting = self.fill(&answer_to(&method, AnswerKind::Accept));
            let result = choices::answer(&choice, params, &accepting);
            return self.send(launch, json!({"id": id, "result": result}));
        }
        let reply = match self.session.answer {
            AnswerKind::Error => {
                json!({"id": id, "error": {"code": -32603, "message": "the client refuses to answer"}})
            }
            AnswerKind::Malformed => json!({"id": id, "result": {"decision": 42}}),
            AnswerKind::Late => {
                let params = json!({"threadId": self.thread_id, "turnId": self.turn_id});
                let request = self.request_line("turn/interrupt", params);
                self.owed.push((id, method));
                request
            }
            kind => json!({"id": id, "result": answer_to(&method, kind)}),
        };
        let reply = self.fill(&reply);
        self.send(launch, reply)
    }

    /// The session's choice when the schema of `method`'s answer has it.
    fn choice_for(&self, method: &str) -> Option<choices::Choice> {
        let name = self.session.choice.as_deref()?;
        choices::beyond_the_kinds(fake_app_server::persona::DEFAULT_VERSION, method)
            .ok()?
            .into_iter()
            .find(|choice| choice.name == name)
    }

    fn request_line(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        json!({"id": id, "method": method, "params": params})
    }

    fn fill(&self, params: &Value) -> Value {
        let text = params
            .to_string()
            .replace("{thread_id}", &self.thread_id)
            .replace("{turn_id}", &self.turn_id)
            .replace(
                "{cwd}",
                &self.cwd.replace('\\', "\\\\").replace('"', "\\\""),
            );
        serde_json::from_str(&text).unwrap_or_else(|_| params.clone())
    }

    /// Send a request and read until its answer (answering server requests meanwhile).
    fn request(
        &mut self,
        launch: &mut Launch,
        method: &str,
        params: Value,
    ) -> Result<Option<Value>> {
        let line = self.request_line(method, params);
        let id = line["id"].clone();
        self.send(launch, line)?;
        let deadline = Instant::now() + ANSWER_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(message) = self.next(launch, left)? else {
                return Ok(None);
            };
            if message.get("method").is_none() && message["id"] == id {
                if let Some(thread) = message["result"]["thread"]["id"].as_str() {
                    self.thread_id = thread.to_string();
                }
                if let Some(turn) = message["result"]["turn"]["id"].as_str() {
                    self.turn_id = turn.to_string();
                }
                return Ok(Some(message));
            }
        }
    }

    /// Read until the current turn completes, within [`TURN_BOUND`].
    fn await_turn(&mut self, launch: &mut Launch) -> Result<()> {
        let deadline = Instant::now() + TURN_BOUND;
        while !self.turn_completed {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.next(launch, left)?.is_none() {
                break;
            }
        }
        Ok(())
    }

    fn handshake(&mut self, launch: &mut Launch) -> Result<bool> {
        let mut params = json!({"clientInfo": {"name": "harness-explore", "version": "0"}});
        if !self.session.capabilities.is_null() {
            params["capabilities"] = self.session.capabilities.clone();
        }
        let answered = self.request(launch, "initialize", params)?;
        if answered.is_none_or(|a| a.get("result").is_none()) {
            return Ok(false);
        }
        self.send(launch, json!({"method": "initialized"}))?;
        Ok(true)
    }

    fn first_launch(&mut self, launch: &mut Launch) -> Result<()> {
        if !self.handshake(launch)? {
            return Ok(());
        }
        for (index, step) in self.session.steps.iter().enumerate() {
            let params = self.fill(&step.params);
            if let Transport::CloseStdinEarly { after } = self.session.transport {
                if after == index {
                    let line = self.request_line(&step.method, params);
                    self.send(launch, line)?;
                    self.close_stdin(launch);
                    return Ok(());
                }
            }
            self.turn_completed = false;
            let answer = self.request(launch, &step.method, params)?;
            let Some(answer) = answer else {
                return Ok(());
            };
            if step.starts_turn() && answer.get("result").is_some() {
                self.await_turn(launch)?;
            }
            if let Transport::Signal { after, signal } = &self.session.transport {
                if *after == index {
                    self.signal(launch, signal)?;
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn second_launch(&mut self, launch: &mut Launch) -> Result<()> {
        if !self.handshake(launch)? {
            return Ok(());
        }
        let params = json!({"threadId": self.thread_id});
        self.request(launch, "thread/resume", params)?;
        Ok(())
    }

    fn signal(&mut self, launch: &mut Launch, name: &str) -> Result<()> {
        let signal = match name {
            "TERM" => nix::sys::signal::Signal::SIGTERM,
            "INT" => nix::sys::signal::Signal::SIGINT,
            "HUP" => nix::sys::signal::Signal::SIGHUP,
            other => anyhow::bail!("no signal {other:?} (TERM, INT, HUP)"),
        };
        let pid = i32::try_from(launch.child.id()).context("the app-server's pid")?;
        self.records.push(Record::DriverSignal {
            launch: launch.number,
            time: Self::time(launch),
            signal: signal as i64,
        });
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal)
            .with_context(|| format!("sending SIG{name} to the app-server"))
    }

    /// Listen a moment for what the app-server still says, close stdin, read to the end and
    /// record the exit (killed at [`EXIT_BOUND`]).
    fn finish(&mut self, launch: &mut Launch) {
        while let Ok(Some(_)) = self.next(launch, SETTLE) {}
        self.close_stdin(launch);
        let deadline = Instant::now() + EXIT_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() || !matches!(self.next(launch, left), Ok(Some(_))) {
                break;
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let status = sandbox::system::wait_bounded(&mut launch.child, left.max(SETTLE));
        let (status, signal, killed) = match status {
            Ok(Some(status)) => {
                use std::os::unix::process::ExitStatusExt;
                (
                    status.code().map(i64::from),
                    status.signal().map(i64::from),
                    None,
                )
            }
            Ok(None) => (None, None, Some(format!("no exit within {EXIT_BOUND:?}"))),
            Err(e) => (None, None, Some(format!("waiting: {e}"))),
        };
        self.records.push(Record::Exit {
            launch: launch.number,
            time: Self::time(launch),
            status,
            signal,
            error: None,
            killed_by_harness: killed,
        });
    }
}

/// The schema's answer of `kind` to a server request `method` (`Accept`, `Decline`, `Cancel`).
pub fn answer_to(method: &str, kind: AnswerKind) -> Value {
    let pick = |accept: &str, decline: &str, cancel: &str| match kind {
        AnswerKind::Decline => decline.to_string(),
        AnswerKind::Cancel => cancel.to_string(),
        _ => accept.to_string(),
    };
    match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            json!({"decision": pick("accept", "decline", "cancel")})
        }
        "execCommandApproval" | "applyPatchApproval" => {
            json!({"decision": pick("approved", "denied", "abort")})
        }
        "item/permissions/requestApproval" => match kind {
            AnswerKind::Accept | AnswerKind::Late => {
                json!({"permissions": {"fileSystem": {"write": ["{cwd}"]}}, "scope": "turn"})
            }
            _ => json!({"permissions": {}, "scope": "turn"}),
        },
        "item/tool/requestUserInput" => json!({"answers": {}}),
        "item/tool/call" => json!({"contentItems": [], "success": kind == AnswerKind::Accept}),
        "mcpServer/elicitation/request" => {
            json!({"action": pick("accept", "decline", "cancel"), "content": {}})
        }
        "currentTime/read" => json!({"currentTime": "2026-01-01T00:00:00Z"}),
        _ => json!({}),
    }
}

/// The folders a session's side runs in, under `root`: home (CODEX_HOME below it), workspace
/// and TMPDIR, created.
pub fn session_folders(root: &Path) -> Result<(PathBuf, PathBuf, PathBuf)> {
    let home = root.join("home");
    let (workspace, tmp) = (root.join("workspace"), root.join("tmp"));
    for dir in [&home.join(".codex"), &workspace, &tmp] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    Ok((home, workspace, tmp))
}
