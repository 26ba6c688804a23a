//! Which runtime an environment runs on here, whether it can run at all, and a launcher for it:
//! the host for `local`, runc from a generated OCI bundle, Docker through testcontainers, or a
//! virtual machine for an environment of a real kernel.
//!
//! See `docs/environments.md` for what each environment restricts and what it stands for.

use crate::catalogue::spec;
use crate::launcher::{EnvMounts, Launcher, LocalLauncher};
use crate::system::which;
use crate::{docker, kvm, runc};
use anyhow::Result;
use std::path::PathBuf;
use std::sync::Arc;

/// Why an environment cannot run here (callers print `ignored: {reason}`, or fail under CI).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Missing {
    pub reason: String,
}

/// The container runtime an environment runs on here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// `local`: no container.
    Host,
    Runc,
    Docker,
    /// A virtual machine on a real Debian kernel ([`crate::kvm`]).
    Kvm,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Host => "host",
            Runtime::Runc => "runc",
            Runtime::Docker => "docker",
            Runtime::Kvm => "kvm",
        }
    }
}

/// Forces a runtime (`runc` or `docker`) instead of the automatic choice.
pub const RUNTIME_VAR: &str = "HARNESS_CONTAINER_RUNTIME";

fn runc_prerequisites() -> Result<(), String> {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("not root (runc needs root)");
    }
    if which("runc").is_none() {
        missing.push("runc is not installed (apt-get install runc)");
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

/// The runtime `name` runs on here: the host for `local`; runc when root and runc are there;
/// else a reachable Docker engine; `HARNESS_CONTAINER_RUNTIME=runc|docker` forces one.
pub fn select_runtime(name: &str) -> Result<Runtime, Missing> {
    let spec = spec(name).map_err(|err| Missing {
        reason: err.to_string(),
    })?;
    if which("bwrap").is_none() {
        return Err(Missing {
            reason: "bubblewrap is not installed (apt-get install bubblewrap)".into(),
        });
    }
    if spec.vm.is_some() {
        return kvm::prerequisites()
            .map(|_| Runtime::Kvm)
            .map_err(|reason| Missing {
                reason: format!("environment `{name}` runs in a virtual machine: {reason}"),
            });
    }
    if spec.container.is_none() {
        return Ok(Runtime::Host);
    }
    let forced = std::env::var(RUNTIME_VAR).unwrap_or_default();
    let runc = runc_prerequisites();
    let docker = docker::engine_reachable();
    let missing = |reason: String| Missing { reason };
    match forced.as_str() {
        "runc" => runc.map(|_| Runtime::Runc).map_err(missing),
        "docker" => docker.map(|_| Runtime::Docker).map_err(missing),
        "" => match (runc, docker) {
            (Ok(()), _) => Ok(Runtime::Runc),
            (Err(_), Ok(())) => Ok(Runtime::Docker),
            (Err(runc), Err(docker)) => Err(missing(format!(
                "environment `{name}` needs root and runc, or a Docker engine: {runc}; {docker}"
            ))),
        },
        other => Err(missing(format!(
            "{RUNTIME_VAR}={other} is not a runtime (use runc or docker)"
        ))),
    }
}

/// `Ok` when `name` can run here; otherwise the reason.
pub fn check_prerequisites(name: &str) -> Result<(), Missing> {
    select_runtime(name).map(|_| ())
}

/// How a launcher for an environment is made, beyond its mounts.
#[derive(Debug, Clone, Default)]
pub struct LauncherOptions {
    /// The cell's cgroup (a folder of the v2 hierarchy): runc puts each container below it.
    pub cgroup: Option<PathBuf>,
    /// Keep every runc bundle after its run and list it here (`harness repro --keep`).
    pub kept_bundles: Option<runc::PreparedList>,
}

/// A launcher for `name`: `local` runs on the host; every other environment runs each process in
/// its own container (runc) or in the environment's container (Docker).
pub fn launcher(name: &str, mounts: &EnvMounts) -> Result<Arc<dyn Launcher>> {
    launcher_with(name, mounts, &LauncherOptions::default())
}

/// [`launcher`], with `options`.
pub fn launcher_with(
    name: &str,
    mounts: &EnvMounts,
    options: &LauncherOptions,
) -> Result<Arc<dyn Launcher>> {
    let spec = spec(name)?;
    let runtime = select_runtime(name)?;
    Ok(match runtime {
        Runtime::Host => Arc::new(LocalLauncher),
        Runtime::Runc => {
            let mut launcher = runc::RuncLauncher::new(spec, mounts.clone())?;
            if let Some(kept) = &options.kept_bundles {
                launcher = launcher.keeping_bundles(kept.clone());
            }
            if let Some(cgroup) = &options.cgroup {
                launcher = launcher.in_cgroup(cgroup);
            }
            Arc::new(launcher)
        }
        Runtime::Docker => Arc::new(docker::DockerLauncher::start(spec, mounts, &[])?),
        Runtime::Kvm => Arc::new(kvm::KvmLauncher::new(spec, mounts.clone())?),
    })
}
