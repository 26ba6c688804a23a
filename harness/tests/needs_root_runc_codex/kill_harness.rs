//! Killing `harness run` at random moments leaves nothing behind once the next run has started:
//! no container, bundle, cgroup, mount or process of any cell (issue 13).
//!
//! Twenty runs of the real `harness` binary, each stopped by SIGKILL, SIGTERM or SIGINT after a
//! random delay, cycling through three selections: external cells (on the host and in a
//! container) under a driver that hangs and starts a daemon that leaves its session and drops
//! `TMPDIR`; the real Codex on the host and in containers; the fake app-server's reference-driver
//! cells with a hang. After each run, the next one starts and the previous run's leftovers are
//! counted (and must reach zero within a bound); a last run ends normally, after which nothing
//! of any run may remain. SIGINT must end a run with 130, SIGTERM with 143, and either must
//! leave nothing even before the next run starts.
//!
//! Every run gets this test's own containment scope, `TMPDIR` (where bundles go) and evidence
//! folders, so the runs reap only what this test's runs left, and the counts see only that: the
//! harnesses, containers and processes of anything else on the machine are never touched.
//! Needs root, runc, a cgroup v2 hierarchy and the pinned real Codex.

use crate::common;

use common::prereq;
use libtest_mimic::{Failed, Trial};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const KILLS: usize = 20;
/// The random delay between a run's start line and its signal.
const DELAY_MS: (u64, u64) = (200, 3500);
/// How long a run may take to print its start line.
const START_BOUND: Duration = Duration::from_secs(30);
/// How long SIGINT/SIGTERM may take to end a run (the harness's own grace is 30 s).
const STOP_BOUND: Duration = Duration::from_secs(40);
/// How long after the next run's start the previous run's leftovers may take to disappear: the
/// runc reaper's own bound (it removes containers first, then bundle folders), then the Docker
/// and cgroup passes. A shorter bound failed under CI's load (gate 17): a SIGKILLed run's four
/// bundle folders were still there 20 s in, its containers already gone.
const REAP_BOUND: Duration = Duration::from_secs(sandbox::reap::RUNC_REAP_DEADLINE.as_secs() + 15);
/// The driver that hangs: a daemon that leaves the session and drops TMPDIR, then a long sleep.
const HANGING_DRIVER: &str =
    "#!/bin/sh\nenv -u TMPDIR setsid sleep 600 </dev/null >/dev/null 2>&1 &\nexec sleep 600\n";

pub fn trials() -> Vec<Trial> {
    let missing = prereq::environment_missing("container")
        .or_else(prereq::codex_missing)
        .or_else(|| {
            sandbox::containment::scope_folder()
                .is_none()
                .then(|| "needs root and a cgroup v2 hierarchy".to_string())
        });
    let trials = vec![prereq::trial(
        "killing_the_harness_20_times_leaves_nothing_needs_root_runc_cgroup2_real_codex",
        missing,
        killing_the_harness_leaves_nothing,
    )];
    trials
}

/// One `harness run` of this test.
struct Run {
    index: usize,
    pid: i32,
    out: PathBuf,
}

struct Setup {
    base: PathBuf,
    tmp: PathBuf,
    scope: String,
    hanging_driver: PathBuf,
}

fn killing_the_harness_leaves_nothing() -> Result<(), Failed> {
    let keep = tempfile::Builder::new()
        .prefix("kill-harness-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .map_err(|e| format!("creating the test folder: {e}"))?;
    let base = keep.path().to_path_buf();
    let tmp = base.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let hanging_driver = base.join("hanging-driver.sh");
    std::fs::write(&hanging_driver, HANGING_DRIVER).map_err(|e| e.to_string())?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hanging_driver, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| e.to_string())?;
    let seed = std::env::var("KILL_HARNESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        });
    eprintln!("seed {seed} (KILL_HARNESS_SEED={seed} repeats this run)");
    let mut random = XorShift(seed.max(1));
    let setup = Setup {
        base: base.clone(),
        tmp,
        scope: format!("kill-test-{}-{}", std::process::id(), seed % 1_000_000),
        hanging_driver,
    };

    let result = kill_runs(&setup, &mut random);
    // Whatever the outcome, nothing of this test stays: its own scope only.
    let stray = sweep_scope(&setup);
    let _ = std::fs::remove_dir_all(&base);
    result?;
    if !stray.is_empty() {
        return Err(format!("after the checks, the sweep still found: {stray:?}").into());
    }
    Ok(())
}

fn kill_runs(setup: &Setup, random: &mut XorShift) -> Result<(), Failed> {
    let mut problems = Vec::new();
    let mut previous: Option<Run> = None;
    let mut signals_seen = [0usize; 3];
    // What SIGKILLed runs left before the next run started: proof that the counts see
    // leftovers at all (a test that cannot fail proves nothing).
    let mut left_by_sigkill = Vec::new();
    for index in 0..=KILLS {
        let last = index == KILLS;
        let (mut child, run) = start(setup, index, last)?;
        wait_for_start_line(&mut child, &run)?;
        if let Some(prev) = previous.take() {
            let left = wait_until_clean(setup, &prev);
            if !left.is_empty() {
                // What the reaping run said about them (a removal that failed names them).
                problems.push(format!(
                    "run {} (pid {}): left after run {} started: {left:?}; run {}'s stderr: {}",
                    prev.index,
                    prev.pid,
                    run.index,
                    run.index,
                    tail(&run.out.with_extension("stderr"))
                ));
            }
        }
        if last {
            let status = wait_bounded(&mut child, Duration::from_secs(120))
                .ok_or("the last run did not end within 120 s")?;
            let left = leftovers(setup, &run, true);
            if !left.is_empty() {
                problems.push(format!("the last run (exit {status:?}) left: {left:?}"));
            }
            break;
        }
        let signal = [Signal::SIGKILL, Signal::SIGTERM, Signal::SIGINT][index % 3];
        let delay = Duration::from_millis(random.between(DELAY_MS.0, DELAY_MS.1));
        std::thread::sleep(delay);
        let signalled = matches!(child.try_wait(), Ok(None));
        let signalled_at = std::time::SystemTime::now();
        if signalled {
            kill(Pid::from_raw(run.pid), signal).map_err(|e| format!("signalling: {e}"))?;
        }
        let status = match wait_bounded(&mut child, STOP_BOUND) {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                problems.push(format!(
                    "run {index}: {signal:?} did not end it within {STOP_BOUND:?}"
                ));
                previous = Some(run);
                continue;
            }
        };
        // A process that is still there may already be past its run: reports written, exit
        // code settled, on its way out. A signal landing then stops nothing; that run counts
        // as one that had ended (its leftovers are still checked, as after an orderly stop).
        let ended_first = signalled && ended_before_the_signal(status, &run, signalled_at);
        let delivered = signalled && !ended_first;
        if delivered {
            signals_seen[index % 3] += 1;
        }
        eprintln!(
            "run {index}: {signal:?} after {delay:?}{} → {status:?}",
            if !signalled {
                " (had already ended)"
            } else if ended_first {
                " (landed as the finished run was exiting)"
            } else {
                ""
            }
        );
        if ended_first {
            let left = leftovers(setup, &run, false);
            if !left.is_empty() {
                problems.push(format!(
                    "run {index}: it ended normally, but it left: {left:?}"
                ));
            }
        }
        if delivered && signal != Signal::SIGKILL {
            // The orderly stop cleans up itself: nothing waits for the next run.
            let left = leftovers(setup, &run, false);
            if !left.is_empty() {
                problems.push(format!(
                    "run {index}: {signal:?} ended it, but it left: {left:?}"
                ));
            }
        }
        if delivered && signal == Signal::SIGKILL {
            let left = leftovers(setup, &run, false);
            eprintln!(
                "run {index}: SIGKILL left {} things for the next run",
                left.len()
            );
            left_by_sigkill.extend(left);
        }
        if delivered {
            let expected = match signal {
                Signal::SIGINT => Some(130),
                Signal::SIGTERM => Some(143),
                _ => None,
            };
            if expected.is_some() && status.code() != expected {
                problems.push(format!(
                    "run {index}: {signal:?} ended it with {status:?}, not exit {expected:?}; stderr: {}",
                    tail(&run.out.with_extension("stderr"))
                ));
            }
        }
        previous = Some(run);
    }
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for thing in &left_by_sigkill {
        // `process NAME` by name; containers, bundles, cgroups and mounts by kind.
        let words: Vec<&str> = thing.split_whitespace().collect();
        let kind = match words.as_slice() {
            ["process", name, ..] => format!("process {name}"),
            [kind, ..] => kind.to_string(),
            [] => String::new(),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    eprintln!(
        "signals delivered: SIGKILL {}, SIGTERM {}, SIGINT {}; SIGKILL left {} things before the next run reaped them: {kinds:?}",
        signals_seen[0],
        signals_seen[1],
        signals_seen[2],
        left_by_sigkill.len(),
    );
    if signals_seen.contains(&0) {
        problems.push(format!(
            "every signal must reach a running harness at least once: {signals_seen:?}"
        ));
    }
    if left_by_sigkill.is_empty() {
        problems.push("no SIGKILL left anything behind, so no reaping was tested".into());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}

/// Run `index`'s selection; the last run is a short one that ends normally.
fn start(setup: &Setup, index: usize, last: bool) -> Result<(Child, Run), Failed> {
    let out = setup.base.join(format!("run-{index}"));
    let mut command = Command::new(env!("CARGO_BIN_EXE_harness"));
    command.arg("run").arg("--out").arg(&out).arg("-j").arg("2");
    if last {
        command.arg("core-compatibility.runner-fake.local.message-marker");
    } else {
        // Not `index % 3`, the signal's cycle: every selection meets every signal.
        match (index / 3) % 3 {
            0 => {
                command
                    .arg("--driver-cmd")
                    .arg(&setup.hanging_driver)
                    .args(["runner-external.local", "runner-external.container"]);
            }
            1 => {
                // About a second a cell, on the host and in every container environment.
                command.args([".runner-codex.", ".runner-codex-0-160.local."]);
            }
            _ => {
                command.args([
                    "transport-faults.runner-fake.local",
                    "transport-faults.runner-fake.container",
                    "core-compatibility.runner-fake.container",
                ]);
            }
        }
    }
    let stderr = std::fs::File::create(out.with_extension("stderr")).map_err(|e| e.to_string())?;
    let stdout = std::fs::File::create(out.with_extension("stdout")).map_err(|e| e.to_string())?;
    let child = command
        .env("HARNESS_CONTAINMENT_SCOPE", &setup.scope)
        .env("TMPDIR", &setup.tmp)
        .env_remove("CI")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("starting the harness: {e}"))?;
    let pid = child.id() as i32;
    Ok((child, Run { index, pid, out }))
}

/// Wait until the run printed `running N cells`.
fn wait_for_start_line(child: &mut Child, run: &Run) -> Result<(), Failed> {
    let deadline = Instant::now() + START_BOUND;
    let path = run.out.with_extension("stderr");
    loop {
        if let Ok(file) = std::fs::File::open(&path) {
            if BufReader::new(file)
                .lines()
                .map_while(Result::ok)
                .any(|line| line.starts_with("running "))
            {
                return Ok(());
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "run {} ended ({status}) before it started: {}",
                run.index,
                tail(&path)
            )
            .into());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("run {} did not start within {START_BOUND:?}", run.index).into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn wait_until_clean(setup: &Setup, run: &Run) -> Vec<String> {
    let deadline = Instant::now() + REAP_BOUND;
    loop {
        let left = leftovers(setup, run, false);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Everything of `run` still there: processes (by its evidence folder in their environment or
/// command line), runc containers (by its pid in their id), bundle folders (by their owner
/// record), cgroups (by its pid in the run cgroup's name) and mounts (below its folders).
fn leftovers(setup: &Setup, run: &Run, also_the_scope: bool) -> Vec<String> {
    let mut found = Vec::new();
    let marker = format!("{}/", run.out.display());
    for (pid, name) in common::procs::mentioning(&marker) {
        found.push(format!("process {name} (pid {pid})"));
    }
    let container_prefix = format!("ccf-{}-", run.pid);
    if let Ok(output) = Command::new("runc").args(["list", "-q"]).output() {
        for id in String::from_utf8_lossy(&output.stdout).lines() {
            if id.starts_with(&container_prefix) {
                found.push(format!("container {id}"));
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(&setup.tmp) {
        for entry in entries.flatten() {
            let path = entry.path();
            // The record, else the folder's name (a run killed before it wrote the record).
            let owned = sandbox::owner::of_folder(&path, sandbox::runc::BUNDLE_PREFIX)
                .map(|owner| owner.pid as i32);
            let config = std::fs::read_to_string(path.join("config.json")).unwrap_or_default();
            if owned == Some(run.pid) || (owned.is_none() && config.contains(&marker)) {
                found.push(format!("bundle {}", path.display()));
            }
        }
    }
    let run_prefix = format!("run-{}-", run.pid);
    for folder in common::scope_folders(&setup.scope) {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.path().is_dir() && (also_the_scope || name.starts_with(&run_prefix)) {
                found.push(format!("cgroup {}", entry.path().display()));
            }
        }
    }
    if let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") {
        for line in mountinfo.lines() {
            if line.contains(&marker) || line.contains(&format!("{}/", setup.tmp.display())) {
                found.push(format!("mount {line}"));
            }
        }
    }
    found
}

/// Remove what this test's scope still holds (only after the checks, and only this scope):
/// kill what is in its cgroups, delete its containers, remove its cgroup folders. Returns what
/// it had to remove beyond the empty scope folders.
fn sweep_scope(setup: &Setup) -> Vec<String> {
    let mut stray = Vec::new();
    let marker = format!("{}/", setup.base.display());
    for (pid, name) in common::procs::mentioning(&marker) {
        stray.push(format!("process {name} (pid {pid})"));
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    if let Ok(entries) = std::fs::read_dir(&setup.tmp) {
        for entry in entries.flatten() {
            if let Some(owner) = sandbox::owner::read(&entry.path()) {
                if owner.scope == setup.scope {
                    stray.push(format!("container {}", owner.container));
                    let _ = Command::new("runc")
                        .args(["delete", "--force", &owner.container])
                        .output();
                }
            }
        }
    }
    for folder in common::scope_folders(&setup.scope) {
        let cgroup = sandbox::cgroup::Cgroup {
            path: folder.clone(),
        };
        let inside: Vec<PathBuf> = sandbox::cgroup::subtree(&folder)
            .into_iter()
            .filter(|path| path != &folder)
            .collect();
        if !inside.is_empty() {
            stray.push(format!("cgroups {inside:?}"));
            if folder.join("cgroup.kill").exists() {
                let _ = cgroup.kill_all();
            }
        }
        let _ = cgroup.remove();
    }
    stray
}

/// Whether a run the signal was sent to had ended on its own first: a normal exit (0, or 1 for
/// cells that differ), its summary written before the signal was sent (a harness that ignored
/// the signal and ran on would write it after), and no sign that the signal started a stop.
fn ended_before_the_signal(
    status: std::process::ExitStatus,
    run: &Run,
    signalled_at: std::time::SystemTime,
) -> bool {
    let stderr = std::fs::read_to_string(run.out.with_extension("stderr")).unwrap_or_default();
    let summary_written = std::fs::metadata(run.out.join("summary.json"))
        .and_then(|meta| meta.modified())
        .is_ok_and(|written| written <= signalled_at);
    matches!(status.code(), Some(0 | 1)) && summary_written && !stderr.contains(": stopping — ")
}

/// The child's status within `bound` (killed past it: `None`).
fn wait_bounded(child: &mut Child, bound: Duration) -> Option<std::process::ExitStatus> {
    sandbox::system::wait_bounded(child, bound).ok().flatten()
}

fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

/// A small seeded generator for the delays (no dependency for twenty numbers).
struct XorShift(u64);

impl XorShift {
    fn between(&mut self, low: u64, high: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        low + self.0 % (high - low + 1)
    }
}
