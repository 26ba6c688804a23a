//! Running a driver's process (its command line's words, no shell) through the cell's launcher: its stdout and
//! stderr kept up to a cap (with a note when cut), its whole process group killed at the run's
//! bound. The bound has two parts: the run's overall bound, and an idle bound on the wire — a
//! driver that says nothing to its app-server for longer than its own declared idle timeout, or
//! else than any of the task's waits, is hung (`super::driver::idle_bound`).
//! While it runs, the harness may tell it what the wire cannot ([`super::control`]).

use super::control::{self, Note, Spawned, Stdin, Tell};
use anyhow::{Context, Result};
use graders::wire::DriverEnd;
use sandbox::launcher::{Launcher, ProcessSpec};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Most bytes kept of each of a driver's stdout and stderr.
pub(crate) const MAX_DRIVER_OUTPUT_BYTES: u64 = 1024 * 1024;
/// How often the wire is looked at for activity.
const POLL: Duration = Duration::from_millis(100);

/// A driver process to run.
pub(crate) struct DriverProcess {
    /// The program and its arguments, executed as they are (`suites::declared`).
    pub(crate) argv: Vec<String>,
    /// Its complete environment.
    pub(crate) env: Vec<(String, String)>,
    pub(crate) cwd: PathBuf,
    pub(crate) stdout_log: PathBuf,
    pub(crate) stderr_log: PathBuf,
    pub(crate) stdin: Stdin,
}

/// What the harness tells the driver while it runs, and the tap it finds the driver's
/// processes by.
pub(crate) struct Telling {
    pub(crate) tell: Tell,
    /// The socket of the cell's recorder, which every tap of the cell names (see [`control::Spawned::tap_socket`]).
    pub(crate) tap_socket: PathBuf,
}

/// How a driver's run ended, and what the harness told it on the way (its notes).
pub(crate) struct Ran {
    pub(crate) end: DriverEnd,
    pub(crate) told: Vec<Note>,
}

/// The bounds on a driver run.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub overall: Duration,
    /// Longest time without a new transcript line while the driver runs.
    pub idle: Duration,
}

/// Copy `from` into `to`, keeping at most `cap` bytes and then reading on (so the driver never
/// blocks on a full pipe); a note at the end says how much was not kept.
async fn copy_capped(
    mut from: impl AsyncRead + Unpin,
    to: PathBuf,
    cap: u64,
) -> std::io::Result<()> {
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&to)
        .await?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut kept = 0u64;
    let mut dropped = 0u64;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept) as usize;
        let keep = n.min(room);
        file.write_all(&buf[..keep]).await?;
        kept += keep as u64;
        dropped += (n - keep) as u64;
    }
    if dropped > 0 {
        file.write_all(
            format!(
                "\n[harness: output cut after {cap} bytes; {dropped} more bytes were not kept]\n"
            )
            .as_bytes(),
        )
        .await?;
    }
    file.flush().await
}

/// Longest command line a message quotes whole; a longer one is cut, saying its length.
const MAX_QUOTED_COMMAND_BYTES: usize = 512;

/// Why the driver's process could not be started: the step, the system's reason, and the command
/// line as far as a message should hold it (a multi-megabyte prompt is one of its words).
fn not_started(process: &DriverProcess, error: &std::io::Error) -> String {
    let bytes: usize = process.argv.iter().map(|word| word.len() + 1).sum();
    if error.raw_os_error() == Some(nix::errno::Errno::E2BIG as i32) {
        let environment: usize = process.env.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        let longest = process.argv.iter().map(String::len).max().unwrap_or(0);
        return format!(
            "starting the driver: argument list too long (the command line is {bytes} bytes, its longest word {longest} bytes, its environment {environment} bytes; Linux takes at most 128 KiB in one word)"
        );
    }
    let line = shlex::try_join(process.argv.iter().map(String::as_str))
        .unwrap_or_else(|_| process.argv.join(" "));
    format!(
        "starting the driver `{}`: {error}",
        cut(&line, MAX_QUOTED_COMMAND_BYTES)
    )
}

/// `text`, or its first `max` bytes (on a character boundary) and how long it was.
pub(crate) use report::cause::head as cut;

fn size(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Run `process` through `launcher` within `bounds`, watching `wire` (the transcript) for
/// activity, telling it what `telling` says once its turn runs. The driver's process group is
/// killed when it ends or is stopped.
pub(crate) async fn run(
    process: &DriverProcess,
    launcher: &dyn Launcher,
    bounds: Bounds,
    wire: &Path,
    telling: Option<Telling>,
) -> Result<Ran> {
    // Before the spawn: a driver quick enough to write before the first look would otherwise
    // leave no change to see, and its silence would be timed from the start-up allowance.
    let wire_size_at_start = size(wire);
    let Started {
        mut child,
        guard,
        is_driver,
    } = match spawn(process, launcher)? {
        Ok(started) => started,
        Err(end) => {
            return Ok(Ran {
                end,
                told: Vec::new(),
            })
        }
    };
    let stdout = child.stdout.take().context("driver stdout")?;
    let stderr = child.stderr.take().context("driver stderr")?;
    let copies = tokio::spawn(futures_util::future::join(
        copy_capped(stdout, process.stdout_log.clone(), MAX_DRIVER_OUTPUT_BYTES),
        copy_capped(stderr, process.stderr_log.clone(), MAX_DRIVER_OUTPUT_BYTES),
    ));
    let pgid = child.id().and_then(|p| i32::try_from(p).ok());
    // Held until the driver ends: by the telling task, or here when nothing is to be told.
    let mut stdin = child.stdin.take();
    let notes = Arc::new(Mutex::new(Vec::new()));
    let told = match (telling, pgid) {
        (Some(telling), Some(pid)) => Some(tokio::spawn(control::tell(
            telling.tell,
            Spawned {
                pid,
                is_driver,
                tap_socket: telling.tap_socket,
            },
            wire.to_path_buf(),
            stdin.take(),
            bounds.overall,
            notes.clone(),
        ))),
        _ => None,
    };
    let end = until_it_ends(&mut child, pgid, bounds, wire, wire_size_at_start).await?;
    // Whatever the driver left running in its group (its `codex`, a helper) ends with it.
    kill_group(pgid);
    if let Some(told) = told {
        told.abort();
        let _ = told.await;
    }
    drop(stdin);
    drop(guard);
    // The pipes close once every process holding them is gone; bounded all the same.
    let _ = tokio::time::timeout(driver::bounds::DRIVER_OUTPUT_COPIES, copies).await;
    let told = std::mem::take(&mut *notes.lock().unwrap_or_else(|p| p.into_inner()));
    Ok(Ran { end, told })
}

/// The driver's child as the launcher started it.
struct Started {
    child: tokio::process::Child,
    /// What must live as long as the child (a runc container's guard).
    guard: Box<dyn Send + Sync>,
    /// Whether the child is the driver's own program, not a wrapper of the launcher's.
    is_driver: bool,
}

/// Start `process` through `launcher`: its own process group, its output piped, its stdin held
/// only when the harness may write to it. `Err(end)` inside: it could not start, and how its run
/// ended says why.
fn spawn(
    process: &DriverProcess,
    launcher: &dyn Launcher,
) -> Result<std::result::Result<Started, DriverEnd>> {
    let Some((program, args)) = process.argv.split_first() else {
        anyhow::bail!("the driver's command line has no program");
    };
    let spec = ProcessSpec {
        program: program.into(),
        args: args.to_vec(),
        env: process.env.clone(),
        cwd: process.cwd.clone(),
    };
    let prepared = match launcher.prepare(&spec) {
        Ok(prepared) => prepared,
        Err(e) => {
            return Ok(Err(DriverEnd::NotStarted {
                error: format!("preparing the driver's process: {e:#}"),
            }))
        }
    };
    let mut command = prepared.command;
    let spawned_is_driver = command.as_std().get_program() == program.as_str();
    command
        .stdin(match process.stdin {
            Stdin::Closed => std::process::Stdio::null(),
            Stdin::Held => std::process::Stdio::piped(),
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    match command.spawn() {
        Ok(child) => Ok(Ok(Started {
            child,
            guard: prepared.guard,
            is_driver: spawned_is_driver,
        })),
        Err(e) => Ok(Err(DriverEnd::NotStarted {
            error: not_started(process, &e),
        })),
    }
}

/// Wait for the driver's child to end, or kill its group at a bound: the run's overall bound,
/// or its idle bound on the wire (`wire` growing is activity; a tree still starting up is not
/// idle, [`StartUp`]).
async fn until_it_ends(
    child: &mut tokio::process::Child,
    pgid: Option<i32>,
    bounds: Bounds,
    wire: &Path,
    wire_size_at_start: u64,
) -> Result<DriverEnd> {
    let mut last_size = wire_size_at_start;
    let started = Instant::now();
    // In the future until the allowance is spent: `elapsed()` of a future instant is zero.
    let mut last_activity = Instant::now() + driver::bounds::DRIVER_START_ALLOWANCE;
    let mut start_up = StartUp::default();
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.context("waiting for the driver")?;
                use std::os::unix::process::ExitStatusExt;
                return Ok(match (status.code(), status.signal()) {
                    (Some(code), _) => DriverEnd::Exited { code },
                    (None, Some(signal)) => DriverEnd::Signaled { signal },
                    (None, None) => DriverEnd::Exited { code: -1 },
                });
            }
            _ = tokio::time::sleep(POLL) => {
                let now = size(wire);
                if now != last_size {
                    last_size = now;
                    last_activity = Instant::now();
                    start_up.spoke = true;
                } else if last_activity.elapsed() > bounds.idle && start_up.still_working(pgid) {
                    last_activity = Instant::now();
                }
                let reason = if started.elapsed() > bounds.overall {
                    Some(format!("the driver did not end within the run's bound of {:?}; the harness killed it", bounds.overall))
                } else if last_activity.elapsed() > bounds.idle {
                    Some(format!("the driver said nothing on the wire for {:?} (its idle bound: its declared idle timeout, else the task's longest wait, then the shutdown and a margin); the harness killed it", bounds.idle))
                } else {
                    None
                };
                if let Some(reason) = reason {
                    kill_group(pgid);
                    let _ = child.kill().await;
                    return Ok(DriverEnd::KilledAtBound { reason });
                }
            }
        }
    }
}

/// A driver that has not said its first byte yet is still starting, not hung, while its process
/// tree works: an interpreter importing its SDK on a loaded machine (the published Python SDK's
/// import outlasted the start allowance and the idle bound, 30 s, on a 2-core machine at load
/// 20, measured) uses CPU, a hung one does not. Looked at only when the idle bound has run out
/// (a walk of `/proc` each idle bound, not each poll); the overall bound still ends it.
#[derive(Default)]
struct StartUp {
    spoke: bool,
    cpu_ticks_seen: u64,
}

impl StartUp {
    /// Clock ticks (1/100 s on Linux) the tree must have used since the last look: a sleeping
    /// or blocked process uses none; a timer waking it now and then, well under one.
    const WORKING_TICKS: u64 = 10;

    fn still_working(&mut self, pgid: Option<i32>) -> bool {
        let Some(root) = pgid.filter(|_| !self.spoke) else {
            return false;
        };
        let now = super::proc_tree::tree_cpu_ticks(root);
        let working = now >= self.cpu_ticks_seen + Self::WORKING_TICKS;
        self.cpu_ticks_seen = now;
        working
    }
}

fn kill_group(pgid: Option<i32>) {
    if let Some(pid) = pgid {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox::launcher::LocalLauncher;

    fn process(dir: &Path, command: &str) -> DriverProcess {
        DriverProcess {
            argv: vec!["/bin/sh".into(), "-c".into(), command.into()],
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            cwd: dir.to_path_buf(),
            stdout_log: dir.join("out.log"),
            stderr_log: dir.join("err.log"),
            stdin: Stdin::Closed,
        }
    }

    #[tokio::test]
    async fn exit_codes_signals_caps_and_the_idle_bound() {
        let dir = tempfile::tempdir().unwrap();
        let wire = dir.path().join("wire");
        let bounds = Bounds {
            overall: Duration::from_secs(20),
            idle: Duration::from_millis(600),
        };
        let end = run(
            &process(dir.path(), "echo hi; exit 3"),
            &LocalLauncher,
            bounds,
            &wire,
            None,
        )
        .await
        .unwrap()
        .end;
        assert_eq!(end, DriverEnd::Exited { code: 3 });
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out.log")).unwrap(),
            "hi\n"
        );
        let end = run(
            &process(dir.path(), "kill -9 $$"),
            &LocalLauncher,
            bounds,
            &wire,
            None,
        )
        .await
        .unwrap()
        .end;
        assert_eq!(end, DriverEnd::Signaled { signal: 9 });
        // Idle after its first wire byte (before it, the start-up allowance applies).
        let speaks_then_sleeps = format!("echo x > {}; sleep 30", wire.display());
        let started = Instant::now();
        let end = run(
            &process(dir.path(), &speaks_then_sleeps),
            &LocalLauncher,
            bounds,
            &wire,
            None,
        )
        .await
        .unwrap()
        .end;
        assert!(matches!(end, DriverEnd::KilledAtBound { .. }), "{end:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let big = process(dir.path(), "head -c 3000000 /dev/zero >&2");
        run(&big, &LocalLauncher, bounds, &wire, None)
            .await
            .unwrap();
        let err = std::fs::read(dir.path().join("err.log")).unwrap();
        assert!(err.len() < MAX_DRIVER_OUTPUT_BYTES as usize + 200);
        assert!(String::from_utf8_lossy(&err[err.len() - 100..]).contains("output cut"));
    }
}

#[cfg(test)]
mod start_up_tests {
    use super::StartUp;
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};

    fn spawn(script: &str) -> std::process::Child {
        std::process::Command::new("sh")
            .args(["-c", script])
            .process_group(0)
            .spawn()
            .unwrap()
    }

    fn end(mut child: std::process::Child) {
        let pgid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
    }

    #[test]
    fn a_silent_driver_that_works_is_starting_and_one_that_sleeps_or_spoke_is_not() {
        let working = spawn("while :; do :; done");
        let sleeping = spawn("sleep 30");
        let pid = |child: &std::process::Child| Some(i32::try_from(child.id()).unwrap());
        let mut working_start = StartUp::default();
        let mut sleeping_start = StartUp::default();
        // The first look counts what the tree used since it began; the sleeper used almost none.
        let _ = sleeping_start.still_working(pid(&sleeping));
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen_working = false;
        while !seen_working && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            seen_working = working_start.still_working(pid(&working));
        }
        std::thread::sleep(Duration::from_millis(300));
        let sleeper_working = sleeping_start.still_working(pid(&sleeping));
        let mut spoke = StartUp {
            spoke: true,
            ..StartUp::default()
        };
        let spoken_working = spoke.still_working(pid(&working));
        end(working);
        end(sleeping);
        assert!(seen_working, "a busy start-up is still starting");
        assert!(!sleeper_working, "a sleeping driver is not");
        assert!(!spoken_working, "once it has spoken, only the wire counts");
    }
}
