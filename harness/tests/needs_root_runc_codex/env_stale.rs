//! What a SIGKILLed harness leaves behind (a runc container with its process and cgroup, a
//! bundle folder) is reaped by the next harness, and a live harness's container is never touched.
//!
//! A child copy of the test binary plays the harness that gets killed. Every test needs root and
//! runc: without them it is reported as ignored with the reason; under `CI=true` it fails.
//! The trials run one at a time: each reaping pass is machine-wide, so a parallel trial could
//! reap another trial's leftover before that trial looks at it.

use crate::common;

use libtest_mimic::{Failed, Trial};
use sandbox::environment::{self, Runtime};
use sandbox::launcher::EnvMounts;
use sandbox::launcher::{Launcher, ProcessSpec};
use sandbox::reap::{self, ListedContainer};
use sandbox::runc::RuncLauncher;
use sandbox::{catalogue, owner};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Set in a child copy of this test binary: `container` runs a long-lived container, `bundle`
/// only prepares one (a bundle folder, no container); then the child waits to be killed.
const CHILD_MODE_VAR: &str = "ENV_STALE_CHILD";
/// How long a child lives at most when nobody kills it.
const CHILD_LIFETIME: Duration = Duration::from_secs(120);
/// Where a child writes `{id, bundle, scratch}` once its container is ready.
const READY_FILE_VAR: &str = "ENV_STALE_READY_FILE";
/// How long the parent waits for a child's ready file.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// When this process is a child copy (see [`CHILD_MODE_VAR`]), play it and say so.
pub fn run_as_child() -> bool {
    let Ok(mode) = std::env::var(CHILD_MODE_VAR) else {
        return false;
    };
    run_child(&mode);
    true
}

/// This module's own containment scope, inherited by its children while its trials run: a
/// reaping pass of any other harness on the machine (.ci/run runs the published matrix beside
/// the tests) then leaves this test's killed harnesses to this test's own passes.
fn scope() -> String {
    format!("env-stale-{}", std::process::id())
}

/// Before the trials are built: the scope, for this process and its children.
pub fn set_up() {
    std::env::set_var(owner::SCOPE_VAR, scope());
}

/// After the last trial: nothing of the scope stays, and the other modules' trials run outside
/// it, as they did when this was a binary of its own.
pub fn tear_down() {
    remove_scope_folders(&scope());
    std::env::remove_var(owner::SCOPE_VAR);
}

/// The trials, run one at a time (see the header).
pub fn trials() -> Vec<Trial> {
    let missing = runc_missing();
    vec![
        trial(
            "reaps_container_of_sigkilled_harness_needs_root_and_runc",
            &missing,
            reaps_container_of_sigkilled_harness,
        ),
        trial(
            "reaps_bundle_folder_of_sigkilled_harness_needs_root_and_runc",
            &missing,
            reaps_bundle_folder_of_sigkilled_harness,
        ),
        trial(
            "keeps_container_of_live_harness_needs_root_and_runc",
            &missing,
            keeps_container_of_live_harness,
        ),
    ]
}

/// The scope's cgroup folders, once empty: nothing of this test's scope stays behind.
fn remove_scope_folders(scope: &str) {
    for folder in common::scope_folders(scope) {
        let _ = std::fs::remove_dir(folder);
    }
}

/// Why the `container` environment cannot run on runc here, if it cannot.
fn runc_missing() -> Option<String> {
    match environment::select_runtime("container") {
        Ok(Runtime::Runc) => None,
        Ok(other) => Some(format!(
            "the {} runtime is selected here, not runc",
            other.as_str()
        )),
        Err(missing) => Some(missing.reason),
    }
}

/// A trial that fails under `CI=true` and is ignored elsewhere when runc cannot run.
fn trial(name: &str, missing: &Option<String>, body: fn() -> Result<(), Failed>) -> Trial {
    let Some(reason) = missing.clone() else {
        return Trial::test(name, body);
    };
    if std::env::var("CI").as_deref() == Ok("true") {
        return Trial::test(name, move || {
            Err(format!("CI=true and root/runc are missing: {reason}").into())
        });
    }
    eprintln!("ignored: {name}: {reason}");
    Trial::test(name, || Ok(())).with_ignored_flag(true)
}

/// The child harness: prepare (and in `container` mode start) one container running `sleep`,
/// write the ready file, then wait to be killed (bounded).
fn run_child(mode: &str) {
    // As the harness binary does: its one signal handler tears down what the sandbox lists.
    harness::dispatch::install_signal_handler();
    let ready_file = PathBuf::from(std::env::var_os(READY_FILE_VAR).expect("ready file"));
    let scratch = tempfile::Builder::new()
        .prefix("ccf-test-stale-")
        .tempdir()
        .expect("scratch")
        .keep();
    let launcher = RuncLauncher::new(
        catalogue::spec("container").expect("spec"),
        EnvMounts {
            scratch: scratch.clone(),
            ..EnvMounts::default()
        },
    )
    .expect("launcher");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let sleeper = ProcessSpec {
            program: PathBuf::from("/bin/sleep"),
            args: vec![(2 * CHILD_LIFETIME.as_secs()).to_string()],
            env: Vec::new(),
            cwd: scratch.clone(),
        };
        let mut prepared = launcher.prepare(&sleeper).expect("prepare");
        let (id, bundle) = launcher.prepared().pop().expect("one container");
        let _running = if mode == "container" {
            prepared.command.stdin(Stdio::null()).stdout(Stdio::null());
            let child = prepared.command.spawn().expect("spawn runc");
            let deadline = Instant::now() + Duration::from_secs(30);
            while listed(&id).is_none_or(|c| c.status != "running") {
                assert!(Instant::now() < deadline, "container {id} did not start");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Some(child)
        } else {
            None
        };
        let ready = serde_json::json!({ "id": id, "bundle": bundle, "scratch": scratch });
        // Written aside, then renamed: the parent never reads half a file.
        let partial = ready_file.with_extension("partial");
        std::fs::write(&partial, ready.to_string()).expect("ready file");
        std::fs::rename(&partial, &ready_file).expect("ready file");
        tokio::time::sleep(CHILD_LIFETIME).await;
        drop(prepared.guard);
    });
}

/// A running child harness and what it printed.
struct ChildHarness {
    process: Child,
    id: String,
    bundle: PathBuf,
    scratch: PathBuf,
}

impl ChildHarness {
    fn start(mode: &str) -> Result<ChildHarness, Failed> {
        let ready_dir = tempfile::tempdir()?;
        let ready_file = ready_dir.path().join("ready.json");
        let mut process = Command::new(std::env::current_exe()?)
            .env(CHILD_MODE_VAR, mode)
            .env(READY_FILE_VAR, &ready_file)
            .stdin(Stdio::null())
            .spawn()?;
        let deadline = Instant::now() + READY_TIMEOUT;
        let ready: serde_json::Value = loop {
            if let Ok(text) = std::fs::read_to_string(&ready_file) {
                break serde_json::from_str(&text)?;
            }
            let exited = process.try_wait()?;
            if exited.is_some() || Instant::now() >= deadline {
                let _ = process.kill();
                let _ = process.wait();
                return Err(format!(
                    "the {mode} child harness was not ready within {READY_TIMEOUT:?} (exit: {exited:?})"
                )
                .into());
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let field = |name: &str| ready[name].as_str().map(str::to_string);
        match (field("id"), field("bundle"), field("scratch")) {
            (Some(id), Some(bundle), Some(scratch)) => Ok(ChildHarness {
                process,
                id,
                bundle: bundle.into(),
                scratch: scratch.into(),
            }),
            _ => {
                let _ = process.kill();
                let _ = process.wait();
                Err(format!("the child's ready file is incomplete: {ready}").into())
            }
        }
    }

    /// Deliver `signal` and wait (bounded) until the child has exited and been waited for.
    fn end_with(&mut self, signal: nix::sys::signal::Signal) -> Result<(), Failed> {
        let pid = nix::unistd::Pid::from_raw(self.process.id() as i32);
        nix::sys::signal::kill(pid, signal)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.process.try_wait()?.is_none() {
            if Instant::now() >= deadline {
                let _ = self.process.kill();
                let _ = self.process.wait();
                return Err(format!("the child harness ignored {signal} for 30 s").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for ChildHarness {
    /// Whatever a failed check left: the child, its container (through a reaping pass once it
    /// is gone) and its scratch, which is the child's own and not the environment's to clean.
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
        reap::stale_runc();
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

fn listed(id: &str) -> Option<ListedContainer> {
    reap::harness_containers()
        .ok()?
        .into_iter()
        .find(|container| container.id == id)
}

/// Whether a process runs (exists and is not a zombie waiting to be reaped).
fn process_runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// The cgroup folders of a process (v1, v2 or both): each path of `/proc/PID/cgroup` other
/// than a root, under every cgroup mount point where it exists.
fn cgroup_folders(pid: u32) -> Vec<PathBuf> {
    let Ok(membership) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return Vec::new();
    };
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    // Field 5 is the mount point; the file system type follows the ` - ` separator.
    let mount_points: Vec<&str> = mountinfo
        .lines()
        .filter(|line| {
            line.split(" - ")
                .nth(1)
                .is_some_and(|rest| rest.starts_with("cgroup"))
        })
        .filter_map(|line| line.split(' ').nth(4))
        .collect();
    let mut found = Vec::new();
    for relative in membership
        .lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
    {
        let relative = relative.trim_start_matches('/');
        if relative.is_empty() {
            continue;
        }
        for mount_point in &mount_points {
            let folder = Path::new(mount_point).join(relative);
            if folder.is_dir() && !found.contains(&folder) {
                found.push(folder);
            }
        }
    }
    found
}

/// The checks of a container that must be running, with its process and cgroup.
fn running_container(id: &str) -> Result<(u32, Vec<PathBuf>), String> {
    let container = listed(id).ok_or_else(|| format!("runc does not list {id}"))?;
    if container.status != "running" || !process_runs(container.pid) {
        return Err(format!(
            "container {id} is not running (status {}, pid {})",
            container.status, container.pid
        ));
    }
    let cgroups = cgroup_folders(container.pid);
    if !cgroups
        .iter()
        .any(|folder| folder.to_string_lossy().contains(id))
    {
        return Err(format!(
            "no cgroup folder named after {id} found (saw {cgroups:?}): its check would be vacuous"
        ));
    }
    Ok((container.pid, cgroups))
}

fn reaps_container_of_sigkilled_harness() -> Result<(), Failed> {
    let mut child = ChildHarness::start("container")?;
    let recorded = owner::read(&child.bundle).ok_or("the bundle has no owner record")?;
    if recorded.pid != child.process.id() || recorded.container != child.id {
        return Err(format!("the owner record names {recorded:?}, not the child").into());
    }
    running_container(&child.id)?;
    child.end_with(nix::sys::signal::Signal::SIGKILL)?;

    // SIGKILL runs no cleanup: everything is still there.
    let (pid, cgroups) = running_container(&child.id)
        .map_err(|err| format!("after SIGKILL, before reaping: {err}"))?;
    if !child.bundle.is_dir() {
        return Err("the bundle folder vanished before reaping".into());
    }

    let report = reap::stale_runc();
    let mut leftovers = Vec::new();
    if !report.containers.contains(&child.id) {
        leftovers.push(format!("the report does not name {}: {report:?}", child.id));
    }
    if listed(&child.id).is_some() {
        leftovers.push(format!("runc still lists {}", child.id));
    }
    if Path::new("/run/runc").join(&child.id).exists() {
        leftovers.push(format!("runc state /run/runc/{} remains", child.id));
    }
    // The container's init may stay a zombie for a moment until its `runc run` reaps it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while process_runs(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if process_runs(pid) {
        leftovers.push(format!("the container process {pid} still runs"));
    }
    for cgroup in cgroups.iter().filter(|folder| folder.exists()) {
        leftovers.push(format!("cgroup {} remains", cgroup.display()));
    }
    if child.bundle.exists() {
        leftovers.push(format!("bundle {} remains", child.bundle.display()));
    }
    if leftovers.is_empty() {
        Ok(())
    } else {
        Err(leftovers.join("; ").into())
    }
}

fn reaps_bundle_folder_of_sigkilled_harness() -> Result<(), Failed> {
    let mut child = ChildHarness::start("bundle")?;
    if listed(&child.id).is_some() {
        return Err(format!("the bundle-only child has a container {}", child.id).into());
    }
    child.end_with(nix::sys::signal::Signal::SIGKILL)?;
    if owner::read(&child.bundle).is_none() {
        return Err("after SIGKILL the bundle (with its owner record) is gone already".into());
    }
    let report = reap::stale_runc();
    if child.bundle.exists() || !report.bundles.contains(&child.bundle) {
        return Err(format!(
            "bundle {} was not reaped: {report:?}",
            child.bundle.display()
        )
        .into());
    }
    Ok(())
}

fn keeps_container_of_live_harness() -> Result<(), Failed> {
    let mut child = ChildHarness::start("container")?;
    let report = reap::stale_runc();
    if report.containers.contains(&child.id) || report.bundles.contains(&child.bundle) {
        return Err(format!("a live harness's container was reaped: {report:?}").into());
    }
    let alive_note = format!("owner pid {} is alive", child.process.id());
    if !report
        .left_alone
        .iter()
        .any(|(what, why)| what == &child.id && why == &alive_note)
    {
        return Err(format!(
            "the report does not say why {} was left: {report:?}",
            child.id
        )
        .into());
    }
    running_container(&child.id).map_err(|err| format!("after reaping: {err}"))?;
    if owner::read(&child.bundle).is_none() {
        return Err("the live harness's bundle or owner record was removed".into());
    }
    // The live harness still cleans up after itself.
    child.end_with(nix::sys::signal::Signal::SIGTERM)?;
    if listed(&child.id).is_some() || child.bundle.exists() {
        return Err("the child harness did not clean up after SIGTERM".into());
    }
    Ok(())
}
