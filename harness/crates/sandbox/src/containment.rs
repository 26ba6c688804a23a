//! Where every process of a cell lives: one cgroup per cell, below one cgroup per harness run,
//! in the cgroup v2 hierarchy.
//!
//! ```text
//! <cgroup2 mount>/ccf-harness/<scope>/run-<pid>-<start time>-<pid namespace>/<cell>-<n>/
//! ```
//!
//! Host processes join their cell's cgroup between fork and exec ([`crate::launcher`]);
//! a container's `runc run` joins it the same way, so runc's init and everything in the
//! container start below it. Membership is inherited and cannot be dropped the way a session, a
//! process group, a parent or `TMPDIR` can, so everything a cell started is listed and killed
//! (with `cgroup.kill`) when its [`CellCgroup`] is released or dropped, at the harness's
//! shutdown ([`crate::teardown`]), and, when the harness itself was SIGKILLed, by the
//! next harness to start ([`crate::reap`]): the run folder's name is its owner record
//! (the same identity as a runc bundle's, [`crate::owner`]), so a run whose owner is
//! gone is reaped and a live parallel run is never touched.
//!
//! The scope (`HARNESS_CONTAINMENT_SCOPE`, default `default`, [`crate::owner::scope`])
//! separates harnesses that must not reap each other's leftovers (a test that kills harnesses on
//! a shared machine gives its harnesses their own scope); runc bundles carry it in their owner
//! record too.
//!
//! Without root or a cgroup v2 hierarchy there is no containment: cells still run, the `TMPDIR`
//! sweep of [`crate::reap`] is all that remains, and a warning says so.

use crate::cgroup::{self, Cgroup, Joiner};
use crate::owner::{scope, Owner};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The folder below the cgroup v2 mount that holds every harness's runs.
pub const ROOT_NAME: &str = "ccf-harness";
pub(crate) const RUN_PREFIX: &str = "run-";

/// `<cgroup2 mount>/ccf-harness/<scope>`, when containment is possible here.
pub fn scope_folder() -> Option<PathBuf> {
    if !nix::unistd::geteuid().is_root() {
        return None;
    }
    Some(cgroup::unified_mount()?.join(ROOT_NAME).join(scope()))
}

/// The name of this process's run folder: its owner identity.
fn run_name(owner: &Owner) -> Option<String> {
    let namespace = owner
        .pid_namespace
        .strip_prefix("pid:[")?
        .strip_suffix(']')?;
    Some(format!(
        "{RUN_PREFIX}{}-{}-{namespace}",
        owner.pid, owner.start_time
    ))
}

/// The owner a run folder's name records; `None` for a name that is not a run's.
pub(crate) fn owner_of_run(name: &str) -> Option<Owner> {
    let mut parts = name.strip_prefix(RUN_PREFIX)?.split('-');
    let pid = parts.next()?.parse().ok()?;
    let start_time = parts.next()?.parse().ok()?;
    let namespace: u64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    // cgroupfs does not survive a reboot: a folder seen now is from this boot.
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()?
        .trim()
        .to_string();
    Some(Owner {
        container: name.to_string(),
        pid,
        start_time,
        boot_id,
        pid_namespace: format!("pid:[{namespace}]"),
        scope: scope(),
    })
}

/// This process's run cgroup, created on first use; `None` when containment is not possible
/// (the reason is logged once).
static RUN: OnceLock<Option<Cgroup>> = OnceLock::new();

fn run_cgroup() -> Option<&'static Cgroup> {
    RUN.get_or_init(|| {
        let created = (|| -> Result<Cgroup> {
            let folder = scope_folder().ok_or_else(|| {
                anyhow::anyhow!("needs root and a cgroup v2 hierarchy with cgroup.kill")
            })?;
            let owner = Owner::current(ROOT_NAME)?;
            let name = run_name(&owner).ok_or_else(|| {
                anyhow::anyhow!("unreadable pid namespace {}", owner.pid_namespace)
            })?;
            Cgroup::create(&folder.join(name))
        })();
        match created {
            Ok(cgroup) => {
                crate::teardown::register_run_cgroup(&cgroup);
                // SAFETY: registering a plain `extern "C"` function that touches no locks.
                unsafe {
                    libc::atexit(destroy_run_at_exit);
                }
                Some(cgroup)
            }
            Err(err) => {
                tracing::warn!(target: "notice",
                    "harness: no process containment ({err:#}); processes that leave a cell's \
                     TMPDIR behind cannot be found if the harness is killed"
                );
                None
            }
        }
    })
    .as_ref()
}

/// At `exit` (the end of `main`, `std::process::exit`): whatever is still in this process's
/// run cgroup goes with it, so that a process that ends without the shutdown path (a test
/// binary, another subcommand) leaves neither processes nor an empty run cgroup behind.
extern "C" fn destroy_run_at_exit() {
    if let Some(Some(run)) = RUN.get() {
        let _ = run.destroy();
    }
}

/// One cell's cgroup. Owned: [`CellCgroup::release`] or dropping it kills everything still in
/// it and removes it; until then [`crate::teardown`] lists it.
#[derive(Debug)]
pub struct CellCgroup {
    cgroup: Cgroup,
    released: bool,
}

impl CellCgroup {
    /// The cgroup of the cell whose folder is `cell_root`, below this process's run cgroup.
    /// `None` without containment.
    pub fn create(cell_root: &Path) -> Result<Option<CellCgroup>> {
        let Some(run) = run_cgroup() else {
            return Ok(None);
        };
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = cell_root
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_else(|| "cell".into());
        // A cgroup name must be one path component; the counter keeps two attempts (and two
        // out roots) apart.
        let name = format!(
            "{}-{}",
            base.replace(['/', '\n'], "_"),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let cgroup = Cgroup::create(&run.path.join(name))?;
        crate::teardown::register_cgroup(&cgroup);
        Ok(Some(CellCgroup {
            cgroup,
            released: false,
        }))
    }

    /// The cgroup folder.
    pub fn path(&self) -> &Path {
        &self.cgroup.path
    }

    /// What a forked child runs to join this cgroup (see [`Cgroup::joiner`]).
    pub fn joiner(&self) -> Result<Joiner> {
        self.cgroup.joiner()
    }

    /// Kill everything still in the cgroup, remove it, stop listing it. Returns the processes
    /// that were killed.
    pub fn release(mut self) -> Result<Vec<(i32, String)>> {
        self.released = true;
        crate::teardown::forget_cgroup(&self.cgroup);
        self.cgroup.destroy()
    }
}

impl Drop for CellCgroup {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        crate::teardown::forget_cgroup(&self.cgroup);
        match self.cgroup.destroy() {
            Ok(killed) if !killed.is_empty() => tracing::warn!(target: "notice",
                "harness: killed {} process(es) of {}: {}",
                killed.len(),
                self.cgroup.path.display(),
                cgroup::describe(&killed)
            ),
            Ok(_) => {}
            Err(err) => tracing::warn!(target: "notice",
                "harness: cleaning up {}: {err:#}",
                self.cgroup.path.display()
            ),
        }
    }
}

/// The `cgroupsPath` of a runc container that must live below `cell` (a cgroup folder in the
/// v2 hierarchy): relative, so that runc puts it below the cell's cgroup in the v2 hierarchy
/// (and below its own cgroups in the v1 ones of a hybrid machine).
pub fn container_cgroups_path(cell: &Path, container: &str) -> Option<String> {
    let relative = cgroup::relative_to_mount(cell)?.join(container);
    // Hybrid (v1 hierarchies next to the v2 one): runc puts a relative path at the root of the
    // v2 hierarchy and below its own cgroup in each v1 one (which keeps the container inside
    // the v1 limits the harness runs under). Pure v2: runc would join a relative path to the
    // *parent* of its own cgroup, so the path is given absolute, from the hierarchy's root.
    // (This machine is hybrid; the pure v2 form follows runc's documented semantics.)
    let hybrid = !cgroup::v1_mirrors(Path::new("")).is_empty();
    let path = relative.to_string_lossy().into_owned();
    Some(if hybrid { path } else { format!("/{path}") })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_name_records_its_owner_and_reads_back() {
        let owner = Owner::current(ROOT_NAME).expect("identity");
        let name = run_name(&owner).expect("name");
        let read = owner_of_run(&name).expect("parses");
        assert_eq!((read.pid, read.start_time), (owner.pid, owner.start_time));
        assert_eq!(read.pid_namespace, owner.pid_namespace);
        assert_eq!(read.liveness(), crate::owner::Liveness::Alive, "{name}");
        assert!(owner_of_run("run-1-2").is_none());
        assert!(owner_of_run("other-1-2-3").is_none());
        assert!(owner_of_run("run-1-2-3-4").is_none());
    }
}
