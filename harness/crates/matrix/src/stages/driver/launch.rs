//! How a declared driver is launched in one cell, all but the launcher: the run as it is told
//! it (the tap's `codex app-server` as its app-server), the task envelope it reads, written
//! whole, its command line and environment as its contract and declaration say, its bounds, and
//! what the harness tells it beyond the wire.

use super::{bounds, Declaration};
use crate::context::CellContext;
use crate::program::{self, Where};
use crate::stages::app_server::AppServer;
use crate::stages::canaries::Canaries;
use crate::stages::control::{self, Tell};
use crate::stages::folders::{CellFolders, Folders};
use crate::stages::process::{Bounds, DriverProcess};
use anyhow::{anyhow, bail, Context, Result};
use driver::bounds::Timeouts;
use driver::external;
use driver::launch::LaunchRequest;
use driver::run::{AppServerProgram, RunSpec};
use driver::task::{Envelope, Task};
use report::layout::CellEvidence;
use std::path::{Path, PathBuf};
use suites::declared::Placeholders;
use suites::spec::{CodexDiscovery, DeclaredDriver, DriverContract};
use suites::Cell;
use tap::InstalledTap;

/// `PATH` folders every driver gets after the harness's own.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How the driver is launched in this cell, all but the launcher.
pub(super) struct Launch {
    pub(super) process: DriverProcess,
    /// Where it writes run events (`contract = "events"`).
    pub(super) events: Option<PathBuf>,
    pub(super) bounds: Bounds,
    /// The transcript the recorder writes: the wire's activity, for the idle bound.
    pub(super) transcript: PathBuf,
    /// What the harness tells it beyond the wire, when the case asks.
    pub(super) tell: Option<Tell>,
    /// Its program (or script), when its command names one by path: the launcher says whether
    /// the environment's uid can start it.
    pub(super) program: Option<PathBuf>,
}

/// How `declaration`'s driver is launched in `cell`: the run as it is told it, the task it
/// reads, its bounds, and what the harness tells it beyond the wire.
pub(super) fn launch(
    ctx: &CellContext,
    cell: &Cell,
    folders: &Folders,
    app_server: &AppServer,
    declaration: &Declaration,
    tap: &InstalledTap,
) -> Result<Launch> {
    let run = run_spec(cell, folders, app_server, tap);
    let real = driver::launch::profiles::HostPaths::from_env_pairs(
        &app_server.program.env,
        Some(&app_server.program.program),
    );
    let prepared = prepare(
        declaration,
        &run,
        &folders.dirs,
        tap,
        ctx.repo_root.as_deref(),
        real.install_dir.as_deref(),
    )?;
    let declared = &declaration.declared;
    Ok(Launch {
        process: prepared.process,
        events: prepared.events,
        bounds: bounds(&run.timeouts, &run.task, Some(declared)),
        transcript: folders.dirs.evidence.transcript(),
        tell: Tell::for_cell(cell, declared, &run.task)?,
        program: program_by_path(ctx, declared),
    })
}

/// The driver's program (or its script's interpreter) when its command names it by path. A
/// program named without a path is found on the environment's own `PATH`, which the host
/// cannot answer for.
fn program_by_path(ctx: &CellContext, declared: &DeclaredDriver) -> Option<PathBuf> {
    if !program::names_a_path(&declared.command) {
        return None;
    }
    let at = Where {
        repo_root: ctx.repo_root.as_deref(),
        base_dir: declared.base_dir.as_deref(),
    };
    match program::resolve(&declared.command, at) {
        Ok(program::Program::Found(path)) => Some(path),
        _ => None,
    }
}

/// The run as the driver is told it: the tap's `codex app-server` as its app-server, in the
/// cell's environment.
fn run_spec(cell: &Cell, folders: &Folders, app_server: &AppServer, tap: &InstalledTap) -> RunSpec {
    RunSpec {
        cell: cell.id.clone(),
        task: folders.task.clone(),
        timeouts: app_server.timeouts,
        launch: LaunchRequest {
            mode: cell.case.mode,
            target: cell.target,
            network_enabled: cell.case.network,
            policy: cell.runner.policy,
            workspace: folders.dirs.workspace.clone(),
        },
        app_server: AppServerProgram {
            program: tap.codex.clone(),
            leading_args: vec!["app-server".into()],
            extra_args: Vec::new(),
            env: app_server.program.env.clone(),
        },
    }
}

pub(super) fn set(env: &mut Vec<(String, String)>, key: &str, value: String) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => env.push((key.to_string(), value)),
    }
}

/// A declared driver, ready to run for one cell.
struct Prepared {
    process: DriverProcess,
    /// Where it writes run events (`contract = "events"`).
    events: Option<PathBuf>,
}

/// Fill in the declaration for this cell: the task envelope, the command line, the
/// environment (the tap where the driver looks for `codex`).
fn prepare(
    driver: &Declaration,
    run: &RunSpec,
    folders: &CellFolders,
    tap: &InstalledTap,
    repo: Option<&Path>,
    real_install_dir: Option<&Path>,
) -> Result<Prepared> {
    let declared = &driver.declared;
    if !declared.modes.contains(&run.task.mode) {
        bail!(
            "the driver `{}` does not declare the mode `{}` (it declares {:?})",
            driver.name,
            run.task.mode.as_str(),
            declared.modes
        );
    }
    let task_path = write_task(&folders.evidence, &run.task, &run.timeouts)?;
    let path = |p: &Path| p.display().to_string();
    if declared.command.contains("{repo}") && repo.is_none() {
        bail!("the driver's command names {{repo}} but the repository root cannot be found (run from inside the repository)");
    }
    let values = Placeholders {
        workspace: path(&folders.workspace),
        prompt: run.task.prompt.clone(),
        mode: run.task.mode.as_str().into(),
        codex: path(&tap.codex),
        task: path(&task_path),
        repo: repo.map(path).unwrap_or_default(),
        cache: path(&codex::provision::cache_root()?),
        idle_seconds: Placeholders::idle_seconds(run.timeouts.turn_idle),
        model: run.task.model.clone().unwrap_or_default(),
    };
    let words = declared
        .command_words(&values)
        .map_err(|e| anyhow!("the driver's command line: {e}"))?;
    let cwd = driver
        .declared
        .base_dir
        .clone()
        .unwrap_or_else(|| folders.workspace.clone());
    let events =
        (declared.contract == DriverContract::Events).then(|| folders.evidence.driver_events());
    let mut env = contract_env(
        run,
        folders,
        &task_path,
        events.as_deref(),
        real_install_dir,
    );
    discovery_env(&mut env, &declared.codex, tap);
    for (key, value) in declared
        .environment(&values)
        .map_err(|e| anyhow!("the driver's environment: {e}"))?
    {
        set(&mut env, &key, value);
    }
    // As a shell would: the command's own `NAME=value` words over the rest of its environment.
    for (key, value) in words.assignments {
        set(&mut env, &key, value);
    }
    // Last, so a drivers file's `env` cannot hide them: the grader looks for these values.
    for (key, value) in driver.canaries.iter().flat_map(Canaries::env) {
        set(&mut env, key, value.clone());
    }
    Ok(Prepared {
        process: DriverProcess {
            argv: program_from(&cwd, words.argv),
            env,
            // A drivers file's driver runs in the file's folder; the shipped ones in the workspace.
            cwd,
            stdout_log: folders.evidence.driver_stdout(),
            stderr_log: folders.evidence.stderr(),
            stdin: control::Stdin::of(declared),
        },
        events,
    })
}

/// The task envelope the driver reads (`HARNESS_TASK`, `{task}`), written whole into the
/// cell's evidence; its path.
pub fn write_task(evidence: &CellEvidence, task: &Task, timeouts: &Timeouts) -> Result<PathBuf> {
    let path = evidence.task();
    std::fs::write(
        &path,
        serde_json::to_vec_pretty(&Envelope::new(task, timeouts))?,
    )
    .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// `argv` with a relative program path (`./driver`, `venv/bin/python`) made absolute from the
/// folder the driver starts in, as a shell there would find it; a bare name is left to the
/// environment's own `PATH`.
pub fn program_from(cwd: &Path, mut argv: Vec<String>) -> Vec<String> {
    if let Some(program) = argv.first_mut() {
        if program.contains('/') && Path::new(program.as_str()).is_relative() {
            *program = cwd.join(program.as_str()).display().to_string();
        }
    }
    argv
}

/// The environment the driver's contract promises (docs/driver-contract.md): under the events
/// contract the app-server command (the tap), the task, where to write events and the real
/// Codex's folder; under the wire contract the cell's folders and the task.
fn contract_env(
    run: &RunSpec,
    folders: &CellFolders,
    task_path: &Path,
    events: Option<&Path>,
    real_install_dir: Option<&Path>,
) -> Vec<(String, String)> {
    let path = |p: &Path| p.display().to_string();
    match events {
        Some(events) => {
            let mut env = external::driver_env(run, task_path, events);
            if let Some(dir) = real_install_dir {
                // Behind the tap, `codex` is the tap: a driver that names Codex's own folder in
                // its profiles (the example driver does) learns the real one here.
                set(
                    &mut env,
                    driver::launch::profiles::INSTALL_DIR_VAR,
                    path(dir),
                );
            }
            env
        }
        None => vec![
            ("HOME".into(), path(&folders.home)),
            ("TMPDIR".into(), path(&folders.tmp)),
            ("LANG".into(), "C.UTF-8".into()),
            ("HARNESS_TASK".into(), path(task_path)),
            ("HARNESS_WORKSPACE".into(), path(&folders.workspace)),
            ("HARNESS_CELL".into(), run.cell.to_string()),
        ],
    }
}

/// Where the driver finds the tap as its `codex`, as its declaration says: first on `PATH`, or
/// in a variable; `PATH` then has the harness's own folders and the system's.
fn discovery_env(env: &mut Vec<(String, String)>, codex: &CodexDiscovery, tap: &InstalledTap) {
    let path = |p: &Path| p.display().to_string();
    let host_path = std::env::var("PATH").unwrap_or_default();
    let mut search = Vec::new();
    if *codex == CodexDiscovery::Path {
        search.push(path(&tap.bin_dir));
    }
    search.extend(
        host_path
            .split(':')
            .filter(|p| !p.is_empty())
            .map(str::to_string),
    );
    search.push(SYSTEM_PATH.into());
    set(env, "PATH", search.join(":"));
    if let CodexDiscovery::Env(name) = codex {
        set(env, name, path(&tap.codex));
    }
}
