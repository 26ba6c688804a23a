//! `harness bench fake`: spawn → initialize → thread/start of the fake app-server against the
//! real `codex app-server`, side by side in one run on one machine; and JSON-RPC round trips per
//! second on one connection to the fake.

use anyhow::{bail, Context, Result};
use fake_app_server::line_reader::forward_lines;
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Start-ups measured per side.
    #[arg(long, default_value_t = 20)]
    pub(crate) runs: usize,
    /// Sequential request/response round trips on one connection to the fake.
    #[arg(long, default_value_t = 20_000)]
    pub(crate) round_trips: usize,
    /// Skip the real Codex side (e.g. where it cannot be provisioned).
    #[arg(long)]
    pub(crate) fake_only: bool,
    /// Write the report as JSON here as well.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Bound on one start-up (spawn → thread/start answer) and on one round trip.
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// Bound on the whole round-trip phase.
const ROUND_TRIP_LIMIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub(crate) runs: usize,
    pub(crate) fake_startup_ms: Vec<f64>,
    pub(crate) real_startup_ms: Vec<f64>,
    pub(crate) fake_median_ms: f64,
    pub(crate) real_median_ms: Option<f64>,
    /// real median / fake median.
    pub(crate) speedup: Option<f64>,
    pub(crate) round_trips: usize,
    pub(crate) round_trips_per_second: f64,
}

/// The report as the command line prints it.
pub fn render(report: &Report) -> String {
    let mut text = format!(
        "spawn → initialize → thread/start, median of {} runs each (same machine, same run):\n",
        report.runs
    );
    text += &format!("  fake app-server : {:>8.2} ms\n", report.fake_median_ms);
    match (report.real_median_ms, report.speedup) {
        (Some(real), Some(speedup)) => {
            text += &format!("  codex app-server: {real:>8.2} ms\n");
            text += &format!("  speed-up        : {speedup:>8.1}x (target ≥ 30x)\n");
        }
        _ => text += "  codex app-server: (skipped)\n",
    }
    text += &format!(
        "round trips on one connection to the fake: {} in total, {:.0}/s (target ≥ 20000/s)\n",
        report.round_trips, report.round_trips_per_second
    );
    text
}

pub fn run(args: &Args) -> Result<Report> {
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let scratch = tempfile::Builder::new().prefix("bench-fake-").tempdir()?;
    let workspace = scratch.path().join("ws");
    std::fs::create_dir_all(&workspace)?;
    std::fs::write(workspace.join("AGENTS.md"), "# Agents\nBe terse.\n")?;
    let harness = std::env::current_exe().context("locating the harness binary")?;
    let real = if args.fake_only {
        None
    } else {
        Some(codex::provision::ensure(codex::provision::PINNED)?.binary)
    };
    let mut fake_ms = Vec::new();
    let mut real_ms = Vec::new();
    // Interleave the two sides so drift on the machine hits both alike.
    for run in 0..args.runs {
        let dirs = RunDirs::create(scratch.path(), run)?;
        let mut fake = Command::new(&harness);
        fake.args(["fake-app-server", "app-server"]);
        fake_ms.push(startup_ms(fake, &workspace, &dirs)?);
        if let Some(codex) = &real {
            let dirs = RunDirs::create(scratch.path(), run + args.runs)?;
            let mut command = Command::new(codex);
            command.arg("app-server");
            real_ms.push(startup_ms(command, &workspace, &dirs)?);
        }
    }
    let fake_median_ms = median(&fake_ms);
    let real_median_ms = (!real_ms.is_empty()).then(|| median(&real_ms));
    let dirs = RunDirs::create(scratch.path(), 2 * args.runs + 1)?;
    let round_trips_per_second = round_trips(&harness, &workspace, &dirs, args.round_trips)?;
    Ok(Report {
        runs: args.runs,
        fake_startup_ms: fake_ms,
        real_startup_ms: real_ms,
        fake_median_ms,
        real_median_ms,
        speedup: real_median_ms.map(|real| real / fake_median_ms),
        round_trips: args.round_trips,
        round_trips_per_second,
    })
}

pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

/// A fresh CODEX_HOME and TMPDIR per run; TMPDIR is never a parent of CODEX_HOME (Codex
/// refuses to create its sandbox helper alias there).
pub(crate) struct RunDirs {
    home: PathBuf,
    tmp: PathBuf,
}

impl RunDirs {
    pub(crate) fn create(root: &Path, run: usize) -> Result<Self> {
        let home = root.join("homes").join(format!("run-{run}"));
        let tmp = root.join("tmps").join(format!("run-{run}"));
        std::fs::create_dir_all(&home)?;
        std::fs::create_dir_all(&tmp)?;
        Ok(Self { home, tmp })
    }

    /// The app-server runs in `workspace` with only PATH and this run's private directories in
    /// its environment, speaking on piped stdio.
    fn isolate(&self, command: &mut Command, workspace: &Path) {
        command
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("HOME", &self.home)
            .env("CODEX_HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .current_dir(workspace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
    }
}

struct Connection {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl Connection {
    fn spawn(mut command: Command, workspace: &Path, dirs: &RunDirs) -> Result<Self> {
        dirs.isolate(&mut command, workspace);
        let mut child = command.spawn().context("spawning the app-server")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout: ChildStdout = child.stdout.take().context("stdout")?;
        let (tx, rx) = std::sync::mpsc::sync_channel(4096);
        forward_lines(stdout, move |line| tx.send(line).is_ok());
        Ok(Self {
            child,
            stdin,
            lines: rx,
        })
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message)?;
        line.push(b'\n');
        self.stdin.write_all(&line)?;
        self.stdin.flush()?;
        Ok(())
    }

    /// Wait for the response with `id` (skipping notifications); bounded.
    fn wait_response(&mut self, id: u64) -> Result<Value> {
        let deadline = Instant::now() + STEP_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).map_err(|_| {
                anyhow::anyhow!("no response to request {id} within {STEP_LIMIT:?}")
            })?;
            // Cheap pre-check: only parse lines that can be the response.
            if !line.starts_with("{\"id\":") && !line.contains("\"id\":") {
                continue;
            }
            let message: Value = serde_json::from_str(&line)?;
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                if let Some(error) = message.get("error") {
                    bail!("request {id} failed: {error}");
                }
                return Ok(message);
            }
        }
    }

    fn close(mut self) {
        drop(self.stdin);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn startup_ms(command: Command, workspace: &Path, dirs: &RunDirs) -> Result<f64> {
    let started = Instant::now();
    let mut connection = Connection::spawn(command, workspace, dirs)?;
    connection.send(&json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "bench", "version": "0.0.1"}, "capabilities": {"experimentalApi": true}}}))?;
    connection.wait_response(1)?;
    connection.send(&json!({"method": "initialized"}))?;
    connection.send(&json!({"id": 2, "method": "thread/start", "params": {"cwd": workspace, "ephemeral": true}}))?;
    connection.wait_response(2)?;
    let elapsed = started.elapsed();
    connection.close();
    Ok(elapsed.as_secs_f64() * 1000.0)
}

fn round_trips(harness: &Path, workspace: &Path, dirs: &RunDirs, count: usize) -> Result<f64> {
    let mut command = Command::new(harness);
    command.args(["fake-app-server", "app-server"]);
    round_trips_through(command, workspace, dirs, count, 1)
}

/// Sequential `account/read` round trips per second on one connection to the app-server
/// `command` starts (the fake, or the fake behind the wire tap).
/// `count` requests on one connection, with up to `window` of them unanswered at a time (1: each
/// waits for the previous answer, the latency-bound case; more: a driver streaming requests, as
/// a turn streams notifications). Returns requests answered per second.
pub(crate) fn round_trips_through(
    mut command: Command,
    workspace: &Path,
    dirs: &RunDirs,
    count: usize,
    window: usize,
) -> Result<f64> {
    anyhow::ensure!(window >= 1, "the window must be at least 1");
    dirs.isolate(&mut command, workspace);
    let mut child = command.spawn().context("spawning the fake")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
    // Reading on this thread keeps the measurement free of thread hand-offs; the bound comes
    // from a watchdog that kills the fake (which ends any blocked read with EOF).
    let child = std::sync::Arc::new(std::sync::Mutex::new(child));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watched = std::sync::Arc::clone(&child);
    let watchdog = std::thread::spawn(move || {
        if done_rx.recv_timeout(ROUND_TRIP_LIMIT).is_err() {
            if let Ok(mut child) = watched.lock() {
                let _ = child.kill();
            }
        }
    });
    let mut line = String::new();
    // The next response to any request (notifications are skipped): its id.
    let mut read_response = |line: &mut String| -> Result<u64> {
        loop {
            line.clear();
            if stdout.read_line(line)? == 0 {
                bail!("the app-server closed stdout with requests unanswered (killed at the {ROUND_TRIP_LIMIT:?} bound?)");
            }
            let Some(rest) = line.strip_prefix("{\"id\":") else {
                continue;
            };
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let Ok(id) = digits.parse() else { continue };
            if line.contains("\"error\":") {
                bail!("request {id} failed: {line}");
            }
            return Ok(id);
        }
    };
    writeln!(
        stdin,
        "{}",
        json!({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "bench", "version": "0.0.1"}}})
    )?;
    stdin.flush()?;
    let first = read_response(&mut line)?;
    anyhow::ensure!(
        first == 0,
        "the first response answers request {first}, not initialize"
    );
    writeln!(stdin, "{}", json!({"method": "initialized"}))?;
    let started = Instant::now();
    let count = count as u64;
    let mut send = |id: u64| -> Result<()> {
        writeln!(
            stdin,
            "{{\"id\":{id},\"method\":\"account/read\",\"params\":{{}}}}"
        )?;
        stdin.flush()?;
        Ok(())
    };
    let mut sent = 0;
    while sent < count.min(window as u64) {
        sent += 1;
        send(sent)?;
    }
    // In whatever order they come (the real Codex may answer concurrent requests out of
    // order): each answer lets the next request go.
    let mut answered = std::collections::HashSet::new();
    while (answered.len() as u64) < count {
        let id = read_response(&mut line)?;
        anyhow::ensure!(
            (1..=sent).contains(&id) && answered.insert(id),
            "an answer to request {id}, which is not waiting for one"
        );
        if sent < count {
            sent += 1;
            send(sent)?;
        }
    }
    let elapsed = started.elapsed();
    let _ = done_tx.send(());
    let _ = watchdog.join();
    drop(stdin);
    if let Ok(mut child) = child.lock() {
        let _ = child.wait();
    }
    Ok(count as f64 / elapsed.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
