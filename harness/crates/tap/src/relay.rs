//! One launch of the tap (`harness tap --config FILE -- ARGS…`, run by the `codex` shim): start
//! the cell's app-server with the driver's arguments (plus the cell's, for a server launch),
//! relay stdin and stdout byte for byte, record both directions, and end as the app-server
//! ended (same exit code; a signal is re-raised). The app-server's stderr is the tap's.
//!
//! The app-server dies with the tap (`PR_SET_PDEATHSIG`), and SIGTERM / SIGINT / SIGHUP sent to
//! the tap are passed on to it, so a driver that stops its `codex` stops the app-server.

use super::argv::{app_server_args, launches_server};
use super::record::{Direction, LineSplitter, Recorder};
use super::TapConfig;
use serde_json::{json, Map, Value};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::FromRawFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

/// Relay chunk size.
const CHUNK: usize = 64 * 1024;
/// Most launches numbered in one cell (a bound on the numbering loop, far above any retry
/// policy).
const MAX_LAUNCHES: u64 = 10_000;
/// After the app-server exited, how long its stdout may still be drained (a helper it left
/// behind may hold the pipe open).
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

fn fail(message: &str) -> ExitCode {
    eprintln!("codex (harness tap): {message}");
    ExitCode::from(1)
}

/// Entry point: `args` excludes the program name and the `tap` subcommand.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let mut args = args.into_iter();
    let mut config_path = None;
    let mut driver_args = Vec::new();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--config") => config_path = args.next().map(PathBuf::from),
            Some("--") => {
                driver_args.extend(args.by_ref());
                break;
            }
            _ => {
                return fail(&format!(
                    "unexpected argument {arg:?} (usage: tap --config FILE -- ARGS…)"
                ))
            }
        }
    }
    let Some(config_path) = config_path else {
        return fail("missing --config FILE");
    };
    let config: TapConfig = match std::fs::read(&config_path)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
    {
        Ok(config) => config,
        Err(e) => return fail(&format!("reading {}: {e}", config_path.display())),
    };
    let driver_args: Vec<String> = driver_args
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let launch = match take_launch_number(&config.launches) {
        Ok(n) => n,
        Err(e) => {
            return fail(&format!(
                "numbering the launch in {}: {e}",
                config.launches.display()
            ))
        }
    };
    let recorder = match Recorder::open(&config.transcript, launch, config.max_transcript_bytes) {
        Ok(r) => r,
        Err(e) => return fail(&format!("opening {}: {e}", config.transcript.display())),
    };
    run(&config, &driver_args, recorder)
}

/// The lowest free launch number in `dir`: each launch creates `dir/<n>` exclusively.
fn take_launch_number(dir: &Path) -> std::io::Result<u64> {
    for n in 1..=MAX_LAUNCHES {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(dir.join(n.to_string()))
        {
            Ok(_) => return Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!(
        "more than {MAX_LAUNCHES} launches"
    )))
}

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn run(config: &TapConfig, driver_args: &[String], recorder: Recorder) -> ExitCode {
    let args = app_server_args(&config.prefix, driver_args, &config.server_args);
    let added: Vec<&String> = if launches_server(driver_args) {
        config.server_args.iter().collect()
    } else {
        Vec::new()
    };
    let mut env_names: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    env_names.sort();
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    recorder.record(
        "launch",
        fields(json!({
            "argv": driver_args,
            "env_names": env_names,
            "cwd": cwd,
            "program": config.program,
            "app_server_args": args,
            "added_args": added,
            "pid": std::process::id(),
        })),
    );
    let mut command = Command::new(&config.program);
    command
        .args(&args)
        .env_clear()
        .envs(config.env.iter().map(|(k, v)| (k, v)))
        .envs(
            config
                .inherit_env
                .iter()
                .filter_map(|name| Some((name, std::env::var_os(name)?))),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            let message = format!("cannot start {}: {e}", config.program.display());
            recorder.record(
                "exit",
                fields(json!({"status": null, "signal": null, "error": message})),
            );
            return fail(&message);
        }
    };
    let pid = child.id() as i32;
    forward_signals(pid);
    let recorder = std::sync::Arc::new(recorder);
    let max_line = config.max_line_bytes;

    let mut child_stdin = child.stdin.take().expect("piped");
    let to_server = recorder.clone();
    std::thread::spawn(move || {
        // The tap's stdin, read unbuffered: what the driver writes goes on at once.
        // SAFETY: fd 0 is open for the process's life; ManuallyDrop never closes it.
        let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
        let mut split = LineSplitter::new(Direction::In, max_line);
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match stdin.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            // Recorded before it is forwarded (both ways): an answer can never be recorded
            // before what it answers, so the transcript keeps the wire's causal order.
            split.feed(&buf[..n], &to_server);
            if child_stdin.write_all(&buf[..n]).is_err() {
                to_server.note(Direction::In, "the app-server's stdin is closed; the driver's further input was not delivered", None);
                return;
            }
        }
        split.finish(&to_server);
        to_server.record("stdin-closed", Map::new());
        drop(child_stdin);
    });

    let mut child_stdout = child.stdout.take().expect("piped");
    let from_server = recorder.clone();
    let (drained_tx, drained_rx) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        // SAFETY: as for stdin; unbuffered so every chunk reaches the driver when it arrives.
        let mut stdout = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(1) });
        let mut split = LineSplitter::new(Direction::Out, max_line);
        let mut buf = vec![0u8; CHUNK];
        let mut driver_gone = false;
        loop {
            let n = match child_stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            split.feed(&buf[..n], &from_server);
            if !driver_gone && stdout.write_all(&buf[..n]).is_err() {
                driver_gone = true;
                from_server.note(
                    Direction::Out,
                    "the driver stopped reading the tap's stdout",
                    None,
                );
            }
        }
        split.finish(&from_server);
        let _ = drained_tx.send(());
    });

    let status = child.wait();
    let _ = drained_rx.recv_timeout(DRAIN_AFTER_EXIT);
    match status {
        Ok(status) => {
            recorder.record(
                "exit",
                fields(json!({"status": status.code(), "signal": status.signal(), "error": null})),
            );
            if let Some(signal) = status.signal() {
                reraise(signal);
            }
            ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8)
        }
        Err(e) => {
            let message = format!("waiting for the app-server: {e}");
            recorder.record(
                "exit",
                fields(json!({"status": null, "signal": null, "error": message})),
            );
            fail(&message)
        }
    }
}

/// Pass SIGTERM, SIGINT and SIGHUP on to the app-server.
fn forward_signals(pid: i32) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        for signal in signals.forever() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    });
}

/// End the tap by the signal that ended the app-server, so the driver sees the same ending.
fn reraise(signal: i32) {
    // SAFETY: resetting a disposition and signalling ourselves have no preconditions.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::kill(libc::getpid(), signal);
    }
    // A signal that does not end the process (e.g. SIGCHLD) falls through to the exit code.
    std::thread::sleep(Duration::from_millis(50));
}
