//! Every reaper, in one module. Two moments:
//!
//! - **after a cell** ([`after_cell`]): everything the cell started and left running — its
//!   cgroup emptied and removed, and the processes that carry the cell's `TMPDIR` (the sweep
//!   that remains without containment). The cell's owner calls it once, when the cell ends or is
//!   dropped.
//! - **before the first cell of a process** ([`stale_once`]): what harnesses that were killed
//!   left behind (SIGKILL runs no cleanup) — run cgroups and every process in them ([`stale_runs`],
//!   first: the `runc run` of a killed harness may still be creating a container), runc
//!   containers and bundle folders ([`stale_runc`]), Docker containers ([`stale_docker`]) — but
//!   only what belongs to this containment scope and to an owner ([`crate::owner`]) that is
//!   gone; and virtual machines of the kvm runtime with their state folders ([`stale_kvm`]). A
//!   leftover of a gone owner that cannot be removed makes [`stale_once`] an error naming it.

mod cell;
mod creators;
mod docker;
mod kvm;
mod runc;
mod runs;
#[cfg(test)]
mod windows;

pub use cell::after_cell;
pub use runc::{harness_containers, ListedContainer, REAP_DEADLINE as RUNC_REAP_DEADLINE};
pub use runs::StaleRuns;

use crate::system::which;
use std::path::PathBuf;
use std::sync::OnceLock;

/// What one reaping pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReapReport {
    /// Containers of a gone owner that were killed and deleted.
    pub containers: Vec<String>,
    /// Folders of a gone owner that were removed: runc bundles, Docker overlay folders.
    pub bundles: Vec<PathBuf>,
    /// Processes killed: a killed harness's `runc run` still making a container.
    pub killed: Vec<(i32, String)>,
    /// `(container id or bundle folder, why it was left alone)`, for the harness's own prefix:
    /// not this pass's to remove (a live owner, another scope, no owner record).
    pub left_alone: Vec<(String, String)>,
    /// `(what, why it stays)`: leftovers of a gone owner of this scope that could not be
    /// removed.
    pub failed: Vec<(String, String)>,
    /// Why the pass stopped short (runc could not be asked, or the time bound ran out).
    pub incomplete: Option<String>,
}

/// One pass over the runc containers and bundle folders of killed harnesses.
pub fn stale_runc() -> ReapReport {
    runc::reap_stale()
}

/// One pass over the Docker containers of killed harnesses.
pub fn stale_docker() -> ReapReport {
    docker::reap_stale()
}

/// One pass over the virtual machines (QEMU and state folders) of killed harnesses.
pub fn stale_kvm() -> ReapReport {
    kvm::reap_stale(&std::env::temp_dir())
}

/// One pass over the run cgroups of killed harnesses.
pub fn stale_runs() -> StaleRuns {
    runs::reap_stale_runs()
}

impl ReapReport {
    /// What this pass could not do, one line each: a leftover that stays, or why it stopped
    /// short.
    pub fn problems(&self) -> Vec<String> {
        self.failed
            .iter()
            .map(|(what, why)| format!("{what}: {why}"))
            .chain(
                self.incomplete
                    .iter()
                    .map(|why| format!("the pass stopped short: {why}")),
            )
            .collect()
    }
}

/// Once per process: stale run cgroups (their processes killed first), runc leftovers (when
/// runc is usable here), Docker leftovers (when an engine answers here), then virtual machines.
/// Later calls return the first call's outcome at once: an error names every leftover of a
/// killed harness that stays (fail closed — a run must not start among them unnoticed).
pub fn stale_once() -> Result<(), String> {
    static ONCE: OnceLock<Result<(), String>> = OnceLock::new();
    ONCE.get_or_init(|| {
        let mut problems = Vec::new();
        let runs = stale_runs();
        for (path, why) in &runs.left_alone {
            tracing::debug!(cgroup = %path.display(), "left alone: {why}");
        }
        problems.extend(
            runs.failed
                .iter()
                .map(|(path, why)| format!("cgroup {}: {why}", path.display())),
        );
        if nix::unistd::geteuid().is_root() && which("runc").is_some() {
            problems.extend(
                stale_runc()
                    .problems()
                    .into_iter()
                    .map(|p| format!("runc {p}")),
            );
        }
        if crate::docker::engine_reachable().is_ok() && which("docker").is_some() {
            let report = stale_docker();
            // Docker's own listing failing says nothing about this run's runtimes: a warning.
            if let Some(reason) = &report.incomplete {
                tracing::warn!(
                    "reaping Docker leftovers of killed harness runs stopped short: {reason}"
                );
            }
            problems.extend(
                report
                    .failed
                    .iter()
                    .map(|(what, why)| format!("Docker container {what}: {why}")),
            );
        }
        let report = stale_kvm();
        if let Some(reason) = &report.incomplete {
            tracing::warn!(
                "reaping virtual machines of killed harness runs stopped short: {reason}"
            );
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "what killed harness runs left could not all be removed: {}",
                problems.join("; ")
            ))
        }
    })
    .clone()
}
