//! Restricted environments: declarative specs ([`spec`]) rendered onto a real container runtime
//! (runc from a generated OCI bundle, or Docker through testcontainers), each proven by a probe.
//!
//! See `docs/environments.md` for what each environment restricts and what it stands for.

pub mod catalogue;
pub mod docker;
pub mod docker_stale;
pub mod oci;
pub mod owner;
pub mod probe;
pub mod registry;
pub mod runc;
pub mod spec;
pub mod stale;

use crate::launcher::{Launcher, LocalLauncher};
use anyhow::{bail, Result};
use std::path::PathBuf;
use std::sync::Arc;

pub use probe::{bubblewrap_in_use, codex_bundled_bwrap, probe, ProbeReport, ProbeSeen};
pub use registry::cleanup_registered;
pub use spec::{EnvSpec, ExpectedProbe};
pub use stale::{harness_containers, reap_stale, ListedContainer, ReapReport};

/// Folders a launcher binds into its containers (same path inside): the cell's scratch and the
/// other writable folders read-write, `readonly` read-only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvMounts {
    pub scratch: PathBuf,
    pub writable: Vec<PathBuf>,
    pub readonly: Vec<PathBuf>,
}

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
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Host => "host",
            Runtime::Runc => "runc",
            Runtime::Docker => "docker",
        }
    }
}

/// Forces a runtime (`runc` or `docker`) instead of the automatic choice.
pub const RUNTIME_VAR: &str = "HARNESS_CONTAINER_RUNTIME";

/// The environment names, in listing order.
pub fn names() -> Vec<&'static str> {
    spec::all().iter().map(|s| s.name).collect()
}

/// The spec of `name`; an unknown name is an error naming the known ones.
pub fn spec(name: &str) -> Result<EnvSpec> {
    match spec::all().into_iter().find(|s| s.name == name) {
        Some(found) => Ok(found),
        None => bail!(
            "unknown environment `{name}` (known: {})",
            names().join(", ")
        ),
    }
}

fn runc_prerequisites() -> Result<(), String> {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("not root (runc needs root)");
    }
    if crate::codex::provision::which("runc").is_none() {
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
    if crate::codex::provision::which("bwrap").is_none() {
        return Err(Missing {
            reason: "bubblewrap is not installed (apt-get install bubblewrap)".into(),
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

/// A launcher for `name`: `local` runs on the host; every other environment runs each process in
/// its own container (runc) or in the environment's container (Docker).
pub fn launcher(name: &str, mounts: &EnvMounts) -> Result<Arc<dyn Launcher>> {
    let spec = spec(name)?;
    let runtime = select_runtime(name)?;
    Ok(match runtime {
        Runtime::Host => Arc::new(LocalLauncher),
        Runtime::Runc => Arc::new(runc::RuncLauncher::new(spec, mounts.clone())?),
        Runtime::Docker => Arc::new(docker::DockerLauncher::start(spec, mounts, &[])?),
    })
}
