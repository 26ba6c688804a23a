//! A scripted JSON-RPC client for the fake, with a bound on every wait.
#![allow(dead_code)]

pub mod cases;

use fake_app_server::line_reader::forward_lines;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

pub const WAIT: Duration = Duration::from_secs(20);

pub fn fake_command() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("fake-app-server"))
}

/// One line the fake wrote: JSON, or raw text.
#[derive(Debug, Clone)]
pub enum Line {
    Json(Value),
    Raw(String),
}

pub struct Client {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// Every line received so far, in order.
    pub seen: Vec<Line>,
    next_id: u64,
}

impl Client {
    /// Spawn the fake with `args` in `cwd`, with a private CODEX_HOME under `cwd`'s parent.
    pub fn spawn(args: &[&str], home: &Path) -> Client {
        let mut command = fake_command();
        command
            .args(args)
            .env("CODEX_HOME", home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        Self::spawn_command(command)
    }

    pub fn spawn_command(mut command: Command) -> Client {
        let mut child = command.spawn().expect("spawning the fake");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        forward_lines(stdout, move |line| {
            let text = line.trim_end().to_string();
            let parsed = serde_json::from_str(&text)
                .map(Line::Json)
                .unwrap_or(Line::Raw(text));
            tx.send(parsed).is_ok()
        });
        Client {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            seen: Vec::new(),
            next_id: 1,
        }
    }

    pub fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    pub fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// `messages` as lines in one write (a pipe delivers them together: the fake reads them at
    /// once).
    pub fn send_in_one_write(&mut self, messages: &[Value]) {
        let bytes: String = messages.iter().map(|m| format!("{m}\n")).collect();
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes.as_bytes()).unwrap();
        stdin.flush().unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Next line, or `None` at EOF / after `limit`.
    pub fn next_line(&mut self, limit: Duration) -> Option<Line> {
        match self.lines.recv_timeout(limit) {
            Ok(line) => {
                self.seen.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Wait for the first JSON message matching `pred`; panics after `WAIT`.
    pub fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_line(left) {
                Some(Line::Json(v)) if pred(&v) => return v,
                Some(_) => continue,
                None => panic!("timed out waiting for {what}; seen: {:#?}", self.seen),
            }
        }
    }

    /// Send a request without waiting for its answer; its id.
    pub fn send_request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}));
        id
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}));
        self.wait_for(&format!("answer to {method} #{id}"), |v| {
            v.get("id") == Some(&json!(id)) && v.get("method").is_none()
        })
    }

    pub fn notification(&mut self, method: &str) -> Value {
        self.wait_for(method, |v| {
            v.get("method").and_then(Value::as_str) == Some(method) && v.get("id").is_none()
        })
    }

    /// The first `method` notification received since `seen[from]`: one that arrived while
    /// waiting for an answer is not waited for again.
    pub fn notification_since(&mut self, from: usize, method: &str) -> Value {
        let is_it = |v: &Value| {
            v.get("method").and_then(Value::as_str) == Some(method) && v.get("id").is_none()
        };
        let already = self.seen[from..].iter().find_map(|line| match line {
            Line::Json(v) if is_it(v) => Some(v.clone()),
            _ => None,
        });
        already.unwrap_or_else(|| self.wait_for(method, is_it))
    }

    pub fn server_request(&mut self, method: &str) -> Value {
        self.wait_for(method, |v| {
            v.get("method").and_then(Value::as_str) == Some(method) && v.get("id").is_some()
        })
    }

    pub fn initialize(&mut self, experimental: bool) -> Value {
        self.initialize_with(json!({"experimentalApi": experimental}))
    }

    /// `initialize` declaring `capabilities`, then `initialized`.
    pub fn initialize_with(&mut self, capabilities: Value) -> Value {
        let answer = self.request(
            "initialize",
            json!({"clientInfo": {"name": "test", "version": "0.0.1"}, "capabilities": capabilities}),
        );
        self.send(&json!({"method": "initialized"}));
        answer
    }

    /// `thread/start` in `cwd`: the thread's id and the whole answer.
    pub fn start_thread(&mut self, cwd: &str) -> (String, Value) {
        let started = self.request("thread/start", json!({"cwd": cwd}));
        let id = started["result"]["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("thread/start answered no thread id: {started}"))
            .to_string();
        (id, started)
    }

    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    pub fn stderr_text(&mut self) -> String {
        use std::io::Read;
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workspace with AGENTS.md and a private CODEX_HOME.
pub struct Lab {
    pub dir: tempfile::TempDir,
}

impl Lab {
    pub fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::write(
            dir.path().join("ws/AGENTS.md"),
            "# Project agents\nAlways be terse.\n",
        )
        .unwrap();
        Lab { dir }
    }
    pub fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn ws_str(&self) -> String {
        self.ws().display().to_string()
    }
}

pub const RESTRICTED: &str = r#"permissions.restricted={filesystem={":root"="none",":minimal"="read",":workspace_roots"={"."="read"}},network={enabled=false}}"#;
pub const FULLREAD_NET: &str =
    r#"permissions.fullread={filesystem={":root"="read"},network={enabled=true}}"#;
pub const FULLREAD_NONET: &str =
    r#"permissions.fullread-nonet={filesystem={":root"="read"},network={enabled=false}}"#;

pub fn profile_args() -> Vec<&'static str> {
    vec![
        "-c",
        r#"default_permissions="restricted""#,
        "-c",
        RESTRICTED,
        "-c",
        FULLREAD_NET,
        "-c",
        FULLREAD_NONET,
    ]
}

pub fn finish_tool() -> Value {
    json!([
        {"type": "function", "name": "paperclip_finish", "description": "Report that the task is finished.",
         "inputSchema": {"type": "object", "properties": {"status": {"type": "string"}, "summary": {"type": "string"}}, "required": ["status", "summary"]}},
        {"type": "function", "name": "paperclip_block", "description": "Block on a person.",
         "inputSchema": {"type": "object", "properties": {"owner": {"type": "string"}, "action": {"type": "string"}}, "required": ["owner", "action"]}}
    ])
}

pub fn bwrap_available() -> bool {
    Path::new("/usr/bin/bwrap").is_file()
        || std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join("bwrap").is_file()))
            .unwrap_or(false)
}

/// Tests named `…_needs_bwrap` call this. They exercise the fake's real-sandbox mode, which
/// cannot be tested without bubblewrap, so a missing one is a failure that says what to install
/// (these tests use the standard test harness, which cannot report an ignore decided at run time).
pub fn require_bwrap() {
    assert!(
        bwrap_available(),
        "this test needs bubblewrap (`apt-get install bubblewrap`; .ci/run installs it): the fake's real-sandbox mode runs it"
    );
}

pub fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
