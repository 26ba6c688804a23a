//! Every reaper, in one module. Two moments:
//!
//! - **after a cell** ([`after_cell`]): everything the cell started and left running — its
//!   cgroup emptied and removed, and the processes that carry the cell's `TMPDIR` (the sweep
//!   that remains without containment). The cell's owner calls it once, when the cell ends or is
//!   dropped.
//! - **before the first cell of a process** ([`stale_once`]): what harnesses that were killed
//!   left behind (SIGKILL runs no cleanup) — runc containers and bundle folders ([`stale_runc`]),
//!   Docker containers ([`stale_docker`]), run cgroups ([`stale_runs`]) — but only what belongs
//!   to this containment scope and to an owner ([`crate::owner`]) that is gone; and virtual
//!   machines of the kvm runtime with their state folders ([`stale_kvm`]).

mod cell;
mod docker;
mod kvm;
mod runc;
mod runs;

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
    /// `(container id or bundle folder, why it was left alone)`, for the harness's own prefix.
    pub left_alone: Vec<(String, String)>,
    /// Why the pass stopped short (runc list failed, or the time bound ran out).
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

/// Once per process: reap runc leftovers (when runc is usable here), Docker leftovers (when an
/// engine answers here), then stale run cgroups. Later calls return at once.
pub fn stale_once() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if nix::unistd::geteuid().is_root() && which("runc").is_some() {
            let report = stale_runc();
            if let Some(reason) = &report.incomplete {
                tracing::warn!("reaping leftovers of killed harness runs stopped short: {reason}");
            }
        }
        if crate::docker::engine_reachable().is_ok() && which("docker").is_some() {
            let report = stale_docker();
            if let Some(reason) = &report.incomplete {
                tracing::warn!(
                    "reaping Docker leftovers of killed harness runs stopped short: {reason}"
                );
            }
        }
        let report = stale_kvm();
        if let Some(reason) = &report.incomplete {
            tracing::warn!(
                "reaping virtual machines of killed harness runs stopped short: {reason}"
            );
        }
        let report = stale_runs();
        for (path, why) in &report.left_alone {
            tracing::debug!(cgroup = %path.display(), "left alone: {why}");
        }
    });
}
