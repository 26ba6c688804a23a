//! Reaping what a killed harness left behind, at the next harness's start: its runc containers
//! and bundles ([`crate::env::stale`]), then the processes and cgroups of its runs. Only what
//! belongs to this scope and to an owner that is gone is touched.

use super::{owner_of_run, scope_folder, Cgroup, RUN_PREFIX};
use std::path::PathBuf;
use std::sync::OnceLock;

/// What one pass over the run cgroups did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaleRuns {
    /// Run cgroups of a gone owner that were emptied and removed.
    pub removed: Vec<PathBuf>,
    /// Processes killed in them.
    pub killed: Vec<(i32, String)>,
    /// `(run cgroup, why it was left alone)`.
    pub left_alone: Vec<(PathBuf, String)>,
}

/// Once per process: reap runc leftovers (when runc is usable here), then stale run cgroups.
pub fn reap_leftovers_once() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if nix::unistd::geteuid().is_root() && crate::codex::provision::which("runc").is_some() {
            crate::env::stale::reap_once();
        }
        crate::env::docker_stale::reap_once();
        let report = reap_stale_runs();
        for (path, why) in &report.left_alone {
            tracing::debug!(cgroup = %path.display(), "left alone: {why}");
        }
    });
}

/// One pass: every run cgroup of this scope whose owner is gone is killed and removed.
pub fn reap_stale_runs() -> StaleRuns {
    let mut report = StaleRuns::default();
    let Some(folder) = scope_folder() else {
        return report;
    };
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return report;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(RUN_PREFIX) {
            continue;
        }
        let Some(owner) = owner_of_run(&name) else {
            report
                .left_alone
                .push((path, "not named like a run's cgroup".into()));
            continue;
        };
        let reason = match owner.gone() {
            Ok(reason) => reason,
            Err(why) => {
                report.left_alone.push((path, why));
                continue;
            }
        };
        let run = Cgroup { path: path.clone() };
        match super::destroy(&run) {
            Ok(killed) => {
                let listed = if killed.is_empty() {
                    "no process was left".to_string()
                } else {
                    format!("killed {}", super::describe(&killed))
                };
                eprintln!(
                    "harness: reaped cgroup {} left behind by a killed harness ({reason}); {listed}",
                    path.display()
                );
                report.killed.extend(killed);
                report.removed.push(path);
            }
            Err(err) => {
                eprintln!(
                    "harness: could not reap cgroup {} left behind by a killed harness: {err:#}",
                    path.display()
                );
                report.left_alone.push((path, format!("{err:#}")));
            }
        }
    }
    report
}
