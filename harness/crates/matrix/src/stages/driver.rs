//! Stage 4, the driver: which driver the cell's runner declares and how it is launched for
//! this cell — its task written, the tap it finds as its `codex` installed, its command line
//! and environment filled in (all known before the sandbox is made, since the sandbox binds
//! what the driver's command names) — then its run to its end.
//! Every driver runs as its own process through the cell's launcher, finding the tap as its
//! `codex` the way its declaration says: a declared driver, the example external driver and
//! the reference driver (`harness drive`) alike — the last two are declared drivers with
//! `contract = "events"`. There is no in-process shortcut.

mod launch;

pub use launch::{program_from, write_task};

use super::app_server::AppServer;
use super::canaries::Canaries;
use super::control::Note;
use super::folders::Folders;
use super::process::{self, Bounds, Telling};
use crate::context::CellContext;
use crate::hidden;
use crate::mutation::CellMutation;
use crate::program::{self, Where};
use anyhow::{anyhow, bail, Context, Result};
use driver::bounds;
use driver::bounds::Timeouts;
use driver::task::Task;
use graders::wire::DriverEnd;
use sandbox::launcher::{EnvMounts, Launcher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use suites::declared::split_words;
use suites::spec::{DeclaredDriver, DriverKind};
use suites::Cell;
use tap::session::Recording;
use tap::InstalledTap;

/// Which driver the cell's runner declares, and what its evidence says of it.
pub(crate) struct Declaration {
    /// `run.started.driver`.
    pub(crate) name: String,
    pub(crate) declared: DeclaredDriver,
    /// What the environment must bind for it: the harness binary (its tap), the files its
    /// command names, the installs it reaches into below the harness cache, its drivers file's
    /// folder.
    pub(crate) mounts: EnvMounts,
    /// The canary secrets planted in its environment (every cell of the `protocol` profile).
    pub(crate) canaries: Option<Canaries>,
}

/// The cell's driver, as the cell will run it: its declaration, the tap it finds as its
/// `codex` (the sandbox stage starts recording at its other end), its launch, and the mutation
/// it runs under (`harness mutate`), the cell's own.
pub(crate) struct Driver {
    pub(crate) declaration: Declaration,
    pub(crate) tap: InstalledTap,
    launch: launch::Launch,
    pub(crate) mutation: CellMutation,
}

/// What the driver's run left: how it ended, where it wrote its own events (`contract =
/// "events"`), what the recorder wrote into the transcript (its seal), and what the harness
/// told it beyond the wire ([`control`]).
pub(crate) struct DriverRun {
    pub(crate) end: DriverEnd,
    pub(crate) events: Option<PathBuf>,
    pub(crate) transcript: tap::record::Seal,
    pub(crate) told: Vec<Note>,
}

/// The driver of `cell`'s runner, ready to launch against `app_server`: its task written (whole,
/// before anything binds it), the tap installed, its command line and environment filled in.
pub(crate) fn declare(
    ctx: &CellContext,
    cell: &Cell,
    folders: &Folders,
    app_server: &AppServer,
) -> Result<Driver> {
    let declaration = declaration(ctx, cell)?;
    let tap = tap::install(
        &folders.dirs.evidence.tap(),
        &hidden::tap_program(&ctx.harness_binary),
    )?;
    let launch = launch::launch(ctx, cell, folders, app_server, &declaration, &tap)?;
    Ok(Driver {
        mutation: ctx.mutation.for_driver(&declaration.declared),
        declaration,
        tap,
        launch,
    })
}

/// The driver of `cell`'s runner. The example external driver (`driver = "external"`, or
/// `--driver-cmd`) is an ordinary declared driver: it finds `codex` on `PATH` (and in
/// `HARNESS_APP_SERVER_CMD`) and writes run events.
fn declaration(ctx: &CellContext, cell: &Cell) -> Result<Declaration> {
    let (name, declared) = match cell.runner.driver {
        // The reference driver is an ordinary driver too: its own process (`harness drive`),
        // `codex` first on PATH, run events as the second source.
        DriverKind::Reference => (
            "reference".to_string(),
            DeclaredDriver::harness_own(hidden::reference_driver_command(&ctx.harness_binary)?),
        ),
        DriverKind::External => {
            let command = external_command(ctx, cell)?;
            (
                external_name(ctx, &command),
                DeclaredDriver::harness_own(command),
            )
        }
        DriverKind::Declared => {
            let declared = cell.runner.declared.clone().with_context(|| {
                format!(
                    "runner `{}` is declared but has no `declared` table",
                    cell.id.runner
                )
            })?;
            (cell.id.runner.clone(), declared)
        }
    };
    let mounts = mounts_for(ctx, &declared)?;
    Ok(Declaration {
        name,
        declared,
        mounts,
        canaries: Canaries::for_cell(cell),
    })
}

/// The external driver's command line of `cell`'s runner (or `--driver-cmd`), placeholders
/// (`{repo}`) still in it; not checked.
pub(crate) fn external_command_line(ctx: &CellContext, cell: &Cell) -> Result<String> {
    if let Some(command) = &ctx.driver_cmd {
        return Ok(command.clone());
    }
    cell.runner
        .driver_cmd
        .clone()
        .context("runner has no driver command")
}

/// [`external_command_line`], whose program must exist ([`crate::program`]).
pub(crate) fn external_command(ctx: &CellContext, cell: &Cell) -> Result<String> {
    let command = external_command_line(ctx, cell)?;
    program::resolve(&command, external_where(ctx))
        .map_err(|e| anyhow!("the external driver: {e}"))?;
    Ok(command)
}

/// Where the external driver's command is resolved: `{repo}` is the repository, relative
/// paths are the harness's own working folder's.
pub(crate) fn external_where(ctx: &CellContext) -> Where<'_> {
    Where {
        repo_root: ctx.repo_root.as_deref(),
        base_dir: None,
    }
}

/// How reports name the external driver (`run.started.driver`): its command line, `{repo}`
/// shown as the repository it stands for.
fn external_name(ctx: &CellContext, command: &str) -> String {
    match &ctx.repo_root {
        Some(root) => command.replace("{repo}", &root.display().to_string()),
        None => command.to_string(),
    }
}

/// The driver runs inside the environment too: the tap (the harness binary), and the files its
/// command names, must be visible there even below a folder the container's user cannot enter.
fn mounts_for(ctx: &CellContext, declared: &DeclaredDriver) -> Result<EnvMounts> {
    let mut mounts = EnvMounts::default();
    mounts.readonly.push(ctx.harness_binary.clone());
    let repo = ctx
        .repo_root
        .as_ref()
        .map(|r| r.display().to_string())
        .unwrap_or_default();
    // Split before `{repo}` and `{cache}` are filled in, as the command itself is: a path
    // holding a space or a quote stays one word.
    let words: Vec<String> = split_words(&declared.command)
        .unwrap_or_default()
        .into_iter()
        .map(|word| word.replace("{repo}", &repo))
        .collect();
    mounts.readonly.extend(files_named_by(&words));
    if declared.command.contains("{cache}") {
        let cache = codex::provision::cache_root()?;
        let cache_text = cache.display().to_string();
        let words: Vec<String> = words
            .iter()
            .map(|word| word.replace("{cache}", &cache_text))
            .collect();
        for install in installs_named_by(&words, &cache) {
            // An install may carry Codex (a published driver's npm prefix): its bundled
            // bubblewraps are the environment's to change too. Only installs are searched.
            let bundled = sandbox::overlays::bundled_bwraps_in_install(&install);
            mounts.bundled_bwraps.extend(bundled);
            mounts.readonly.push(install);
        }
    }
    if let Some(dir) = &declared.base_dir {
        mounts.readonly.push(dir.clone());
    }
    Ok(mounts)
}

/// Stage 4: the driver, given the tap as its app-server, run within its bounds through
/// `launcher`; then `recording` (the tap's other end) is finished.
pub(crate) async fn run(
    driver: &Driver,
    recording: Arc<Recording>,
    launcher: &dyn Launcher,
) -> Result<DriverRun> {
    let launch = &driver.launch;
    if let Some(why) = launch
        .program
        .as_deref()
        .and_then(|program| launcher.cannot_start(program))
    {
        bail!(
            "the driver `{}` cannot start in this environment: {why}",
            driver.declaration.name
        );
    }
    let telling = launch.tell.clone().map(|tell| Telling {
        tell,
        tap_socket: driver.tap.socket.clone(),
    });
    let ran = process::run(
        &launch.process,
        launcher,
        launch.bounds,
        &launch.transcript,
        telling,
    )
    .await
    .map(|ran| process::Ran {
        end: driver.mutation.driver_end(&recording, ran.end),
        told: ran.told,
    });
    // The driver's launches end with it (its taps died with its process group); what is still
    // running is killed, and the transcript is complete and sealed.
    let transcript =
        tokio::task::spawn_blocking(move || recording.finish(driver::bounds::LAUNCH_FINISH_GRACE))
            .await
            .context("finishing the recording")?;
    let ran = ran?;
    Ok(DriverRun {
        end: ran.end,
        events: launch.events.clone(),
        transcript,
        told: ran.told,
    })
}

/// The bounds on a driver process, from the task and its waits: start-up attempts, one
/// `turn_total` per turn the task implies, shutdowns, plus margin; idle: [`idle_bound`]. The
/// overall bound always leaves room for the start allowance and two whole idle waits (a patient
/// driver's declared wait may be longer than the task's turns).
pub fn bounds(timeouts: &Timeouts, task: &Task, declared: Option<&DeclaredDriver>) -> Bounds {
    let turns =
        1 + task.plan_reviews.len() + task.answers.len() + usize::from(task.relaunch.is_some());
    let turns = u32::try_from(turns)
        .unwrap_or(u32::MAX)
        .min(task.max_turns.max(1));
    let attempts = timeouts.startup_attempts.max(1);
    let idle = idle_bound(timeouts, declared);
    let overall = timeouts.request * 2 * attempts
        + timeouts.turn_total * turns
        + timeouts.shutdown * 2
        + bounds::DRIVER_OVERALL_MARGIN;
    Bounds {
        overall: overall.max(bounds::DRIVER_START_ALLOWANCE + idle * 2),
        idle,
    }
}

/// How long a driver may say nothing on the wire before the harness takes it to be hung. A
/// driver that declares its own idle timeout (`idle_timeout_seconds`) gives up on a silent
/// app-server by itself: the harness waits that long, then the shutdown the task allows, then
/// [`bounds::IDLE_MARGIN`] — shorter than the default for a quick driver (its `hang` cells end when it
/// gives up, not at the harness's limit), longer for a patient one (it is not killed before it
/// classifies the hang). Otherwise: longer than any single wait of the task.
pub fn idle_bound(timeouts: &Timeouts, declared: Option<&DeclaredDriver>) -> Duration {
    let slack = timeouts.shutdown + bounds::IDLE_MARGIN;
    match declared.and_then(|d| d.idle_timeout_seconds) {
        Some(seconds) => Duration::from_secs(seconds) + slack,
        None => timeouts.request.max(timeouts.turn_idle) + slack,
    }
}

/// The existing files a driver's command line (its words) names by absolute path (they must be
/// visible inside the environment's container).
pub(crate) fn files_named_by(words: &[String]) -> Vec<PathBuf> {
    words
        .iter()
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
pub(crate) fn installs_named_by(words: &[String], cache: &Path) -> Vec<PathBuf> {
    let mut installs = Vec::new();
    let mut add = |folder: PathBuf| {
        if folder.is_dir() && !installs.contains(&folder) {
            installs.push(folder);
        }
    };
    for word in words {
        let named = Path::new(word);
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

#[cfg(test)]
mod tests {
    use super::installs_named_by;
    use crate::context::CellContext;
    use crate::stages::{app_server, folders};

    /// The sandbox binds the task read-only: what the driver reads there must be whole by then,
    /// never a file the sandbox created empty for a later stage to fill.
    #[tokio::test]
    async fn a_declared_driver_has_its_task_written_whole_before_the_sandbox_stage() {
        let out = tempfile::tempdir().unwrap();
        let ctx = CellContext {
            out_root: out.path().to_path_buf(),
            harness_binary: std::env::current_exe().unwrap(),
            fake_args: Vec::new(),
            driver_cmd: None,
            repo_root: None,
            ci: false,
            kept_bundles: None,
            mutation: Default::default(),
            local_isolation: false,
        };
        let matrix = crate::load::load_matrix(None, &[], None).unwrap();
        let cell = matrix
            .cells
            .iter()
            .find(|cell| {
                cell.name()
                    .starts_with("codex-planning-read-only.runner-fake.local.")
            })
            .expect("a reference-driver cell against the fake, local");
        let folders = folders::prepare(&ctx, cell).unwrap();
        let prepared = app_server::prepare(&ctx, cell, &folders).await.unwrap();
        assert!(prepared.mock.is_none(), "the fake starts nothing to hold");
        let driver = super::declare(&ctx, cell, &folders, &prepared.app_server).unwrap();
        let envelope: serde_json::Value =
            serde_json::from_slice(&std::fs::read(folders.dirs.evidence.task()).unwrap())
                .expect("the task file holds the whole envelope");
        assert_eq!(
            envelope["prompt"].as_str(),
            Some(folders.task.prompt.as_str())
        );
        assert!(
            driver.tap.codex.is_file(),
            "the tap is installed with the driver"
        );
    }

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
        let words = [
            venv_bin.join("python"),
            "/repo/run.py".into(),
            "--agent".into(),
            agent,
            "--missing".into(),
            cache.join("npm/absent-1.0/x"),
        ]
        .map(|word| word.display().to_string());
        assert_eq!(
            installs_named_by(&words, &cache),
            vec![
                cache.join("pypi/sdk-1.0"),
                prefix,
                cache.join("npm/acp-2.0")
            ]
        );
        // Nothing outside the cache is bound on its own account.
        let outside = ["/usr/bin/node".to_string(), "/repo/client.mjs".into()];
        assert!(installs_named_by(&outside, &cache).is_empty());
    }
}
