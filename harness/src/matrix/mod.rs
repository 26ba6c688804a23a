//! Executing cells of the conformance matrix: scratch folders, the runner's app-server, the
//! environment's launcher (after its probe), the driver, the harness's own events, the grade,
//! and the comparison with the baseline. Evidence lands in `target/conformance/<cell>/`:
//! `events.jsonl`, `transcript.jsonl`, `stderr.log`, `verdict.json`.

mod cell;
pub mod evidence;
pub mod leftovers;
mod load;
pub mod paths;
mod prereq;
mod result;
pub mod stages;

pub use cell::{fake_timeouts, run_cell};
pub use load::{
    check_declared_program, load_matrix, load_matrix_from_env, CODEX_VERSIONS_VAR, DRIVERS_VAR,
};
pub use prereq::missing as missing_prerequisite;
pub use result::{CellOutcome, CellResult};

use anyhow::{bail, Context, Result};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use suites::Cell;
use tokio::sync::{Mutex, Semaphore};

/// How cells run.
#[derive(Debug, Clone)]
pub struct MatrixOptions {
    /// One folder per cell below this (`target/conformance` by default).
    pub out_root: PathBuf,
    /// The binary that serves as the fake app-server (it embeds `fake_app_server::cli_main`).
    pub fake_program: PathBuf,
    /// Its leading arguments, e.g. `["fake-app-server", "app-server"]`.
    pub fake_leading_args: Vec<String>,
    /// The binary that serves as the wire tap (it embeds `harness::tap::relay::main`).
    pub tap: crate::tap::TapProgram,
    /// Replaces every external runner's command (`harness run --driver-cmd`).
    pub driver_cmd: Option<String>,
    /// Where relative driver commands are resolved.
    pub repo_root: Option<PathBuf>,
    /// `CI=true`: a cell that cannot run here is a failure, not an ignore.
    pub ci: bool,
    /// Keep every runc bundle after its run and list it here (`harness repro --keep`).
    pub kept_bundles: Option<crate::env::runc::PreparedList>,
    probes: Arc<Mutex<HashMap<String, Result<(), String>>>>,
}

impl MatrixOptions {
    /// Options for this process: the running executable serves as the fake (it must handle a
    /// leading `fake-app-server` argument, as `harness` and the suites test binary do).
    pub fn from_env() -> Result<Self> {
        let exe = std::env::current_exe().context("locating the running executable")?;
        Ok(Self {
            out_root: paths::conformance_root(),
            tap: crate::tap::TapProgram {
                program: exe.clone(),
                leading_args: vec!["tap".into()],
            },
            fake_program: exe,
            fake_leading_args: vec!["fake-app-server".into(), "app-server".into()],
            driver_cmd: None,
            repo_root: paths::repo_root(),
            ci: std::env::var("CI").as_deref() == Ok("true"),
            kept_bundles: None,
            probes: Arc::default(),
        })
    }

    /// The external driver command of `cell`'s runner, with `{repo}` replaced by the
    /// repository root; its program must be on PATH (or a path that exists).
    pub fn driver_command(&self, cell: &Cell) -> Result<String> {
        let command = match &self.driver_cmd {
            Some(command) => command.clone(),
            None => {
                let template = cell
                    .runner
                    .driver_cmd
                    .as_deref()
                    .context("runner has no driver command")?;
                if template.contains("{repo}") {
                    let root = self.repo_root.as_ref().context(
                        "cannot find the repository root (run from inside the repository, or pass --driver-cmd)",
                    )?;
                    template.replace("{repo}", &root.display().to_string())
                } else {
                    template.to_string()
                }
            }
        };
        let program = command
            .split_whitespace()
            .next()
            .context("the external driver command is empty")?;
        let found = if program.contains('/') {
            std::path::Path::new(program).is_file()
        } else {
            crate::codex::provision::which(program).is_some()
        };
        if !found {
            bail!("the external driver's program `{program}` is not installed or does not exist");
        }
        Ok(command)
    }

    /// The launcher of a cell in `environment`: `env::launcher`, except that with
    /// `kept_bundles` a runc launcher keeps its bundles.
    pub fn launcher(
        &self,
        environment: &str,
        mounts: &crate::env::EnvMounts,
    ) -> Result<Arc<dyn crate::launcher::Launcher>> {
        match &self.kept_bundles {
            Some(kept) if crate::env::select_runtime(environment)? == crate::env::Runtime::Runc => {
                let launcher = crate::env::runc::RuncLauncher::new(
                    crate::env::spec(environment)?,
                    mounts.clone(),
                )?
                .keeping_bundles(kept.clone());
                Ok(Arc::new(launcher))
            }
            _ => crate::env::launcher(environment, mounts),
        }
    }

    /// Probe `environment` once per process; a probe that disagrees with the spec is an error.
    pub async fn check_probe(&self, environment: &str) -> Result<()> {
        let mut probes = self.probes.lock().await;
        if !probes.contains_key(environment) {
            let scratch = self.out_root.join("_probes").join(environment);
            std::fs::create_dir_all(&scratch)?;
            let result = match crate::env::probe(environment, &scratch).await {
                Ok(report) if report.agrees => Ok(()),
                Ok(report) => Err(format!(
                    "environment `{environment}` probe disagrees with its spec: expected {}, saw exit {:?} with stderr `{}`",
                    report.expected.describe(),
                    report.seen.exit_code,
                    report.seen.stderr.trim()
                )),
                Err(e) => Err(format!("probing environment `{environment}`: {e:#}")),
            };
            probes.insert(environment.to_string(), result);
        }
        match &probes[environment] {
            Ok(()) => Ok(()),
            Err(message) => bail!("{message}"),
        }
    }
}

/// Progress of a matrix run, for live output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub total: usize,
    pub done: usize,
    pub running: usize,
    pub failed: usize,
    pub ignored: usize,
}

/// Run `cells` with at most `jobs` at once; `on_event` sees every start and finish. Results
/// come back in the cells' order.
pub async fn run_cells(
    cells: &[Cell],
    options: &MatrixOptions,
    jobs: usize,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> Vec<CellResult> {
    let semaphore = Arc::new(Semaphore::new(jobs.max(1)));
    let progress = Arc::new(std::sync::Mutex::new(Progress {
        total: cells.len(),
        ..Progress::default()
    }));
    let on_event = Arc::new(on_event);
    let mut tasks = tokio::task::JoinSet::new();
    for (index, cell) in cells.iter().cloned().enumerate() {
        let semaphore = semaphore.clone();
        let options = options.clone();
        let progress = progress.clone();
        let on_event = on_event.clone();
        tasks.spawn(async move {
            let _permit = semaphore.acquire_owned().await.expect("semaphore open");
            {
                let mut p = progress.lock().expect("progress");
                p.running += 1;
                on_event(&p, None);
            }
            let result = run_cell(&cell, &options).await;
            {
                let mut p = progress.lock().expect("progress");
                p.running -= 1;
                p.done += 1;
                p.failed += usize::from(result.is_failure());
                p.ignored += usize::from(result.is_ignored());
                on_event(&p, Some(&result));
            }
            (index, result)
        });
    }
    let mut results: Vec<Option<CellResult>> = vec![None; cells.len()];
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, result)) => results[index] = Some(result),
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
    results
        .into_iter()
        .map(|r| r.expect("every cell produced a result"))
        .collect()
}

/// A default for `--jobs`: the machine's parallelism.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}
