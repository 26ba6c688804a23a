//! Stage 3, sandbox and recorder: the environment the driver and its app-server run in, and the
//! harness's end of the wire tap the driver finds as `codex`. Here, and only here: the environment's probe (once per
//! environment and process), the mounts every earlier stage asked for merged into one, the
//! cell's cgroup, the launcher (host, runc or Docker; every process it starts joins the
//! cgroup), the recorder at the other end of the driver's tap, relaying to the app-server, and
//! which bubblewrap Codex would use there.

use super::app_server::AppServer;
use super::driver::Driver;
use super::folders::Folders;
use crate::context::CellContext;
use crate::guard::Contained;
use anyhow::{bail, Context, Result};
use report::layout;
use sandbox::containment::CellCgroup;
use sandbox::environment::{launcher_with, LauncherOptions};
use sandbox::isolation::{IsolatedLauncher, Isolation};
use sandbox::launcher::{ContainedLauncher, EnvMounts, Launcher, LocalLauncher};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use suites::Cell;
use tap::session::{AppServerSetup, Recording};
use tokio::sync::OnceCell;

/// What stage 3 hands on, and what it started that must end with the cell: the launchers (the
/// driver's, the app-server's) and the cgroup, for the cell's guard
/// ([`crate::guard::CellGuard::launcher`] lends the driver's to the driver stage).
pub(crate) struct Sandbox {
    /// The harness's end of the tap: it starts the app-server for each launch and writes the
    /// transcript. The driver stage finishes it when the driver ended.
    pub(crate) recording: Arc<Recording>,
    /// For the harness's evidence, once the cell ended (the events stage).
    pub(crate) evidence: SandboxEvidence,
    pub(crate) contained: Contained,
}

/// What the sandbox stage keeps for the cell's evidence.
pub(crate) struct SandboxEvidence {
    /// Which bubblewrap Codex uses in this environment (evidence).
    pub(crate) bubblewrap: String,
    /// The kernel's view of the workspace from here to the cell's end (`tap::workspace`), or
    /// why there is none; the events stage finishes it.
    pub(crate) watcher: Result<tap::workspace::WorkspaceWatcher, String>,
    /// What the harness wrote into the cell folder for the app-server to read, stamped before
    /// the driver starts; the events stage checks it is unchanged.
    pub(crate) inputs: crate::own_evidence::Inputs,
}

/// Stage 3 of `cell`. Should it fail midway, what it started drops here: the launchers, then the
/// cgroup (killing what runs in it).
pub(crate) async fn enter(
    ctx: &CellContext,
    cell: &Cell,
    folders: &Folders,
    app_server: &AppServer,
    driver: &Driver,
) -> Result<Sandbox> {
    let environment = cell.id.environment.as_str();
    let dirs = &folders.dirs;
    if environment != "local" {
        probe_once(ctx, environment).await?;
    }
    // What harnesses killed before left behind goes first (once per process, bounded).
    sandbox::reap::stale_once().map_err(anyhow::Error::msg)?;
    let cgroup = CellCgroup::create(&dirs.root)?;
    let options = LauncherOptions {
        cgroup: cgroup.as_ref().map(|c| c.path().to_path_buf()),
        kept_bundles: ctx.kept_bundles.clone(),
    };
    let joiner = cgroup.as_ref().map(CellCgroup::joiner).transpose()?;
    let contained = |launcher: Arc<dyn Launcher>| -> Arc<dyn Launcher> {
        match &joiner {
            Some(joiner) => Arc::new(ContainedLauncher::new(launcher, joiner.clone())),
            None => launcher,
        }
    };
    // The two places the mounts are merged. The app-server's, here: the folders it works in
    // (the driver's part), then what it needs (its program, the file it writes what the model
    // was told into).
    let app_mounts = EnvMounts::scratch(&dirs.driver).merge(app_server.mounts.clone());
    let starting = || format!("starting environment `{environment}`");
    let app_launcher =
        contained(launcher_with(environment, &app_mounts, &options).with_context(starting)?);
    let app_launcher = app_server_launcher(ctx, folders, &app_mounts, driver, app_launcher)?;
    let driver_launcher = driver_launcher(ctx, folders, environment, driver, &options, &contained)?;
    let visible = (environment != "local").then(|| {
        std::iter::once(app_mounts.scratch.clone())
            .chain(app_mounts.writable.iter().cloned())
            .chain(app_mounts.readonly.iter().cloned())
            .collect()
    });
    let spawn = crate::recorder::LauncherSpawn::new(app_launcher.clone(), &dirs.workspace, visible);
    spawn.prestart(&app_server.program.program, &ctx.harness_binary);
    let recording = start_recording(folders, app_server, driver, spawn)?;
    let bubblewrap = bubblewrap_once(environment, app_server, app_launcher.as_ref(), dirs).await;
    // From here on the driver and its app-server may write the workspace: watched from now.
    let watcher = tap::workspace::watch(&dirs.workspace, &dirs.evidence.workspace_changes())
        .map_err(|e| format!("{e:#}"));
    let inputs = crate::own_evidence::Inputs::stamp(&[
        dirs.evidence.scenario(),
        dirs.evidence.fake_codex_package(),
    ])
    .map_err(|why| anyhow::anyhow!("stamping the app-server's inputs: {why}"))?;
    Ok(Sandbox {
        recording,
        evidence: SandboxEvidence {
            bubblewrap,
            watcher,
            inputs,
        },
        contained: Contained {
            cgroup,
            driver_launcher,
            app_server_launcher: app_launcher,
        },
    })
}

/// Wraps a launcher so every process it starts joins the cell's cgroup (when there is one).
type Contain<'a> = dyn Fn(Arc<dyn Launcher>) -> Arc<dyn Launcher> + 'a;

/// The app-server's launcher: `in_environment` (the environment's, on `app_mounts`), or, for
/// an app-server on the host, an isolated view through it that shows what the driver's command
/// names too.
fn app_server_launcher(
    ctx: &CellContext,
    folders: &Folders,
    app_mounts: &EnvMounts,
    driver: &Driver,
    in_environment: Arc<dyn Launcher>,
) -> Result<Arc<dyn Launcher>> {
    let dirs = &folders.dirs;
    match dirs.local_app_server {
        Some(ids) => {
            // The driver starts its codex from a folder it sees (its cwd is the launch's): the
            // folders its command names are shown to the app-server too, read-only, so a launch
            // from one of them starts where it did when the app-server saw the whole host.
            let declared = &driver.declaration.mounts;
            let view = EnvMounts {
                readonly: app_mounts
                    .readonly
                    .iter()
                    .chain(std::iter::once(&declared.scratch).filter(|p| !p.as_os_str().is_empty()))
                    .chain(&declared.writable)
                    .chain(&declared.readonly)
                    .cloned()
                    .collect(),
                ..app_mounts.clone()
            };
            app_server_isolated(ctx, dirs, ids, &view, in_environment)
        }
        None => Ok(in_environment),
    }
}

/// The driver's launcher: on the host, isolated ([`isolated_on_the_host`]), where the
/// environment runs its driver there; else in the environment.
fn driver_launcher(
    ctx: &CellContext,
    folders: &Folders,
    environment: &str,
    driver: &Driver,
    options: &LauncherOptions,
    contained: &Contain<'_>,
) -> Result<Arc<dyn Launcher>> {
    let dirs = &folders.dirs;
    let starting = || format!("starting environment `{environment}`");
    // The other place the mounts are merged, the driver's: its own part, the tap (its shim and
    // the recorder's socket) and its task read-only (both written when it was declared), then
    // what its command names — never the harness's evidence.
    let driver_mounts = EnvMounts {
        scratch: dirs.driver.clone(),
        readonly: vec![dirs.evidence.tap(), dirs.evidence.task()],
        ..EnvMounts::default()
    }
    .merge(driver.declaration.mounts.clone());
    if sandbox::catalogue::spec(environment)?.driver_on_host() {
        let on_the_host = contained(Arc::new(LocalLauncher));
        Ok(isolated_on_the_host(ctx, dirs, &driver_mounts, on_the_host))
    } else {
        Ok(contained(
            launcher_with(environment, &driver_mounts, options).with_context(starting)?,
        ))
    }
}

/// The driver on the host with no more power than an unprivileged user's
/// ([`sandbox::isolation`]): the output folder (every cell's evidence, other runs) hidden but
/// its own part, writable, and what it must read (its task, the tap, its program and what its
/// command names, the installs it reaches into) read-only; private `/tmp`, `/var/tmp` and
/// `/dev/shm`; a cgroup namespace rooted at the cell's cgroup; under a root harness, a uid of
/// the cell's own. Where the kernel allows none of this (or the context turned it off), said
/// once: the cell's evidence is then checked for being its own ([`crate::own_evidence`],
/// docs/prerequisites.md).
fn isolated_on_the_host(
    ctx: &CellContext,
    dirs: &super::folders::CellFolders,
    mounts: &EnvMounts,
    launcher: Arc<dyn Launcher>,
) -> Arc<dyn Launcher> {
    let available = if ctx.local_isolation {
        sandbox::isolation::available().clone()
    } else {
        Err(format!(
            "turned off by {}=off",
            crate::context::LOCAL_ISOLATION_VAR
        ))
    };
    match available {
        Ok(_) => Arc::new(IsolatedLauncher::new(
            launcher,
            Isolation {
                run_as: dirs.local_driver,
                ..view_of_the_cell(ctx, mounts)
            },
        )),
        Err(why) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                tracing::warn!(target: "notice",
                    "harness: local drivers run without a mount namespace of their own ({why}): \
                     the evidence is checked for being this cell's own (docs/prerequisites.md, \
                     \"`local`, neither\")"
                )
            });
            launcher
        }
    }
}

/// A `local` cell's app-server under a root harness, contained as its driver is
/// ([`isolated_on_the_host`]) but as a uid of its own and on the host's network (a real-Codex
/// cell's mock model API listens on its loopback): it runs what its client asks
/// (`command/exec` with full access, `fs/*`), and its client is the driver under test. What it
/// writes (the folders its mounts name writable: the fake's model log, the real Codex's home)
/// is handed to that uid; the rest of the cell's evidence is hidden from it.
fn app_server_isolated(
    ctx: &CellContext,
    dirs: &super::folders::CellFolders,
    ids: sandbox::isolation::DriverIds,
    mounts: &EnvMounts,
    launcher: Arc<dyn Launcher>,
) -> Result<Arc<dyn Launcher>> {
    let passwd = passwd_naming(ids, dirs)?;
    for path in &mounts.writable {
        hand_tree_to(path, ids)
            .with_context(|| format!("handing {} to the app-server's uid", path.display()))?;
    }
    Ok(Arc::new(IsolatedLauncher::new(
        launcher,
        Isolation {
            run_as: Some(ids),
            host_network: true,
            replaced: vec![(passwd, "/etc/passwd".into())],
            ..view_of_the_cell(ctx, mounts)
        },
    )))
}

/// What a process of a `local` cell sees: the output folder and the key the harness marks its
/// evidence with hidden, private temporary folders, `mounts` at their own paths, its own
/// network, the harness's uid (callers name theirs).
fn view_of_the_cell(ctx: &CellContext, mounts: &EnvMounts) -> Isolation {
    // The key is made before any driver runs, so its folder exists to be hidden (a driver of
    // the harness's own uid could otherwise plant a key of its choosing before the first
    // cell's events are written).
    let key_folder = codex::provision::cache_root()
        .ok()
        .filter(|_| super::events::evidence_key().is_ok())
        .map(|cache| driver::provenance::Key::folder(&cache));
    Isolation {
        hidden: std::iter::once(ctx.out_root.clone())
            .chain(key_folder)
            .collect(),
        private: sandbox::isolation::private_folders(),
        writable: std::iter::once(mounts.scratch.clone())
            .chain(mounts.writable.iter().cloned())
            .collect(),
        read_only: mounts.readonly.clone(),
        run_as: None,
        host_network: false,
        replaced: Vec::new(),
    }
}

/// The host's `/etc/passwd` with an account for the app-server's uid, written into the cell's
/// evidence (hidden from the driver and the app-server alike): the real Codex takes the shell it
/// runs commands with from its user's account, as on a developer's machine (`/bin/bash`; a
/// uid without one gets the first `bash` on `PATH`).
fn passwd_naming(
    ids: sandbox::isolation::DriverIds,
    dirs: &super::folders::CellFolders,
) -> Result<std::path::PathBuf> {
    let host = std::fs::read_to_string("/etc/passwd").context("reading /etc/passwd")?;
    let mut text = host.trim_end().to_string();
    text.push_str(&format!(
        "\ncodex-app-server:x:{}:{}:the cell's app-server:{}:/bin/bash\n",
        ids.uid,
        ids.gid,
        dirs.home.display()
    ));
    let path = dirs.root.join(APP_SERVER_PASSWD);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The file [`passwd_naming`] writes, in the cell's folder.
const APP_SERVER_PASSWD: &str = "app-server-passwd";

/// `path` and what it holds, links left alone, owned by `ids`.
fn hand_tree_to(path: &std::path::Path, ids: sandbox::isolation::DriverIds) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    std::os::unix::fs::lchown(path, Some(ids.uid), Some(ids.gid))?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            hand_tree_to(&entry?.path(), ids)?;
        }
    }
    Ok(())
}

/// Start recording at the tap's other end: each launch runs the app-server's program with its
/// leading arguments (less the `app-server` the driver gives itself), the driver's arguments,
/// and the cell's extra arguments.
fn start_recording(
    folders: &Folders,
    app_server: &AppServer,
    driver: &Driver,
    spawn: crate::recorder::LauncherSpawn,
) -> Result<Arc<Recording>> {
    let program = &app_server.program;
    // The driver gives `app-server` itself; the program's own flags stay (e.g. the fake's
    // `--sandbox real` of `harness repro`).
    let prefix: Vec<String> = program
        .leading_args
        .iter()
        .filter(|a| *a != "app-server")
        .cloned()
        .collect();
    let setup = AppServerSetup {
        program: program.program.clone(),
        prefix,
        server_args: program.extra_args.clone(),
        env: program.env.clone(),
        // What the driver hands on of its canaries reaches the app-server, as with `codex`.
        inherit_env: driver
            .declaration
            .canaries
            .as_ref()
            .map(|c| c.env().to_vec())
            .unwrap_or_default(),
    };
    let recording = crate::recorder::start(
        &driver.tap.socket,
        &folders.dirs.evidence.transcript(),
        setup,
        spawn,
        tap::session::Options {
            mutation: driver.mutation.for_the_recorder(),
            timing: app_server.timing.clone(),
        },
    )?;
    Ok(Arc::new(recording))
}

/// Which bubblewrap Codex uses in `environment`, looked up once per process for each
/// (environment, app-server program): the answer depends on nothing else (the environment's
/// bubblewraps, and the package's bundled one — the fake's stand-in is a copy of the system's
/// in every cell). The first cell of a pair looks it up in its own container, before its driver
/// starts, so no cell's run can have touched what the others are told; a failed lookup is not
/// kept (the next cell tries again) and this cell says it failed.
async fn bubblewrap_once(
    environment: &str,
    app_server: &AppServer,
    launcher: &dyn Launcher,
    dirs: &super::folders::CellFolders,
) -> String {
    static ANSWERS: OnceCells<(String, std::path::PathBuf), sandbox::probe::BubblewrapInUse> =
        OnceLock::new();
    let once = once_cell_of(
        &ANSWERS,
        (environment.to_string(), app_server.program.program.clone()),
    );
    let bundled = &app_server.bundled_bwrap;
    let looked_up = once
        .get_or_try_init(|| sandbox::probe::bubblewrap_in_use(launcher, bundled, &dirs.workspace))
        .await;
    match looked_up {
        Ok(answer) => answer.describe(bundled),
        Err(err) => format!("unknown: the lookup failed: {err:#}"),
    }
}

/// Process-wide once-cells by key: what every cell of a run shares, computed by the first.
type OnceCells<K, V> = OnceLock<Mutex<HashMap<K, Arc<OnceCell<V>>>>>;

/// The once-cell of `key` in `cells`, created empty the first time.
fn once_cell_of<K: Eq + std::hash::Hash, V>(
    cells: &'static OnceCells<K, V>,
    key: K,
) -> Arc<OnceCell<V>> {
    cells
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key)
        .or_default()
        .clone()
}

/// Probe `environment` once per process (environments concurrently, each cell waiting only for
/// its own environment's); a probe that disagrees with the spec is an error of every cell there.
async fn probe_once(ctx: &CellContext, environment: &str) -> Result<()> {
    static PROBES: OnceCells<String, Result<(), String>> = OnceLock::new();
    let once = once_cell_of(&PROBES, environment.to_string());
    let result = once
        .get_or_init(|| async {
            let scratch = ctx.out_root.join(layout::PROBES).join(environment);
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
