//! Executing cells of the conformance matrix: scratch folders, the runner's app-server, the
//! environment's launcher (after its probe), the driver, the harness's own events, the grade,
//! and the comparison with the baseline. Evidence lands in `target/conformance/<cell>/`:
//! `events.jsonl`, `transcript.jsonl`, `stderr.log`, `verdict.json`.

mod cell;
pub mod concurrency;
pub mod evidence;
mod load;
pub mod paths;
mod prereq;
pub mod retry;
pub mod stages;

pub use cell::{fake_timeouts, run_cell};
pub use concurrency::Concurrency;
pub use load::{
    check_declared_program, load_matrix, load_matrix_from_env, CODEX_VERSIONS_VAR, DRIVERS_VAR,
};
pub use prereq::missing as missing_prerequisite;
use report::outcome::CellResult;

pub use prereq::check_named as check_named_programs;

use anyhow::{bail, Context, Result};
use graders::events::CellId;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use suites::Cell;
use tokio::sync::{OnceCell, Semaphore};

type ProbeOnce = Arc<OnceCell<Result<(), String>>>;
use tokio_util::sync::CancellationToken;

/// How cells run.
#[derive(Debug, Clone)]
pub struct MatrixOptions {
    /// One folder per cell below this (`target/conformance` by default).
    pub out_root: PathBuf,
    /// The binary that serves as the fake app-server (it embeds `fake_app_server::cli_main`),
    /// the wire tap (`harness::tap::relay::main`) and the reference driver's process
    /// (`harness::driver::standalone::main`).
    pub fake_program: PathBuf,
    /// Its leading arguments, e.g. `["fake-app-server", "app-server"]`.
    pub fake_leading_args: Vec<String>,
    /// Replaces every external runner's command (`harness run --driver-cmd`).
    pub driver_cmd: Option<String>,
    /// Where relative driver commands are resolved.
    pub repo_root: Option<PathBuf>,
    /// `CI=true`: a cell that cannot run here is a failure, not an ignore.
    pub ci: bool,
    /// Keep every runc bundle after its run and list it here (`harness repro --keep`).
    pub kept_bundles: Option<sandbox::runc::PreparedList>,
    /// One probe per environment and run; environments are probed concurrently, a cell waits
    /// only for its own environment's.
    probes: Arc<std::sync::Mutex<HashMap<String, ProbeOnce>>>,
}

impl MatrixOptions {
    /// Options for this process: the running executable serves as the fake (it must handle a
    /// leading `fake-app-server` argument, as `harness` and the suites test binary do).
    pub fn from_env() -> Result<Self> {
        let exe = std::env::current_exe().context("locating the running executable")?;
        Ok(Self {
            out_root: paths::conformance_root(),
            fake_program: exe,
            fake_leading_args: vec!["fake-app-server".into(), "app-server".into()],
            driver_cmd: None,
            repo_root: paths::repo_root(),
            ci: std::env::var("CI").as_deref() == Ok("true"),
            kept_bundles: None,
            probes: Arc::default(),
        })
    }

    /// The wire tap: the fake's binary also embeds it (`… tap`), and the reference driver as a
    /// process (`… drive`).
    pub fn tap_program(&self) -> tap::TapProgram {
        tap::TapProgram {
            program: self.fake_program.clone(),
            leading_args: vec!["tap".into()],
        }
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
            sandbox::system::which(program).is_some()
        };
        if !found {
            bail!("the external driver's program `{program}` is not installed or does not exist");
        }
        Ok(command)
    }

    /// The launcher of a cell in `environment`: its processes join `cgroup` (the cell's, see
    /// `sandbox::containment`), and with `kept_bundles` a runc launcher keeps its bundles.
    pub fn launcher(
        &self,
        environment: &str,
        mounts: &sandbox::launcher::EnvMounts,
        cgroup: Option<&sandbox::containment::CellCgroup>,
    ) -> Result<Arc<dyn sandbox::launcher::Launcher>> {
        let options = sandbox::environment::LauncherOptions {
            cgroup: cgroup.map(|c| c.path().to_path_buf()),
            kept_bundles: self.kept_bundles.clone(),
        };
        let launcher = sandbox::environment::launcher_with(environment, mounts, &options)?;
        Ok(match cgroup {
            Some(cgroup) => Arc::new(sandbox::launcher::ContainedLauncher::new(
                launcher,
                cgroup.joiner()?,
            )),
            None => launcher,
        })
    }

    /// Probe `environment` once per process; a probe that disagrees with the spec is an error.
    pub async fn check_probe(&self, environment: &str) -> Result<()> {
        let once = self
            .probes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(environment.to_string())
            .or_default()
            .clone();
        let result = once
            .get_or_init(|| async {
                let scratch = self.out_root.join("_probes").join(environment);
                if let Err(e) = std::fs::create_dir_all(&scratch) {
                    return Err(format!("creating {}: {e}", scratch.display()));
                }
                match sandbox::probe::probe(environment, &scratch).await {
                    Ok(report) => match report.disagreement() {
                        None => Ok(()),
                        Some(what) => Err(format!(
                            "environment `{environment}` probe disagrees with its spec: {what}"
                        )),
                    },
                    Err(e) => Err(format!("probing environment `{environment}`: {e:#}")),
                }
            })
            .await;
        match result {
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

/// What a matrix run produced: the results of the cells that finished (in the cells' order),
/// and the cells a stop cut short or never started.
#[derive(Debug, Clone, Default)]
pub struct MatrixRun {
    pub finished: Vec<CellResult>,
    /// Running when the stop came: torn down, no result.
    pub interrupted: Vec<CellId>,
    /// Not started before the stop came.
    pub not_started: Vec<CellId>,
    /// The message of a panic in a cell's task, which stopped the run.
    pub panic: Option<String>,
}

/// Run `cells`, as many at once as `jobs` allows; `on_event` sees every start and finish.
/// Results come back in the cells' order. A panic in a cell is raised again here.
pub async fn run_cells(
    cells: &[Cell],
    options: &MatrixOptions,
    jobs: Concurrency,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> Vec<CellResult> {
    let run = run_cells_until(cells, options, jobs, CancellationToken::new(), on_event).await;
    if let Some(message) = run.panic {
        panic!("{message}");
    }
    run.finished
}

/// [`run_cells`], until `stop` is cancelled: then no cell starts any more, the running ones are
/// dropped (their guards remove their containers, their cgroups are emptied), and what finished
/// is returned. A panic in a cell's task cancels `stop` too and is returned, not raised.
pub async fn run_cells_until(
    cells: &[Cell],
    options: &MatrixOptions,
    jobs: Concurrency,
    stop: CancellationToken,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> MatrixRun {
    sandbox::reap::stale_once();
    let semaphore = Arc::new(Semaphore::new(jobs.slots() as usize));
    let progress = Arc::new(std::sync::Mutex::new(Progress {
        total: cells.len(),
        ..Progress::default()
    }));
    let on_event = Arc::new(on_event);
    let mut tasks = tokio::task::JoinSet::new();
    // The costliest cells queue first (the semaphore is fair), so the long ones do not start
    // last and stretch the run's tail.
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(jobs.cost(&cells[i])));
    for index in order {
        let cell = cells[index].clone();
        let cost = jobs.cost(&cell);
        let semaphore = semaphore.clone();
        let options = options.clone();
        let progress = progress.clone();
        let on_event = on_event.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            let _permit = tokio::select! {
                biased;
                _ = stop.cancelled() => return (index, Ran::NotStarted),
                permit = semaphore.acquire_many_owned(cost) => permit.expect("semaphore open"),
            };
            if stop.is_cancelled() {
                return (index, Ran::NotStarted);
            }
            {
                let mut p = progress.lock().expect("progress");
                p.running += 1;
                on_event(&p, None);
            }
            let root = options.out_root.join(cell.name());
            let result = tokio::select! {
                biased;
                _ = stop.cancelled() => None,
                result = run_cell(&cell, &options) => Some(result),
            };
            // The cell's future is gone (finished or dropped with its guards): whatever it
            // started and left running goes now, also when it ended by an error.
            let left = sandbox::reap::after_cell(None, &root);
            if result.is_none() && !left.is_empty() {
                eprintln!(
                    "harness: {}: killed {}",
                    cell.name(),
                    sandbox::cgroup::describe(&left)
                );
            }
            let mut p = progress.lock().expect("progress");
            p.running -= 1;
            match result {
                Some(result) => {
                    p.done += 1;
                    p.failed += usize::from(result.is_failure());
                    p.ignored += usize::from(result.is_ignored());
                    on_event(&p, Some(&result));
                    (index, Ran::Finished(Box::new(result)))
                }
                None => (index, Ran::Interrupted),
            }
        });
    }
    let mut ran: Vec<Option<Ran>> = vec![None; cells.len()];
    let mut panic = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, outcome)) => ran[index] = Some(outcome),
            Err(e) if e.is_panic() => {
                let payload = e.into_panic();
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a cell's task panicked".into());
                panic.get_or_insert(message);
                stop.cancel();
            }
            Err(_) => {}
        }
    }
    let mut run = MatrixRun {
        panic,
        ..MatrixRun::default()
    };
    for (cell, outcome) in cells.iter().zip(ran) {
        match outcome {
            Some(Ran::Finished(result)) => run.finished.push(*result),
            Some(Ran::NotStarted) => run.not_started.push(cell.id.clone()),
            // A panicked task left no outcome: it was running.
            Some(Ran::Interrupted) | None => run.interrupted.push(cell.id.clone()),
        }
    }
    run
}

#[derive(Debug, Clone)]
enum Ran {
    Finished(Box<CellResult>),
    Interrupted,
    NotStarted,
}

/// A default for `--jobs`: the machine's parallelism.
pub fn default_jobs() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}
