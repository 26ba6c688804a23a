//! What every cell of a run shares: one plain value, built once per process — by `harness run`
//! (and the tools) and by the suites test binary (`cargo test -p suites`) alike — and read by
//! every stage. It holds settings only; each stage does its own work.

use crate::mutation::Mutation;
use crate::paths;
use anyhow::{Context, Result};
use report::layout::CellEvidence;
use std::path::PathBuf;
use suites::Cell;

#[derive(Debug, Clone)]
pub struct CellContext {
    /// One folder per cell below this (`target/conformance` by default), and the reports.
    pub out_root: PathBuf,
    /// The binary that serves the hidden subcommands ([`crate::hidden`]): the fake app-server,
    /// the wire tap and the reference driver as a process. The running executable by default:
    /// `harness`, or the suites test binary.
    pub harness_binary: PathBuf,
    /// Arguments the fake app-server gets after its own (`harness repro`: `--sandbox real`,
    /// real sandboxing where its `auto` choice would simulate).
    pub fake_args: Vec<String>,
    /// Replaces every external runner's command (`harness run --driver-cmd`).
    pub driver_cmd: Option<String>,
    /// Where `{repo}` in driver commands points.
    pub repo_root: Option<PathBuf>,
    /// `CI=true`: a cell that cannot run here is a failure, not an ignore.
    pub ci: bool,
    /// Keep every runc bundle after its run and list it here (`harness repro --keep`).
    pub kept_bundles: Option<sandbox::runc::PreparedList>,
    /// The mutation every cell's driver is run under (`harness mutate`); none by default: the
    /// driver as it is, its bytes relayed untouched.
    pub mutation: Mutation,
    /// Whether `local` drivers get a mount namespace of their own where the kernel allows one
    /// (`sandbox::isolation`). `false` (`HARNESS_LOCAL_ISOLATION=off`): they run without one,
    /// as on a machine that allows none, so what docs/prerequisites.md promises there ("`local`,
    /// neither") can be exercised on a machine that has both.
    pub local_isolation: bool,
}

impl CellContext {
    /// The context of this process: the running executable serves the hidden subcommands (it
    /// must dispatch them, as `harness` and the suites test binary do), evidence goes to
    /// [`paths::conformance_root`], `CI` is read from the environment.
    pub fn from_env() -> Result<Self> {
        let exe = std::env::current_exe().context("locating the running executable")?;
        Ok(Self {
            out_root: paths::conformance_root(),
            harness_binary: exe,
            fake_args: Vec::new(),
            driver_cmd: None,
            repo_root: paths::repo_root(),
            ci: std::env::var("CI").as_deref() == Ok("true"),
            kept_bundles: None,
            mutation: Mutation::default(),
            local_isolation: local_isolation_from_env()?,
        })
    }

    /// The evidence folder of `cell`.
    pub fn evidence(&self, cell: &Cell) -> CellEvidence {
        CellEvidence::of(&self.out_root, &cell.name())
    }
}

/// The variable that turns the local drivers' mount namespace off.
pub(crate) const LOCAL_ISOLATION_VAR: &str = "HARNESS_LOCAL_ISOLATION";

/// `HARNESS_LOCAL_ISOLATION`: unset or `on`, isolate where possible; `off`, never. Anything else
/// is refused, naming the variable (a typo must not silently weaken or keep the isolation).
fn local_isolation_from_env() -> Result<bool> {
    match std::env::var(LOCAL_ISOLATION_VAR) {
        Err(std::env::VarError::NotPresent) => Ok(true),
        Ok(value) if value == "on" => Ok(true),
        Ok(value) if value == "off" => Ok(false),
        Ok(value) => anyhow::bail!("{LOCAL_ISOLATION_VAR}={value:?}: expected `on` or `off`"),
        Err(e) => Err(e).with_context(|| format!("reading {LOCAL_ISOLATION_VAR}")),
    }
}
