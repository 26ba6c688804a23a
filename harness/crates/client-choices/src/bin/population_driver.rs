//! A legitimate driver of `codex app-server` whose every protocol choice is a setting
//! (`client_choices::Setting`, `--setting name=value,…`): it launches `$CODEX_PATH app-server`
//! with an allowlisted environment, opens a thread in `--cwd`, runs one turn with `--prompt`
//! (plan mode for `--mode planning`), answers each server request as the setting says, follows
//! only its own turn, stops its app-server as the setting says and exits 0 when its turn
//! completed, 1 otherwise (docs/population.md). It never grants an approval: nobody told it to.

use client_choices::answers::answer;
use client_choices::setting::QUIET_NOTIFICATIONS;
use client_choices::setting::{AnswerOrder, OptOut, RequestIds, StderrChoice, Stop};
use client_choices::Setting;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The app-server's environment: nothing of the driver's own secrets.
const KEPT_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "CODEX_HOME",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "TZ",
    "USER",
];
/// How long a stopped app-server gets to exit before it is killed (the fake's task says 2 s).
const SHUTDOWN: Duration = Duration::from_secs(2);

struct Args {
    setting: Setting,
    cwd: String,
    prompt: String,
    mode: String,
    idle: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut setting = None;
    let (mut cwd, mut prompt, mut mode, mut idle) = (None, None, "standard".to_string(), 30.0);
    let mut words = std::env::args().skip(1);
    while let Some(flag) = words.next() {
        let value = words
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--setting" => setting = Some(value.parse::<Setting>().map_err(|e| e.to_string())?),
            "--cwd" => cwd = Some(value),
            "--prompt" => prompt = Some(value),
            "--mode" => mode = value,
            "--timeout" => idle = value.parse().map_err(|_| format!("--timeout {value}"))?,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    Ok(Args {
        setting: setting.ok_or("--setting is required")?,
        cwd: cwd.ok_or("--cwd is required")?,
        prompt: prompt.ok_or("--prompt is required")?,
        mode,
        idle: Duration::from_secs_f64(idle),
    })
}

fn codex() -> String {
    std::env::var("CODEX_PATH").unwrap_or_else(|_| "codex".into())
}

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(codex());
    cmd.args(args).env_clear();
    for (name, value) in std::env::vars_os() {
        if KEPT_ENV.iter().any(|k| name == *k) {
            cmd.env(name, value);
        }
    }
    cmd
}

/// `codex --version`, bounded.
fn probe_version(bound: Duration) -> Result<(), String> {
    let mut child = command(&["--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("codex --version: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) if status.success() => return Ok(()),
            Some(status) => return Err(format!("codex --version: {status}")),
            None if started.elapsed() > bound => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("codex --version did not answer".into());
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// One launched app-server and the JSON-RPC session over its stdio.
struct Session<'a> {
    setting: &'a Setting,
    child: Child,
    stdin: Option<ChildStdin>,
    inbox: Receiver<Option<String>>,
    idle: Duration,
    next_id: u64,
    /// Messages read while waiting for something else, in order.
    backlog: VecDeque<Value>,
    /// Each turn's final status, by turn id, whichever thread's.
    completed: HashMap<String, String>,
}

impl<'a> Session<'a> {
    fn launch(setting: &'a Setting, idle: Duration) -> Result<Self, String> {
        let stderr = match setting.stderr {
            StderrChoice::Inherit => Stdio::inherit(),
            StderrChoice::Drain => Stdio::piped(),
            StderrChoice::Null => Stdio::null(),
        };
        let mut child = command(&["app-server"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("codex app-server: {e}"))?;
        if let Some(mut err) = child.stderr.take() {
            std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        }
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (tx, inbox) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(Some(line)).is_err() {
                    return;
                }
            }
            let _ = tx.send(None);
        });
        Ok(Self {
            setting,
            child,
            stdin,
            inbox,
            idle,
            next_id: 0,
            backlog: VecDeque::new(),
            completed: HashMap::new(),
        })
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin already closed")?;
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to codex app-server: {e}"))
    }

    /// The next message from the app-server, within the idle bound.
    fn read(&mut self) -> Result<Value, String> {
        match self.inbox.recv_timeout(self.idle) {
            Ok(Some(line)) => serde_json::from_str(&line).map_err(|e| format!("not JSON: {e}")),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                Err("codex app-server closed its output".into())
            }
            Err(RecvTimeoutError::Timeout) => Err("codex app-server went quiet".into()),
        }
    }

    /// Whatever has already arrived, without waiting.
    fn read_pending(&mut self) -> Result<Vec<Value>, String> {
        let mut out = Vec::new();
        while let Ok(message) = self.inbox.try_recv() {
            match message {
                Some(line) => {
                    out.push(serde_json::from_str(&line).map_err(|e| format!("not JSON: {e}"))?)
                }
                None => break,
            }
        }
        Ok(out)
    }

    fn next_request_id(&mut self) -> Value {
        self.next_id += 1;
        match self.setting.request_ids {
            RequestIds::Integer => json!(self.next_id),
            RequestIds::String => json!(format!("population-{}", self.next_id)),
        }
    }

    /// Handles one message that is not the answer being waited for: answers a server request
    /// (after the pending notifications, if the setting says so), notes a turn's end.
    fn handle(&mut self, message: Value) -> Result<(), String> {
        let method = message.get("method").and_then(Value::as_str);
        match (method, message.get("id")) {
            (Some(method), Some(id)) => {
                if self.setting.answer_order == AnswerOrder::AfterPending {
                    for pending in self.read_pending()? {
                        self.backlog.push_back(pending);
                    }
                    let notifications: Vec<Value> = self
                        .backlog
                        .iter()
                        .filter(|m| m.get("id").is_none())
                        .cloned()
                        .collect();
                    self.backlog.retain(|m| m.get("id").is_some());
                    notifications.into_iter().for_each(|n| self.note(&n));
                }
                let reply = answer(self.setting, method).message(id);
                self.send(&reply)
            }
            (Some(_), None) => {
                self.note(&message);
                Ok(())
            }
            _ => Ok(()), // an answer nobody waits for any more
        }
    }

    fn note(&mut self, notification: &Value) {
        let params = notification.get("params").cloned().unwrap_or(Value::Null);
        match notification.get("method").and_then(Value::as_str) {
            Some("turn/completed") => {
                let turn = &params["turn"];
                if let Some(id) = turn["id"].as_str() {
                    let status = turn["status"].as_str().unwrap_or("unknown").to_string();
                    self.completed.insert(id.to_string(), status);
                }
            }
            Some("item/completed") if params["item"]["type"] == "agentMessage" => {
                println!("{}", params["item"]["text"].as_str().unwrap_or(""));
            }
            _ => {}
        }
    }

    /// The next message: the backlog first, then the wire.
    fn next(&mut self) -> Result<Value, String> {
        match self.backlog.pop_front() {
            Some(message) => Ok(message),
            None => self.read(),
        }
    }

    /// Sends a request and returns its result; what arrives meanwhile is handled.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next_request_id();
        self.send(&json!({"id": id, "method": method, "params": params}))?;
        loop {
            let message = self.next()?;
            if message.get("id") == Some(&id) && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    return Err(format!("{method} failed: {}", error["message"]));
                }
                return Ok(message.get("result").cloned().unwrap_or(Value::Null));
            }
            self.handle(message)?;
        }
    }

    fn initialize(&mut self) -> Result<(), String> {
        let mut client_info = json!({"name": "population-driver", "version": "1.0"});
        if self.setting.client_title {
            client_info["title"] = json!("Legitimate population driver");
        }
        let mut capabilities = json!({"experimentalApi": self.setting.experimental_api});
        match self.setting.opt_out {
            OptOut::Absent => {}
            OptOut::Empty => capabilities["optOutNotificationMethods"] = json!([]),
            OptOut::Quiet => capabilities["optOutNotificationMethods"] = json!(QUIET_NOTIFICATIONS),
        }
        self.request(
            "initialize",
            json!({"clientInfo": client_info, "capabilities": capabilities}),
        )?;
        self.send(&json!({"method": "initialized"}))
    }

    /// Waits for the turn's `turn/completed` and returns its status.
    fn follow(&mut self, turn_id: &str) -> Result<String, String> {
        loop {
            if let Some(status) = self.completed.get(turn_id) {
                return Ok(status.clone());
            }
            let message = self.next()?;
            self.handle(message)?;
        }
    }

    /// Stops the app-server as the setting says; kills it past the bound.
    fn stop(mut self) {
        match self.setting.stop {
            Stop::CloseStdin => drop(self.stdin.take()),
            Stop::Sigterm | Stop::Sigint => {
                let signal = if self.setting.stop == Stop::Sigterm {
                    libc::SIGTERM
                } else {
                    libc::SIGINT
                };
                if let Ok(pid) = i32::try_from(self.child.id()) {
                    // SAFETY: kill(2) on our own child's pid, which we have not waited for yet.
                    unsafe { libc::kill(pid, signal) };
                }
            }
        }
        let started = Instant::now();
        while started.elapsed() < SHUTDOWN {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn run_turn(session: &mut Session, args: &Args) -> Result<String, String> {
    session.initialize()?;
    let setting = &args.setting;
    let mut start = json!({"cwd": args.cwd});
    if let Some(ephemeral) = setting.ephemeral {
        start["ephemeral"] = json!(ephemeral);
    }
    if let Some(policy) = &setting.approval_policy {
        start["approvalPolicy"] = json!(policy);
    }
    if let Some(mode) = setting.sandbox.mode_for(&args.mode) {
        start["sandbox"] = json!(mode);
    }
    let thread = session.request("thread/start", start)?;
    let thread_id = thread["thread"]["id"]
        .as_str()
        .ok_or("thread/start answered without a thread id")?
        .to_string();
    let input: Vec<Value> = setting
        .turn_input
        .texts(&args.prompt)
        .into_iter()
        .map(|text| json!({"type": "text", "text": text}))
        .collect();
    let mut turn = json!({"threadId": thread_id, "input": input});
    if args.mode == "planning" {
        let model = thread["model"].as_str().unwrap_or("default");
        turn["collaborationMode"] = json!({"mode": "plan", "settings":
            {"model": model, "reasoning_effort": null, "developer_instructions": null}});
    }
    let started = session.request("turn/start", turn)?;
    let turn_id = started["turn"]["id"]
        .as_str()
        .ok_or("turn/start answered without a turn id")?
        .to_string();
    session.follow(&turn_id)
}

fn run(args: &Args) -> Result<bool, String> {
    let setting = &args.setting;
    if setting.launches.probes_version() {
        probe_version(args.idle)?;
    }
    let mut session = Session::launch(setting, args.idle)?;
    let status = run_turn(&mut session, args);
    session.stop();
    let status = status?;
    println!("turn {status}");
    if setting.launches.second_app_server() {
        let mut second = Session::launch(setting, args.idle)?;
        let initialized = second.initialize();
        second.stop();
        initialized?;
    }
    Ok(status == "completed")
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("population-driver: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("population-driver ({}): {e}", args.setting);
            ExitCode::from(1)
        }
    }
}
