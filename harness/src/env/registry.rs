//! Live containers of this process, so that nothing outlives a run: every container a launcher
//! prepares is registered until its guard has removed it, and the shutdown path
//! ([`crate::shutdown`]) removes whatever is still registered before the process ends.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Bound on each `runc kill` / `runc delete`.
const RUNC_COMMAND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a removal keeps retrying a container that is still being created.
const REMOVAL_DEADLINE: Duration = Duration::from_secs(5);

/// What must be undone for one container.
#[derive(Debug, Clone)]
pub struct Registered {
    pub bundle: PathBuf,
}

fn live() -> &'static Mutex<BTreeMap<String, Registered>> {
    static LIVE: OnceLock<Mutex<BTreeMap<String, Registered>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

pub fn register(id: &str, bundle: &Path) {
    install_signal_cleanup();
    live()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .insert(
            id.to_string(),
            Registered {
                bundle: bundle.to_path_buf(),
            },
        );
}

/// Ids of the containers this process has not removed yet.
pub fn live_ids() -> Vec<String> {
    live()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .keys()
        .cloned()
        .collect()
}

/// Remove one container (kill, delete, bundle) and forget it. `keep_bundle` leaves the bundle
/// folder for a user who wants to rerun it by hand.
pub fn remove(id: &str, keep_bundle: bool) {
    let entry = live()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .remove(id);
    destroy_container(id);
    if let Some(entry) = entry {
        if !keep_bundle {
            let _ = std::fs::remove_dir_all(&entry.bundle);
        }
    }
}

/// Remove every registered container. Called by the shutdown path; callers that end the
/// process some other way (e.g. `std::process::exit`) call it themselves.
pub fn cleanup_registered() {
    for id in live_ids() {
        remove(&id, false);
    }
}

/// `runc kill` + `runc delete -f`, retried while runc may still be creating the container
/// (a container that runc has not written down yet cannot be deleted yet).
pub(super) fn destroy_container(id: &str) {
    let deadline = Instant::now() + REMOVAL_DEADLINE;
    loop {
        let _ = run_bounded(&["kill", id, "KILL"]);
        let _ = run_bounded(&["delete", "--force", id]);
        let state_gone = !runc_state_dir().join(id).exists();
        if state_gone || Instant::now() >= deadline {
            if !state_gone {
                tracing::warn!(
                    container = id,
                    "runc still has state for the container after cleanup"
                );
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// runc's state folder for root (runc's default `--root`).
pub fn runc_state_dir() -> PathBuf {
    PathBuf::from("/run/runc")
}

fn run_bounded(args: &[&str]) -> std::io::Result<bool> {
    run_bounded_to("runc", args, Stdio::null(), RUNC_COMMAND_TIMEOUT)
}

/// The standard output of a successful `runc ARGS`; `None` when it fails or overruns its bound.
pub(super) fn runc_stdout(args: &[&str]) -> std::io::Result<Option<Vec<u8>>> {
    command_stdout("runc", args, RUNC_COMMAND_TIMEOUT)
}

/// The standard output of a successful `PROGRAM ARGS`; `None` when it fails or overruns
/// `bound`. The output goes to a temporary file, not a pipe, so a long answer cannot block the
/// program while this side waits.
pub(super) fn command_stdout(
    program: &str,
    args: &[&str],
    bound: Duration,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut output = tempfile::tempfile()?;
    if !run_bounded_to(program, args, Stdio::from(output.try_clone()?), bound)? {
        return Ok(None);
    }
    use std::io::{Read, Seek};
    let mut bytes = Vec::new();
    output.rewind()?;
    output.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

fn run_bounded_to(
    program: &str,
    args: &[&str],
    stdout: Stdio,
    bound: Duration,
) -> std::io::Result<bool> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()?;
    let deadline = Instant::now() + bound;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status.success());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(false);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// On SIGINT/SIGTERM, registered containers are removed before the process ends: the process's
/// one handler ([`crate::shutdown`]) does it. Installed once, when the first container is
/// registered (a matrix run installs it before any cell starts).
pub fn install_signal_cleanup() {
    crate::shutdown::install_signal_handler();
}
