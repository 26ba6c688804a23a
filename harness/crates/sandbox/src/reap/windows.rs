//! The windows in which a container of a killed harness escaped the next harness's reaping
//! pass, each held open on purpose (root and runc; ignored elsewhere, a failure under
//! `CI=true`). Each container gets a gone owner of a scope of its own, so the passes here touch
//! nothing else on the machine.

use super::runc::{harness_containers, reap_stale_of};
use super::ReapReport;
use crate::launcher::{EnvMounts, Launcher, ProcessSpec};
use crate::owner::{self, Owner};
use crate::runc::RuncLauncher;
use crate::teardown::runc_state_dir;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Why these tests cannot run here, if they cannot.
fn missing() -> Option<&'static str> {
    if !nix::unistd::geteuid().is_root() || crate::system::which("runc").is_none() {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI=true: needs root and runc"
        );
        return Some("needs root and runc");
    }
    None
}

/// A container prepared as a harness prepares one, then handed to a gone owner of its own
/// scope (the record in its bundle and in its config's annotation), and its `runc run` started.
struct Orphan {
    scope: String,
    id: String,
    bundle: PathBuf,
    runc: Child,
    guard: Option<Box<dyn Send + Sync>>,
    _scratch: tempfile::TempDir,
}

impl Orphan {
    /// With `hook_folder`, runc's creation waits in a `createRuntime` hook (before it writes
    /// `state.json`) until `release` appears there; the hook writes `started` when it runs.
    fn start(name: &str, hook_folder: Option<&Path>) -> Orphan {
        let scratch = tempfile::tempdir().expect("scratch");
        let launcher = RuncLauncher::new(
            crate::catalogue::spec("container").expect("spec"),
            EnvMounts::scratch(scratch.path()),
        )
        .expect("launcher");
        let prepared = launcher
            .prepare(&ProcessSpec {
                program: "/bin/sleep".into(),
                args: vec!["60".into()],
                env: Vec::new(),
                cwd: scratch.path().to_path_buf(),
            })
            .expect("prepare");
        let (id, bundle) = launcher.prepared().pop().expect("one container");
        let scope = format!("reap-window-{name}-{}", std::process::id());
        let mut child = std::process::Command::new("true").spawn().expect("spawn");
        let gone = Owner {
            pid: child.id(),
            scope: scope.clone(),
            ..Owner::current(&id).expect("identity")
        };
        child.wait().expect("wait");
        let record = serde_json::to_string(&gone).expect("json");
        std::fs::write(bundle.join(owner::OWNER_FILE), &record).expect("record");
        let config_path = bundle.join("config.json");
        let mut config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&config_path).expect("config")).expect("json");
        config["annotations"][owner::OWNER_ANNOTATION] = record.into();
        if let Some(folder) = hook_folder {
            let wait = format!(
                "touch {f}/started; i=0; while [ ! -e {f}/release ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done",
                f = folder.display()
            );
            config["hooks"] = serde_json::json!({"createRuntime": [{"path": "/bin/sh", "args": ["sh", "-c", wait]}]});
        }
        std::fs::write(&config_path, config.to_string()).expect("config");
        let mut command = prepared.command.into_std();
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let runc = command.spawn().expect("runc run");
        Orphan {
            scope,
            id,
            bundle,
            runc,
            guard: Some(prepared.guard),
            _scratch: scratch,
        }
    }

    fn listed_status(&self) -> Option<String> {
        harness_containers()
            .expect("runc list")
            .into_iter()
            .find(|container| container.id == self.id)
            .map(|container| container.status)
    }

    /// What of the container is still there after a pass, and what the report misses.
    fn left_after(&mut self, report: &ReapReport) -> Vec<String> {
        let mut left = Vec::new();
        if !report.failed.is_empty() {
            left.push(format!("the pass failed: {:?}", report.failed));
        }
        if !report.containers.contains(&self.id) {
            left.push(format!("the report does not name {}: {report:?}", self.id));
        }
        if runc_state_dir().join(&self.id).exists() {
            left.push(format!("runc state {} remains", self.id));
        }
        if let Some(status) = self.listed_status() {
            left.push(format!("runc lists {} ({status})", self.id));
        }
        if self.bundle.exists() {
            left.push(format!("bundle {} remains", self.bundle.display()));
        }
        if matches!(self.runc.try_wait(), Ok(None)) {
            left.push("its `runc run` still runs".into());
        }
        // Placed by runc's default (no cell cgroup here): at its id, in every hierarchy.
        let relative = Path::new(&self.id);
        let cgroups = crate::cgroup::unified_mount()
            .map(|unified| unified.join(relative))
            .into_iter()
            .chain(crate::cgroup::v1_mirrors(relative));
        for cgroup in cgroups.filter(|folder| folder.exists()) {
            left.push(format!("cgroup {} remains", cgroup.display()));
        }
        left
    }
}

impl Drop for Orphan {
    fn drop(&mut self) {
        let _ = self.runc.kill();
        let _ = self.runc.wait();
        drop(self.guard.take());
        let _ = std::fs::remove_dir_all(&self.bundle);
    }
}

fn wait_for(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {bound:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A killed harness's `runc run` is still creating its container when the next harness's pass
/// runs: runc has a state folder without `state.json`, which `runc list` does not show. The
/// pass must stop the creation; before, the container appeared after it and, stopped by the
/// run cgroup's reaping, stayed.
#[test]
fn a_container_still_being_created_by_a_killed_harness_is_reaped_needs_root_runc() {
    if let Some(why) = missing() {
        eprintln!("ignored: {why}");
        return;
    }
    let hook = tempfile::tempdir().expect("hook folder");
    let mut orphan = Orphan::start("creating", Some(hook.path()));
    wait_for(
        "the createRuntime hook started",
        Duration::from_secs(30),
        || hook.path().join("started").exists(),
    );
    assert!(
        runc_state_dir().join(&orphan.id).exists() && orphan.listed_status().is_none(),
        "the window is not open: runc state {}, listed {:?}",
        runc_state_dir().join(&orphan.id).exists(),
        orphan.listed_status()
    );

    let report = reap_stale_of(&orphan.scope);
    // A creator the pass left alone now finishes its container.
    std::fs::write(hook.path().join("release"), b"").expect("release");
    std::thread::sleep(Duration::from_secs(2));

    let left = orphan.left_after(&report);
    assert!(left.is_empty(), "{left:#?}");
    assert!(!report.killed.is_empty(), "{report:?}");
}

/// A killed harness's container left paused (frozen, in the v1 freezer of a hybrid machine) is
/// reaped like a running one: runc 1.1's `delete --force` thaws it for its SIGKILL.
#[test]
fn a_paused_container_of_a_killed_harness_is_reaped_needs_root_runc() {
    if let Some(why) = missing() {
        eprintln!("ignored: {why}");
        return;
    }
    let mut orphan = Orphan::start("paused", None);
    wait_for("the container running", Duration::from_secs(30), || {
        orphan.listed_status().as_deref() == Some("running")
    });
    orphan.runc.kill().expect("kill runc run");
    orphan.runc.wait().expect("wait runc run");
    let paused = std::process::Command::new("runc")
        .args(["pause", &orphan.id])
        .status()
        .expect("runc pause");
    assert!(paused.success());
    assert_eq!(orphan.listed_status().as_deref(), Some("paused"));

    let report = reap_stale_of(&orphan.scope);
    let left = orphan.left_after(&report);
    assert!(left.is_empty(), "{left:#?}");
}

/// A killed harness's container, stopped, whose bundle folder is gone (an earlier pass removed
/// it while the container was not listed yet): runc's state still names the gone owner.
#[test]
fn a_stopped_container_whose_bundle_is_gone_is_reaped_needs_root_runc() {
    if let Some(why) = missing() {
        eprintln!("ignored: {why}");
        return;
    }
    let mut orphan = Orphan::start("stopped", None);
    wait_for("the container running", Duration::from_secs(30), || {
        orphan.listed_status().as_deref() == Some("running")
    });
    // The harness's `runc run` dies with it (a run cgroup's reaping), its container stops.
    orphan.runc.kill().expect("kill runc run");
    orphan.runc.wait().expect("wait runc run");
    let killed = std::process::Command::new("runc")
        .args(["kill", &orphan.id, "KILL"])
        .status()
        .expect("runc kill");
    assert!(killed.success());
    wait_for("the container stopped", Duration::from_secs(30), || {
        orphan.listed_status().as_deref() == Some("stopped")
    });
    std::fs::remove_dir_all(&orphan.bundle).expect("remove the bundle");

    let report = reap_stale_of(&orphan.scope);
    let left = orphan.left_after(&report);
    assert!(left.is_empty(), "{left:#?}");
}

/// Containers deleted anywhere on the machine while a pass lists them (other harnesses' runs
/// end all the time): runc 1.1's `runc list` then fails as a whole (one call in ten under four
/// deleting loops), and the pass reaped nothing. Each listing here must answer.
#[test]
fn listing_the_containers_survives_state_folders_vanishing_meanwhile_needs_root_runc() {
    if let Some(why) = missing() {
        eprintln!("ignored: {why}");
        return;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let churners: Vec<_> = (0..4)
        .map(|k| {
            let stop = stop.clone();
            let folder = runc_state_dir().join(format!("ccf-vanishing-{}-{k}", std::process::id()));
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::create_dir(&folder);
                    let _ = std::fs::remove_dir(&folder);
                }
            })
        })
        .collect();
    let failures: Vec<String> = (0..30).filter_map(|_| harness_containers().err()).collect();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for churner in churners {
        churner.join().expect("churner");
    }
    assert!(
        failures.is_empty(),
        "{} of 30 listings failed: {failures:?}",
        failures.len()
    );
}
