//! Stage 4: the driver. Every driver runs as its own process through the cell's launcher,
//! finding the tap as its `codex` the way its declaration says: a declared driver, the example
//! external driver and the reference driver (`harness drive`) alike — the last two are declared
//! drivers with `contract = "events"`. There is no in-process shortcut.

use super::folders::CellFolders;
use super::process::{self, Bounds, DriverProcess};
use crate::MatrixOptions;
use anyhow::{anyhow, bail, Context, Result};
use driver::external;
use driver::run::RunSpec;
use driver::task::Timeouts;
use driver::task::{Envelope, Task};
use graders::events::Mode;
use graders::wire::DriverEnd;
use sandbox::launcher::Launcher;
use std::path::{Path, PathBuf};
use std::time::Duration;
use suites::declared::Placeholders;
use suites::spec::{CodexDiscovery, DeclaredDriver, DriverContract, DriverKind};
use suites::Cell;
use tap::InstalledTap;

/// `PATH` folders every driver gets after the harness's own.
const SYSTEM_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A driver that runs as a process, as the cell will run it.
pub struct ProcessDriver {
    /// `run.started.driver`.
    pub name: String,
    pub declared: DeclaredDriver,
}

/// The declared driver of `cell`'s runner. The example external driver (`driver =
/// "external"`, or `--driver-cmd`) is an ordinary declared driver: it finds `codex` on `PATH`
/// (and in `HARNESS_APP_SERVER_CMD`) and writes run events.
pub fn process_driver(cell: &Cell, options: &MatrixOptions) -> Result<ProcessDriver> {
    match cell.runner.driver {
        // The reference driver is an ordinary driver too: its own process (`harness drive`),
        // `codex` first on PATH, run events as the second source.
        DriverKind::Reference => {
            let quote = |s: &str| {
                shlex::try_quote(s)
                    .map(|q| q.into_owned())
                    .map_err(|e| anyhow!("cannot quote `{s}`: {e}"))
            };
            let command = format!("{} drive", quote(&options.fake_program.to_string_lossy())?);
            Ok(ProcessDriver {
                name: "reference".into(),
                declared: all_modes_with_events(command),
            })
        }
        DriverKind::External => {
            let command = options.driver_command(cell)?;
            Ok(ProcessDriver {
                name: command.clone(),
                declared: all_modes_with_events(command),
            })
        }
        DriverKind::Declared => {
            let declared = cell.runner.declared.clone().with_context(|| {
                format!(
                    "runner `{}` is declared but has no `declared` table",
                    cell.id.runner
                )
            })?;
            Ok(ProcessDriver {
                name: cell.id.runner.clone(),
                declared,
            })
        }
    }
}

/// A driver under the events contract that finds `codex` on `PATH` and takes every task.
fn all_modes_with_events(command: String) -> DeclaredDriver {
    DeclaredDriver {
        about: None,
        command,
        codex: CodexDiscovery::Path,
        contract: DriverContract::Events,
        modes: vec![Mode::Planning, Mode::Standard, Mode::Ask],
        plan_reviews: true,
        answers: true,
        approvals: vec![],
        env: Default::default(),
        base_dir: None,
    }
}

/// The bounds on a driver process, from the task and its waits: start-up attempts, one
/// `turn_total` per turn the task implies, shutdowns, plus margin; idle: longer than any single
/// wait of the task.
pub fn bounds(timeouts: &Timeouts, task: &Task) -> Bounds {
    let turns =
        1 + task.plan_reviews.len() + task.answers.len() + usize::from(task.relaunch.is_some());
    let turns = u32::try_from(turns)
        .unwrap_or(u32::MAX)
        .min(task.max_turns.max(1));
    let attempts = timeouts.startup_attempts.max(1);
    Bounds {
        overall: timeouts.request * 2 * attempts
            + timeouts.turn_total * turns
            + timeouts.shutdown * 2
            + Duration::from_secs(10),
        idle: timeouts.request.max(timeouts.turn_idle) + timeouts.shutdown + Duration::from_secs(3),
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Planning => "planning",
        Mode::Standard => "standard",
        Mode::Ask => "ask",
    }
}

fn set(env: &mut Vec<(String, String)>, key: &str, value: String) {
    match env.iter_mut().find(|(k, _)| k == key) {
        Some(slot) => slot.1 = value,
        None => env.push((key.to_string(), value)),
    }
}

/// The existing files a driver's command line names by absolute path (they must be visible
/// inside the environment's container).
pub fn files_named_by(command: &str) -> Vec<PathBuf> {
    shlex::split(command)
        .unwrap_or_else(|| command.split_whitespace().map(str::to_string).collect())
        .into_iter()
        .map(PathBuf::from)
        .filter(|word| word.is_absolute() && word.is_file())
        .collect()
}

/// The driver installs a command line reaches into below the harness cache (`{cache}`), as
/// folders to bind read-only at their own paths: each package folder it names
/// (`{cache}/pypi/openai-codex-0.163.0`, `{cache}/npm/codex-acp-2.6.0`), and, for a named file
/// that is a link out of the cache (a venv's `bin/python`), the installation it links to (the
/// folder above that file's `bin/`, e.g. the base interpreter's prefix with its standard
/// library). Under a container uid that cannot enter the folder holding the cache (a 0700
/// `/root`), the launcher hides that folder behind an empty one and binds only these on it
/// (`env::runc`), so the installs are reachable, read-only, and nothing else of it is.
pub fn installs_named_by(command: &str, cache: &Path) -> Vec<PathBuf> {
    let mut installs = Vec::new();
    let mut add = |folder: PathBuf| {
        if folder.is_dir() && !installs.contains(&folder) {
            installs.push(folder);
        }
    };
    for word in shlex::split(command).unwrap_or_default() {
        let named = Path::new(&word);
        let Ok(inside) = named.strip_prefix(cache) else {
            continue;
        };
        if !named.exists() {
            continue;
        }
        let package: PathBuf = inside.components().take(2).collect();
        add(cache.join(package));
        let Ok(target) = named.canonicalize() else {
            continue;
        };
        let canonical_cache = cache.canonicalize().unwrap_or_else(|_| cache.to_path_buf());
        if target.starts_with(&canonical_cache) {
            continue;
        }
        let folder = target.parent().map(|parent| match parent.file_name() {
            Some(name) if name == "bin" => parent.parent().unwrap_or(parent),
            _ => parent,
        });
        // Never a system folder: only an installation of its own (`/opt/x`, `~/.pyenv/…`).
        if let Some(folder) = folder.filter(|f| f.components().count() > 2) {
            add(folder.to_path_buf());
        }
    }
    installs
}

/// A declared driver, ready to run for one cell.
pub struct Prepared {
    pub process: DriverProcess,
    /// Where it writes run events (`contract = "events"`).
    pub events: Option<PathBuf>,
}

/// Fill in the declaration for this cell: the task envelope, the command line, the
/// environment (the tap where the driver looks for `codex`).
pub fn prepare(
    driver: &ProcessDriver,
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
            mode_name(run.task.mode),
            declared.modes
        );
    }
    let task_path = folders.root.join("task.json");
    std::fs::write(
        &task_path,
        serde_json::to_vec_pretty(&Envelope::new(&run.task, &run.timeouts))?,
    )
    .with_context(|| format!("writing {}", task_path.display()))?;
    let path = |p: &Path| p.display().to_string();
    if declared.command.contains("{repo}") && repo.is_none() {
        bail!("the driver's command names {{repo}} but the repository root cannot be found (run from inside the repository)");
    }
    let values = Placeholders {
        workspace: path(&folders.workspace),
        prompt: run.task.prompt.clone(),
        mode: mode_name(run.task.mode).into(),
        codex: path(&tap.codex),
        task: path(&task_path),
        repo: repo.map(path).unwrap_or_default(),
        cache: path(&codex::provision::cache_root()?),
    };
    let command = declared
        .command_line(&values)
        .map_err(|e| anyhow!("the driver's command line: {e}"))?;
    let events = (declared.contract == DriverContract::Events)
        .then(|| folders.root.join("driver-events.jsonl"));
    let mut env = match &events {
        // The events contract (docs/driver-contract.md): the app-server command is the tap.
        Some(events) => external::driver_env(run, &task_path, events),
        None => vec![
            ("HOME".into(), path(&folders.home)),
            ("TMPDIR".into(), path(&folders.tmp)),
            ("LANG".into(), "C.UTF-8".into()),
            ("HARNESS_TASK".into(), path(&task_path)),
            ("HARNESS_WORKSPACE".into(), path(&folders.workspace)),
            ("HARNESS_CELL".into(), run.cell.to_string()),
        ],
    };
    if let (Some(_), Some(dir)) = (&events, real_install_dir) {
        // Behind the tap, `codex` is the tap: a driver that names Codex's own folder in its
        // profiles (the example driver does) learns the real one here.
        set(
            &mut env,
            driver::launch::profiles::INSTALL_DIR_VAR,
            path(dir),
        );
    }
    let host_path = std::env::var("PATH").unwrap_or_default();
    let mut search = Vec::new();
    if declared.codex == CodexDiscovery::Path {
        search.push(path(&tap.bin_dir));
    }
    search.extend(
        host_path
            .split(':')
            .filter(|p| !p.is_empty())
            .map(str::to_string),
    );
    search.push(SYSTEM_PATH.into());
    set(&mut env, "PATH", search.join(":"));
    if let CodexDiscovery::Env(name) = &declared.codex {
        set(&mut env, name, path(&tap.codex));
    }
    for (key, value) in declared
        .environment(&values)
        .map_err(|e| anyhow!("the driver's environment: {e}"))?
    {
        set(&mut env, &key, value);
    }
    Ok(Prepared {
        process: DriverProcess {
            command,
            env,
            // A drivers file's driver runs in the file's folder; the shipped ones in the workspace.
            cwd: driver
                .declared
                .base_dir
                .clone()
                .unwrap_or_else(|| folders.workspace.clone()),
            stdout_log: folders.root.join("driver-stdout.log"),
            stderr_log: folders.root.join("stderr.log"),
        },
        events,
    })
}

/// Run a prepared driver within its bounds.
pub async fn run(
    prepared: &Prepared,
    launcher: &dyn Launcher,
    bounds: Bounds,
    wire: &Path,
) -> Result<DriverEnd> {
    process::run(&prepared.process, launcher, bounds, wire).await
}

#[cfg(test)]
mod tests {
    use super::installs_named_by;

    #[test]
    fn a_driver_command_binds_its_cache_packages_and_the_interpreter_a_venv_links_to() {
        let root = tempfile::tempdir().unwrap();
        let cache = root.path().join("cache");
        let venv_bin = cache.join("pypi/sdk-1.0/bin");
        let prefix = root.path().join("interpreters/3.11");
        std::fs::create_dir_all(&venv_bin).unwrap();
        std::fs::create_dir_all(prefix.join("bin")).unwrap();
        std::fs::create_dir_all(cache.join("npm/acp-2.0/node_modules/acp/dist")).unwrap();
        std::fs::write(prefix.join("bin/python3.11"), "").unwrap();
        std::os::unix::fs::symlink(prefix.join("bin/python3.11"), venv_bin.join("python")).unwrap();
        let agent = cache.join("npm/acp-2.0/node_modules/acp/dist/index.js");
        std::fs::write(&agent, "").unwrap();
        let command = format!(
            "{} /repo/run.py --agent {} --missing {}",
            venv_bin.join("python").display(),
            agent.display(),
            cache.join("npm/absent-1.0/x").display()
        );
        assert_eq!(
            installs_named_by(&command, &cache),
            vec![
                cache.join("pypi/sdk-1.0"),
                prefix,
                cache.join("npm/acp-2.0")
            ]
        );
        // Nothing outside the cache is bound on its own account.
        assert!(installs_named_by("/usr/bin/node /repo/client.mjs", &cache).is_empty());
    }
}
