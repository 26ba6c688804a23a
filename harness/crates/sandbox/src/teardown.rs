//! What this process must tear down before it ends: every runc container a launcher prepared
//! (until its guard has removed it), every cell cgroup (until its owner has released it) and
//! every virtual machine it booted (`crate::kvm::machine`).
//! Guards and owners remove their own entries; [`tear_down_everything`] removes whatever is
//! still listed, for the one caller that cannot wait for them: the binary's signal handler (and
//! the end of a run, as a last sweep). Nothing here installs a signal handler: that is the
//! binary's decision.

use crate::cgroup::Cgroup;
use crate::system::run_bounded;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
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

fn containers() -> &'static Mutex<BTreeMap<String, Registered>> {
    static LIVE: OnceLock<Mutex<BTreeMap<String, Registered>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

fn cgroups() -> &'static Mutex<BTreeMap<PathBuf, Cgroup>> {
    static LIVE: OnceLock<Mutex<BTreeMap<PathBuf, Cgroup>>> = OnceLock::new();
    LIVE.get_or_init(Default::default)
}

/// List a runc container (prepared in `bundle`) until [`remove_container`] removes it.
pub fn register_container(id: &str, bundle: &Path) {
    containers()
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
pub fn live_container_ids() -> Vec<String> {
    containers()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .keys()
        .cloned()
        .collect()
}

/// Remove one container (kill, delete, bundle) and forget it. `keep_bundle` leaves the bundle
/// folder for a user who wants to rerun it by hand.
pub fn remove_container(id: &str, keep_bundle: bool) {
    let entry = containers()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .remove(id);
    destroy_container(id);
    if let Some(entry) = entry {
        if !keep_bundle {
            if let Err(err) = remove_bundle(&entry.bundle) {
                // Listed again, so that the last sweep of this process, which comes after the
                // cells' cgroups and the processes in them are gone, tries once more (measured
                // under load: a SIGINT-stopped run left a bundle a cell's process was still
                // writing into while its guard removed it).
                tracing::debug!(container = id, "bundle kept for the last sweep: {err}");
                containers()
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .insert(id.to_string(), entry);
            }
        }
    }
}

/// How often a bundle's removal is tried before it is left for a later sweep or run.
const BUNDLE_REMOVAL_ATTEMPTS: u32 = 3;

/// Remove a bundle folder; a folder already gone is removed. Retried a few times, 50 ms apart:
/// `remove_dir_all` fails with "directory not empty" when a file appears while it runs.
fn remove_bundle(bundle: &Path) -> std::io::Result<()> {
    let mut attempt = 1;
    loop {
        match std::fs::remove_dir_all(bundle) {
            Ok(()) => return Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(err) if attempt >= BUNDLE_REMOVAL_ATTEMPTS => return Err(err),
            Err(_) => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn run_cgroup() -> &'static Mutex<Option<Cgroup>> {
    static RUN: OnceLock<Mutex<Option<Cgroup>>> = OnceLock::new();
    RUN.get_or_init(Default::default)
}

/// List this process's run cgroup (the parent of its cells' cgroups): removed last.
pub fn register_run_cgroup(cgroup: &Cgroup) {
    *run_cgroup().lock().unwrap_or_else(|p| p.into_inner()) = Some(cgroup.clone());
}

/// List a cell's cgroup until [`forget_cgroup`].
pub fn register_cgroup(cgroup: &Cgroup) {
    cgroups()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(cgroup.path.clone(), cgroup.clone());
}

/// Stop listing a cgroup its owner has released.
pub fn forget_cgroup(cgroup: &Cgroup) {
    cgroups()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&cgroup.path);
}

/// Remove everything this process still has: the listed cell cgroups (and what is in them), the
/// run's own cgroup, then the listed runc containers and their bundles. Errors are printed: at
/// the end of a process there is nobody left to return them to.
pub fn tear_down_everything() {
    let listed: Vec<Cgroup> =
        std::mem::take(&mut *cgroups().lock().unwrap_or_else(|p| p.into_inner()))
            .into_values()
            .collect();
    for cgroup in listed {
        match cgroup.destroy() {
            Ok(killed) if !killed.is_empty() => tracing::warn!(target: "notice",
                "harness: killed {} process(es) of {}: {}",
                killed.len(),
                cgroup.path.display(),
                crate::cgroup::describe(&killed)
            ),
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(target: "notice", "harness: cleaning up {}: {err:#}", cgroup.path.display())
            }
        }
    }
    let run = run_cgroup()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if let Some(run) = run {
        if let Err(err) = run.destroy() {
            tracing::warn!(target: "notice", "harness: removing {}: {err:#}", run.path.display());
        }
    }
    for id in live_container_ids() {
        remove_container(&id, false);
    }
    for (id, entry) in containers()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .iter()
    {
        tracing::warn!(target: "notice",
            "harness: could not remove the bundle {} of container {id}; the next run removes it",
            entry.bundle.display()
        );
    }
    crate::kvm::machine::shut_down_all();
}

/// `runc kill` + `runc delete -f`, retried while runc may still be creating the container
/// (a container that runc has not written down yet cannot be deleted yet).
pub fn destroy_container(id: &str) {
    destroy_container_until(id, Instant::now() + REMOVAL_DEADLINE);
}

/// [`destroy_container`], retried until `deadline`. Returns whether runc's state of it is gone.
pub fn destroy_container_until(id: &str, deadline: Instant) -> bool {
    // No state: `runc run` deleted the container itself when its process ended (the usual
    // end), or never created it. `runc kill` and `runc delete` would only fail (two runc starts,
    // ~20 ms); what the container ran was in the cell's cgroup, which is emptied on its own.
    if !runc_state_dir().join(id).exists() {
        return true;
    }
    loop {
        let _ = run_bounded(
            "runc",
            &["kill", id, "KILL"],
            Stdio::null(),
            RUNC_COMMAND_TIMEOUT,
        );
        let _ = run_bounded(
            "runc",
            &["delete", "--force", id],
            Stdio::null(),
            RUNC_COMMAND_TIMEOUT,
        );
        let state_gone = !runc_state_dir().join(id).exists();
        if state_gone || Instant::now() >= deadline {
            if !state_gone {
                tracing::warn!(
                    container = id,
                    "runc still has state for the container after cleanup"
                );
            }
            return state_gone;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// runc's state folder for root (runc's default `--root`).
pub fn runc_state_dir() -> PathBuf {
    PathBuf::from("/run/runc")
}

/// The standard output of a successful `runc ARGS`; `None` when it fails or overruns its bound.
pub fn runc_stdout(args: &[&str]) -> std::io::Result<Option<Vec<u8>>> {
    crate::system::command_stdout("runc", args, RUNC_COMMAND_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_that_cannot_be_removed_stays_listed_for_the_last_sweep() {
        let scratch = tempfile::tempdir().unwrap();
        // A file where the bundle folder should be: `remove_dir_all` fails on it, as it does on
        // a folder a live process still writes into.
        let bundle = scratch.path().join("ccf-bundle-not-a-folder");
        std::fs::write(&bundle, "x").unwrap();
        let id = "ccf-teardown-test-unremovable";
        register_container(id, &bundle);
        remove_container(id, false);
        assert!(
            live_container_ids().iter().any(|live| live == id),
            "a failed removal is forgotten"
        );
        std::fs::remove_file(&bundle).unwrap();
        std::fs::create_dir(&bundle).unwrap();
        remove_container(id, false);
        assert!(!bundle.exists(), "the second attempt removes the bundle");
        assert!(!live_container_ids().iter().any(|live| live == id));
    }
}
