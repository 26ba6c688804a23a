//! Running a process in an environment with runc: one bundle and one container per process.

use crate::launcher::{hand_over, EnvMounts, Launcher, PreparedCommand, ProcessSpec};
use crate::oci::{self, ContainerInputs};
use crate::overlays::{bwrap_overlays, bwrap_targets, passwd_overlay, SystemBwrap};
use crate::spec::{ContainerSpec, EnvSpec};
use crate::{containment, owner, teardown};
use anyhow::{Context, Result};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Prefix of every container id and bundle folder this module creates (cleanup checks use it).
pub const ID_PREFIX: &str = "ccf-";
/// Prefix of every bundle folder (the reaping of a killed harness's leftovers checks it).
pub const BUNDLE_PREFIX: &str = "ccf-bundle-";

/// A launcher that runs each process in its own runc container built from `spec`.
#[derive(Debug, Clone)]
pub struct RuncLauncher {
    env: EnvSpec,
    container: ContainerSpec,
    mounts: EnvMounts,
    keep_bundles: bool,
    /// The cell's cgroup (v2 folder): each container is created below it.
    cgroup: Option<PathBuf>,
    /// `(container id, bundle)` of every process prepared, for users who rerun them by hand.
    prepared: PreparedList,
}

/// `(container id, bundle)` of every process a launcher prepared, shared with its creator.
pub type PreparedList = std::sync::Arc<std::sync::Mutex<Vec<(String, PathBuf)>>>;

impl RuncLauncher {
    pub fn new(env: EnvSpec, mounts: EnvMounts) -> Result<Self> {
        let container = env
            .container
            .clone()
            .with_context(|| format!("environment `{}` is not a container", env.name))?;
        Ok(RuncLauncher {
            env,
            container,
            mounts,
            keep_bundles: false,
            cgroup: None,
            prepared: Default::default(),
        })
    }

    /// Create every container below the cell cgroup `cgroup`, so that killing the cell reaches
    /// the container too.
    pub fn in_cgroup(mut self, cgroup: &Path) -> Self {
        self.cgroup = Some(cgroup.to_path_buf());
        self
    }

    /// Leave each bundle folder behind after the run and list it in `into` (for
    /// `harness repro --keep`, which prints how to rerun them).
    pub fn keeping_bundles(mut self, into: PreparedList) -> Self {
        self.keep_bundles = true;
        self.prepared = into;
        self
    }

    /// `(container id, bundle)` of every process prepared so far.
    pub fn prepared(&self) -> Vec<(String, PathBuf)> {
        self.prepared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

/// The command that reruns a kept bundle by hand (as root): the same private read-only bind of
/// the host root the launcher makes, then runc in the foreground.
pub fn rerun_command(id: &str, bundle: &Path) -> String {
    let rootfs = bundle.join("rootfs");
    format!(
        "unshare --mount --propagation private sh -c 'mount --bind / {r} && mount -o remount,bind,ro {r} && exec runc run --bundle {b} {id}'",
        r = rootfs.display(),
        b = bundle.display()
    )
}

/// Removes the container, then the bundle, when dropped.
pub struct ContainerGuard {
    pub id: String,
    pub bundle: PathBuf,
    keep_bundle: bool,
}

impl Drop for ContainerGuard {
    fn drop(&mut self) {
        teardown::remove_container(&self.id, self.keep_bundle);
        if self.keep_bundle {
            // Kept for a rerun by hand: without an owner record no later run reaps it.
            owner::forget(&self.bundle);
        }
    }
}

/// A container id unique on this machine: prefix, our pid, a counter, and clock bits so that a
/// reused pid does not collide with a leftover of a killed process.
pub fn unique_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{ID_PREFIX}{}-{}-{:08x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

impl Launcher for RuncLauncher {
    fn environment(&self) -> &str {
        self.env.name
    }

    fn cannot_start(&self, program: &Path) -> Option<String> {
        let bound: Vec<PathBuf> = std::iter::once(&self.mounts.scratch)
            .chain(&self.mounts.writable)
            .chain(&self.mounts.readonly)
            .cloned()
            .collect();
        crate::reachable::container_cannot_start(self.env.name, self.container.uid, &bound, program)
    }

    /// Not with kept bundles: a bundle rerun by hand must run the process itself.
    fn prestart_pays(&self) -> bool {
        !self.keep_bundles
    }

    fn prepare(&self, process: &ProcessSpec) -> Result<PreparedCommand> {
        let id = unique_id();
        let owner = owner::Owner::current(&id)?;
        // The owner in the name too: a harness killed before it wrote the record leaves a
        // folder the next one can still judge.
        let bundle = tempfile::Builder::new()
            .prefix(&format!("{BUNDLE_PREFIX}{}", owner.name_part()?))
            .tempdir()
            .context("creating a bundle folder")?
            .keep();
        // From here on the guard owns the bundle, also when the rest of `prepare` fails.
        teardown::register_container(&id, &bundle);
        let guard = ContainerGuard {
            id: id.clone(),
            bundle: bundle.clone(),
            keep_bundle: self.keep_bundles,
        };
        owner::write(&bundle, &owner)?;
        let rootfs = bundle.join("rootfs");
        std::fs::create_dir(&rootfs)?;
        let inputs = self.inputs(process, &bundle, rootfs.clone())?;
        let mut config = oci::render(&self.container, &inputs)?;
        // Not for a kept bundle: rerun by hand after this harness ended, its container would
        // carry a gone owner.
        if !self.keep_bundles {
            config.set_annotations(Some(
                [(
                    owner::OWNER_ANNOTATION.to_string(),
                    serde_json::to_string(&owner)?,
                )]
                .into(),
            ));
        }
        // Below the cell's cgroup, so that killing the cell reaches the container too. Not for
        // a kept bundle: rerun by hand later, it must not land in the cgroup of a run that a
        // later harness reaps as gone.
        let cgroups_path = self
            .cgroup
            .as_deref()
            .filter(|_| !self.keep_bundles)
            .and_then(|cell| containment::container_cgroups_path(cell, &id));
        if let Some(path) = cgroups_path {
            if let Some(linux) = config.linux_mut() {
                linux.set_cgroups_path(Some(path.into()));
            }
        }
        std::fs::write(bundle.join("config.json"), oci::to_json(&config)?)?;
        self.prepared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((id.clone(), bundle.clone()));

        let mut command = tokio::process::Command::new("runc");
        command
            .arg("run")
            .arg("--bundle")
            .arg(&bundle)
            .arg(&id)
            .env_clear()
            .env(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )
            .kill_on_drop(true);
        let rootfs_for_child = rootfs.clone();
        // SAFETY: the closure runs in the forked child before exec and only makes system calls
        // (nix's mount/unshare convert paths on the stack, no allocation for short paths).
        unsafe {
            command.pre_exec(move || mount_host_root_privately(&rootfs_for_child));
        }
        Ok(PreparedCommand {
            command,
            guard: Box::new(guard),
        })
    }
}

/// In a new, private mount namespace (only runc and the container see it, and it disappears
/// with them, so no host mount can outlive the run): bind the host root on `rootfs`, read-only.
fn mount_host_root_privately(rootfs: &Path) -> std::io::Result<()> {
    use nix::mount::{mount, MsFlags};
    use nix::sched::{unshare, CloneFlags};
    let to_io = |err: nix::errno::Errno| std::io::Error::from_raw_os_error(err as i32);
    unshare(CloneFlags::CLONE_NEWNS).map_err(to_io)?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(to_io)?;
    mount(
        Some("/"),
        rootfs,
        None::<&str>,
        MsFlags::MS_BIND,
        None::<&str>,
    )
    .map_err(to_io)?;
    mount(
        None::<&str>,
        rootfs,
        None::<&str>,
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY,
        None::<&str>,
    )
    .map_err(to_io)
}

impl RuncLauncher {
    fn inputs(
        &self,
        process: &ProcessSpec,
        bundle: &Path,
        rootfs: PathBuf,
    ) -> Result<ContainerInputs> {
        let mut writable = vec![self.mounts.scratch.clone()];
        writable.extend(self.mounts.writable.iter().cloned());
        let mut readonly = self.mounts.readonly.clone();
        let non_root = self.container.uid != 0;

        let mut masks = Vec::new();
        if non_root {
            for folder in &writable {
                hand_over(folder, self.container.uid, self.container.gid)?;
            }
            // A program below a folder the uid cannot enter (a 0700 home) is bound read-only
            // with its package folder, under a tmpfs that hides the rest of that folder.
            if blocking_ancestor(&process.program, self.container.uid).is_some() {
                let package = process
                    .program
                    .parent()
                    .and_then(Path::parent)
                    .context("the program path has no package folder")?;
                if !readonly.iter().any(|folder| folder == package) {
                    readonly.push(package.to_path_buf());
                }
            }
            for folder in writable.iter().chain(readonly.iter()) {
                if let Some(ancestor) = blocking_ancestor(folder, self.container.uid) {
                    if !masks.contains(&ancestor) {
                        masks.push(ancestor);
                    }
                }
            }
            for index in 0..masks.len() {
                let empty = bundle.join(format!("mask-{index}"));
                std::fs::create_dir(&empty)?;
                std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o755))?;
            }
        }

        let mut file_overlays = bwrap_overlays(
            self.env.name,
            self.container.bwrap,
            &bwrap_targets(
                SystemBwrap::IfPresent,
                Some(&process.program),
                &self.mounts.bundled_bwraps,
            ),
            bundle,
        )?;
        file_overlays.extend(passwd_overlay(
            self.container.uid,
            self.container.gid,
            bundle,
        )?);

        Ok(ContainerInputs {
            rootfs,
            args: std::iter::once(process.program.to_string_lossy().into_owned())
                .chain(process.args.iter().cloned())
                .collect(),
            env: process.env.clone(),
            cwd: process.cwd.clone(),
            writable,
            readonly,
            masks,
            file_overlays,
        })
    }
}

pub use crate::reachable::blocking_ancestor;

#[cfg(test)]
mod tests {
    use super::*;

    /// A `codex-resources/bwrap` below a bound folder (a drivers file's folder holding an
    /// earlier run's evidence) is not covered; the declared one and the program's package's are.
    #[test]
    fn only_declared_and_the_programs_bundled_bubblewraps_are_covered() {
        let dir = tempfile::tempdir().unwrap();
        let bundled_in = |package: &Path| {
            let bwrap = package.join("codex-resources").join("bwrap");
            std::fs::create_dir_all(bwrap.parent().unwrap()).unwrap();
            std::fs::write(&bwrap, b"").unwrap();
            bwrap
        };
        let bound = dir.path().join("drivers");
        let stale = bundled_in(&bound.join("out").join("cell").join("fake-codex-package"));
        let declared = bundled_in(&dir.path().join("declared"));
        let program_package = dir.path().join("codex");
        let programs = bundled_in(&program_package);
        let bundle = dir.path().join("bundle");
        std::fs::create_dir(&bundle).unwrap();
        let launcher = RuncLauncher::new(
            crate::catalogue::spec("no-bwrap").unwrap(),
            EnvMounts {
                scratch: dir.path().join("scratch"),
                readonly: vec![bound],
                bundled_bwraps: vec![declared.clone()],
                ..EnvMounts::default()
            },
        )
        .unwrap();
        let process = ProcessSpec {
            program: program_package.join("bin").join("codex"),
            args: Vec::new(),
            env: Vec::new(),
            cwd: dir.path().to_path_buf(),
        };
        let inputs = launcher
            .inputs(&process, &bundle, bundle.join("rootfs"))
            .unwrap();
        let covered: Vec<&PathBuf> = inputs.file_overlays.iter().map(|(_, to)| to).collect();
        assert!(covered.contains(&&declared), "{covered:?}");
        assert!(covered.contains(&&programs), "{covered:?}");
        assert!(!covered.contains(&&stale), "{covered:?}");
    }
}
