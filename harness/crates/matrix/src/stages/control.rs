//! Telling a declared driver what the wire cannot (docs/driver-contract.md, "What the harness
//! tells your driver beyond the wire"). A `wire` driver declares how it is asked to interrupt
//! or steer its running turn (`interrupt = "sigint" | "sigterm"`, `steer = "stdin-line"`); in a
//! cell whose case needs it, the driver stage watches the tap's transcript until the driver's
//! turn runs — a `turn/started` of a thread the driver opened, its `turn/start` answered — and
//! then, [`CONTROL_SETTLE`] later:
//!
//! - sends the declared signal to the driver's *main process*: the process its command line
//!   started (no shell runs between the harness and it). When that program is a shell running a
//!   script the drivers file wrote (`sh -c '…'`) and it has not exec'd, it is the shell's
//!   direct child (the one the tap descends from; never the tap itself). It is found in `/proc`,
//!   also inside a container: the harness sees the container's processes with host pids;
//! - writes the case's `steer_text` as one line on the driver's stdin, a pipe the harness holds
//!   open until the driver ends (for every cell of a driver that declares `steer`; every other
//!   driver's stdin stays empty and closed).
//!
//! What the harness did, or why it could not, becomes a harness `diagnostic` in the run's
//! events. The watch is bounded by the driver's run bound, and ends with the driver.

use super::proc_tree::{all_pids, parent};
use anyhow::{anyhow, bail, Context, Result};
use driver::bounds::CONTROL_SETTLE;
use driver::task::Task;
use graders::events::{InterruptSignal, SteerChannel};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use suites::spec::{Capability, DeclaredDriver};
use suites::Cell;
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;

/// How often the transcript is read while waiting for the driver's turn.
const POLL: Duration = Duration::from_millis(50);
/// Longest transcript line read for the watch (the lines it needs are short).
const MAX_WATCHED_LINE: usize = 64 * 1024;
/// The requests whose answer names a thread the driver opened.
const THREAD_OPENERS: &[&str] = &["thread/start", "thread/resume", "thread/fork"];

/// What the harness tells one cell's driver once its turn runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tell {
    pub(crate) signal: Option<InterruptSignal>,
    /// The line to write on the driver's stdin (without its newline).
    pub(crate) steer: Option<String>,
}

/// The driver's stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdin {
    /// Empty and closed (`/dev/null`): every driver that declares no `steer`.
    Closed,
    /// A pipe the harness holds open until the driver ends (`steer = "stdin-line"`).
    Held,
}

impl Stdin {
    pub(crate) fn of(declared: &DeclaredDriver) -> Self {
        match declared.steer {
            Some(SteerChannel::StdinLine) => Stdin::Held,
            None => Stdin::Closed,
        }
    }
}

impl Tell {
    /// What `cell`'s driver is told: the interrupt its declaration names when the case needs
    /// one, the task's `steer_text` when the case steers. `None`: nothing.
    pub(crate) fn for_cell(
        cell: &Cell,
        declared: &DeclaredDriver,
        task: &Task,
    ) -> Result<Option<Tell>> {
        let needs = |c: Capability| cell.case.requires.contains(&c);
        let signal = declared.interrupt.filter(|_| needs(Capability::Interrupt));
        let steer = match declared.steer {
            Some(SteerChannel::StdinLine) if needs(Capability::Steer) => {
                let text = task.steer_text.clone().with_context(|| {
                    format!(
                        "case `{}` steers the turn but its task has no `steer_text`",
                        cell.id.case
                    )
                })?;
                if text.contains(['\n', '\r']) {
                    bail!("case `{}`: `steer_text` must be one line", cell.id.case);
                }
                Some(text)
            }
            _ => None,
        };
        Ok((signal.is_some() || steer.is_some()).then_some(Tell { signal, steer }))
    }
}

/// The signal a declaration names.
pub(crate) fn signal_of(declared: InterruptSignal) -> Signal {
    match declared {
        InterruptSignal::Sigint => Signal::SIGINT,
        InterruptSignal::Sigterm => Signal::SIGTERM,
    }
}

/// Where the driver's process tree is seen from.
#[derive(Debug, Clone)]
pub(crate) struct Spawned {
    /// The process the harness spawned: the driver's program itself on the host, the container
    /// runtime (`runc run`, `docker exec`) in a container.
    pub(crate) pid: i32,
    /// Whether `pid` is the driver's program (the host launcher) rather than a runtime.
    pub(crate) is_driver: bool,
    /// The socket of the cell's recorder: every tap process of the cell names it.
    pub(crate) tap_socket: PathBuf,
}

/// One harness note on what it told the driver (a `diagnostic` of the run), and whether it is a
/// warning (the harness could not do what the case needs).
pub(crate) type Note = (bool, String);

/// Watch `wire` until the driver's turn runs (at most `bound`), then tell the driver. Holds the
/// driver's stdin until the task is dropped (when the driver ends), so a driver that declares
/// `steer` never sees its stdin end while it runs.
pub(crate) async fn tell(
    tell: Tell,
    spawned: Spawned,
    wire: PathBuf,
    stdin: Option<ChildStdin>,
    bound: Duration,
    notes: Arc<Mutex<Vec<Note>>>,
) {
    let note = |warn: bool, text: String| {
        notes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((warn, text))
    };
    let asks = match (&tell.signal, &tell.steer) {
        (Some(signal), None) => format!("send {}", signal_of(*signal)),
        (None, Some(_)) => "write the steering line".to_string(),
        _ => "ask the driver".to_string(),
    };
    let started = Instant::now();
    let mut watch = TurnWatch::new(&wire);
    let turn = loop {
        if let Some(turn) = watch.poll() {
            break turn;
        }
        if started.elapsed() > bound {
            note(true, format!("the driver's turn was not seen running within {bound:?} (no `turn/started` of a thread it opened, with its `turn/start` answered): the harness did not {asks}"));
            return std::future::pending().await;
        }
        tokio::time::sleep(POLL).await;
    };
    let seen = Instant::now();
    tokio::time::sleep(CONTROL_SETTLE).await;
    watch.poll();
    if watch.completed.contains(&turn.turn) {
        note(
            true,
            format!(
                "the driver's turn `{}` completed before the harness could {asks}",
                turn.turn
            ),
        );
        return std::future::pending().await;
    }
    let running = format!(
        "{} ms after the driver's turn `{}` of thread `{}` was seen running",
        seen.elapsed().as_millis(),
        turn.turn,
        turn.thread
    );
    if let Some(declared) = tell.signal {
        let signal = signal_of(declared);
        match main_process(&spawned) {
            Ok(main) => match nix::sys::signal::kill(Pid::from_raw(main.pid), signal) {
                Ok(()) => note(false, format!("the harness sent {signal} to the driver's main process (pid {}, `{}`; {}) {running}, as its `interrupt` declaration asks", main.pid, main.cmdline, main.how)),
                Err(e) => note(true, format!("the harness could not send {signal} to the driver's main process (pid {}): {e}", main.pid)),
            },
            Err(e) => note(true, format!("the harness could not find the driver's main process to send {signal}: {e:#}")),
        }
    }
    let mut stdin = stdin;
    if let Some(text) = &tell.steer {
        match stdin.as_mut() {
            Some(pipe) => {
                let written = async {
                    pipe.write_all(format!("{text}\n").as_bytes()).await?;
                    pipe.flush().await
                };
                match written.await {
                    Ok(()) => note(false, format!("the harness wrote one line on the driver's stdin ({running}), as its `steer = \"stdin-line\"` declaration asks: `{text}`")),
                    Err(e) => note(true, format!("the harness could not write the steering line on the driver's stdin: {e}")),
                }
            }
            None => note(true, "the driver's stdin is not a pipe the harness holds: the steering line was not written".into()),
        }
    }
    // The pipe stays open until the driver ends (this task is dropped then).
    let _held = stdin;
    std::future::pending().await
}

/// The driver's turn, once it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RunningTurn {
    thread: String,
    turn: String,
}

/// Reads the transcript as it grows: the threads the driver opened, its `turn/start`s answered,
/// the turns started and completed.
struct TurnWatch {
    path: PathBuf,
    offset: u64,
    partial: Vec<u8>,
    /// Requests of the driver awaiting their answer: (launch, id) → (method, thread).
    pending: HashMap<(u64, String), (String, Option<String>)>,
    threads: HashSet<String>,
    /// Threads whose `turn/start` was answered with a result.
    turn_started_by_driver: HashSet<String>,
    started: Vec<RunningTurn>,
    completed: HashSet<String>,
}

impl TurnWatch {
    fn new(path: &Path) -> Self {
        Self {
            path: path.to_path_buf(),
            offset: 0,
            partial: Vec::new(),
            pending: HashMap::new(),
            threads: HashSet::new(),
            turn_started_by_driver: HashSet::new(),
            started: Vec::new(),
            completed: HashSet::new(),
        }
    }

    /// Read what was added; the driver's running turn, if there is one now.
    fn poll(&mut self) -> Option<RunningTurn> {
        let mut added = Vec::new();
        if let Ok(mut file) = std::fs::File::open(&self.path) {
            if file.seek(SeekFrom::Start(self.offset)).is_ok() {
                let _ = file.read_to_end(&mut added);
            }
        }
        self.offset += added.len() as u64;
        self.partial.extend_from_slice(&added);
        while let Some(end) = self.partial.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            if line.len() <= MAX_WATCHED_LINE {
                if let Ok(value) = serde_json::from_slice::<Value>(&line) {
                    self.observe(&value);
                }
            }
        }
        if self.partial.len() > MAX_WATCHED_LINE {
            // Inside a long line: nothing of it is needed, but its end still must be found.
            self.partial.clear();
            self.partial.push(b'x');
        }
        self.started
            .iter()
            .find(|t| {
                self.turn_started_by_driver.contains(&t.thread) && !self.completed.contains(&t.turn)
            })
            .cloned()
    }

    fn observe(&mut self, line: &Value) {
        let Some(message) = line.get("message") else {
            return;
        };
        let launch = line.get("launch").and_then(Value::as_u64).unwrap_or(0);
        let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let id = message.get("id").map(|id| match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let method = text(message.get("method"));
        let params = message.get("params");
        match (line.get("direction").and_then(Value::as_str), id, method) {
            (Some("in"), Some(id), Some(method)) => {
                let thread = text(params.and_then(|p| p.get("threadId")));
                self.pending.insert((launch, id), (method, thread));
            }
            (Some("out"), Some(id), None) => {
                let Some((method, thread)) = self.pending.remove(&(launch, id)) else {
                    return;
                };
                let Some(result) = message.get("result") else {
                    return;
                };
                if THREAD_OPENERS.contains(&method.as_str()) {
                    if let Some(thread) = text(result.pointer("/thread/id")) {
                        self.threads.insert(thread);
                    }
                } else if method == "turn/start" {
                    if let Some(thread) = thread {
                        self.turn_started_by_driver.insert(thread);
                    }
                }
            }
            (Some("out"), None, Some(method)) => {
                let thread = text(params.and_then(|p| p.get("threadId")));
                let turn = text(params.and_then(|p| p.pointer("/turn/id")));
                match (method.as_str(), thread, turn) {
                    ("turn/started", Some(thread), Some(turn))
                        if self.threads.contains(&thread) =>
                    {
                        self.started.push(RunningTurn { thread, turn });
                    }
                    ("turn/completed", _, Some(turn)) => {
                        self.completed.insert(turn);
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
}

/// The driver's main process, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MainProcess {
    pub(crate) pid: i32,
    pub(crate) cmdline: String,
    pub(crate) how: &'static str,
}

// `/proc` is read by hand (`proc_tree` reads `stat`): `cmdline` and a pid namespace link are
// all that is needed here, less than a dependency on a procfs crate would bring.

fn cmdline(pid: i32) -> Option<Vec<String>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        bytes
            .split(|b| *b == 0)
            .filter(|part| !part.is_empty())
            .map(|part| String::from_utf8_lossy(part).into_owned())
            .collect(),
    )
}

fn pid_namespace(pid: i32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok()
}

/// Whether `argv` is a tap of this cell (its shim execs `harness tap --socket <socket>`).
fn is_tap(argv: &[String], tap_socket: &Path) -> bool {
    let socket = tap_socket.to_string_lossy();
    argv.windows(2)
        .any(|w| w[0] == "--socket" && w[1] == socket.as_ref())
}

/// Whether `argv` is a shell running a script (`sh -c '…'`, which a drivers file writes to
/// use a pipe or a list) that has not exec'd its command.
fn is_shell_script(argv: &[String]) -> bool {
    let shell = argv
        .first()
        .and_then(|program| Path::new(program).file_name())
        .and_then(|name| name.to_str());
    matches!(shell, Some("sh" | "bash" | "dash")) && argv.get(1).is_some_and(|a| a == "-c")
}

/// The driver's main process (module docs): from the spawned shell on the host, or from the
/// cell's tap up to the top of the driver's tree in a container.
pub(crate) fn main_process(spawned: &Spawned) -> Result<MainProcess> {
    let pids = all_pids();
    let taps: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|pid| cmdline(*pid).is_some_and(|argv| is_tap(&argv, &spawned.tap_socket)))
        .collect();
    let ancestors = |from: i32| {
        let mut chain = vec![from];
        let mut at = from;
        while let Some(up) = parent(at).filter(|p| *p > 1 && !chain.contains(p)) {
            chain.push(up);
            at = up;
        }
        chain
    };
    let root = if spawned.is_driver {
        spawned.pid
    } else {
        // In a container: up from a tap to the last process before the runtime, which is the
        // spawned runtime itself or a process of another pid namespace.
        let tap = *taps.first().ok_or_else(|| {
            anyhow!("no tap process of this cell is running, so the driver's process tree cannot be found in the container")
        })?;
        let chain = ancestors(tap);
        let mut root = tap;
        for pair in chain.windows(2) {
            let (child, up) = (pair[0], pair[1]);
            root = child;
            if up == spawned.pid || pid_namespace(up) != pid_namespace(child) {
                break;
            }
            root = up;
        }
        root
    };
    let root_argv = cmdline(root).with_context(|| format!("process {root} is gone"))?;
    if !is_shell_script(&root_argv) {
        return Ok(MainProcess {
            pid: root,
            cmdline: root_argv.join(" "),
            how: "the program its command line starts",
        });
    }
    // The shell is still there: its direct child, preferably the one the tap descends from.
    let children: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|pid| parent(*pid) == Some(root))
        .filter(|pid| !taps.contains(pid))
        .collect();
    let on_the_taps_path = taps
        .iter()
        .flat_map(|tap| ancestors(*tap))
        .find(|pid| children.contains(pid));
    match on_the_taps_path.or_else(|| children.first().copied()) {
        Some(child) => Ok(MainProcess {
            pid: child,
            cmdline: cmdline(child).unwrap_or_default().join(" "),
            how: "the shell's child",
        }),
        None => Ok(MainProcess {
            pid: root,
            cmdline: root_argv.join(" "),
            how: "the shell, which has no child",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(direction: &str, message: Value) -> String {
        json!({"direction": direction, "time": 1, "launch": 1, "message": message}).to_string()
            + "\n"
    }

    #[test]
    fn the_turn_runs_once_started_on_the_drivers_thread_and_its_turn_start_answered() {
        let dir = tempfile::tempdir().unwrap();
        let wire = dir.path().join("transcript.jsonl");
        let mut watch = TurnWatch::new(&wire);
        assert_eq!(watch.poll(), None, "no transcript yet");
        let append = |text: String| {
            use std::io::Write;
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&wire)
                .unwrap()
                .write_all(text.as_bytes())
                .unwrap();
        };
        append(line(
            "in",
            json!({"id": 1, "method": "thread/start", "params": {}}),
        ));
        append(line(
            "out",
            json!({"id": 1, "result": {"thread": {"id": "thr-1"}}}),
        ));
        // Another thread's turn is not the driver's.
        append(line(
            "out",
            json!({"method": "turn/started", "params": {"threadId": "thr-9", "turn": {"id": "t-9"}}}),
        ));
        append(line(
            "in",
            json!({"id": 2, "method": "turn/start", "params": {"threadId": "thr-1"}}),
        ));
        append(line(
            "out",
            json!({"method": "turn/started", "params": {"threadId": "thr-1", "turn": {"id": "t-1"}}}),
        ));
        assert_eq!(watch.poll(), None, "the turn/start is not answered yet");
        // Half a line: read once it is whole.
        let answer = line("out", json!({"id": 2, "result": {"turn": {"id": "t-1"}}}));
        let (head, tail) = answer.split_at(10);
        append(head.to_string());
        assert_eq!(watch.poll(), None);
        append(tail.to_string());
        let running = RunningTurn {
            thread: "thr-1".into(),
            turn: "t-1".into(),
        };
        assert_eq!(watch.poll(), Some(running));
        append(line(
            "out",
            json!({"method": "turn/completed", "params": {"threadId": "thr-1", "turn": {"id": "t-1", "status": "completed"}}}),
        ));
        assert_eq!(watch.poll(), None, "a completed turn no longer runs");
    }

    #[tokio::test]
    async fn the_main_process_is_the_shells_child_or_the_shell_that_exec_d() {
        let dir = tempfile::tempdir().unwrap();
        let tap_socket = dir.path().join("codex.sock");
        for (command, exec) in [("sleep 30; true", false), ("exec sleep 30", true)] {
            let mut child = tokio::process::Command::new("/bin/sh")
                .args(["-c", command])
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let pid = child.id().unwrap() as i32;
            let spawned = Spawned {
                pid,
                is_driver: true,
                tap_socket: tap_socket.clone(),
            };
            let deadline = Instant::now() + Duration::from_secs(10);
            let main = loop {
                let main = main_process(&spawned).unwrap();
                if main.cmdline == "sleep 30" || Instant::now() > deadline {
                    break main;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(main.cmdline, "sleep 30", "{command}: {main:?}");
            assert_eq!(main.pid == pid, exec, "{command}: {main:?}");
            child.kill().await.unwrap();
        }
    }
}
