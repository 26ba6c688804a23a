//! The run cgroups (and the processes in them) a killed harness left behind. Only what belongs
//! to this scope and to an owner that is gone is touched.

use crate::cgroup::{describe, Cgroup};
use crate::containment::{owner_of_run, scope_folder, RUN_PREFIX};
use std::path::PathBuf;

/// What one pass over the run cgroups did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaleRuns {
    /// Run cgroups of a gone owner that were emptied and removed.
    pub removed: Vec<PathBuf>,
    /// Processes killed in them.
    pub killed: Vec<(i32, String)>,
    /// `(run cgroup, why it was left alone)`: not this pass's (a live owner, another name).
    pub left_alone: Vec<(PathBuf, String)>,
    /// `(run cgroup, why it stays)`: of a gone owner, but it could not be emptied or removed.
    pub failed: Vec<(PathBuf, String)>,
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
        match run.destroy() {
            Ok(killed) => {
                let listed = if killed.is_empty() {
                    "no process was left".to_string()
                } else {
                    format!("killed {}", describe(&killed))
                };
                tracing::warn!(target: "notice",
                    "harness: reaped cgroup {} left behind by a killed harness ({reason}); {listed}",
                    path.display()
                );
                report.killed.extend(killed);
                report.removed.push(path);
            }
            Err(err) => {
                tracing::warn!(target: "notice",
                    "harness: could not reap cgroup {} left behind by a killed harness: {err:#}",
                    path.display()
                );
                report.failed.push((path, format!("{err:#}")));
            }
        }
    }
    report
}
