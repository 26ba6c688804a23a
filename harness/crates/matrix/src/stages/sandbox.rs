//! Stage 3, sandbox and tap: the environment the driver and its app-server run in, and the wire
//! tap standing in for `codex`. Here, and only here: the environment's probe (once per
//! environment and process), the mounts every earlier stage asked for merged into one, the
//! cell's cgroup, the launcher (host, runc or Docker; every process it starts joins the
//! cgroup), the tap relaying to the app-server, and which bubblewrap Codex would use there.

use super::app_server::AppServer;
use super::driver::Driver;
use super::folders::Folders;
use crate::context::CellContext;
use crate::guard::CellGuard;
use crate::hidden;
use anyhow::{bail, Context, Result};
use report::layout;
use sandbox::containment::CellCgroup;
use sandbox::environment::{launcher_with, LauncherOptions};
use sandbox::launcher::{ContainedLauncher, EnvMounts, Launcher};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use suites::Cell;
use tap::session::{AppServerSetup, Recording};
use tap::InstalledTap;
use tokio::sync::OnceCell;

/// What stage 3 hands on. The launcher and the cgroup it made are the cell guard's, so they
/// end with the cell ([`CellGuard::launcher`] lends the launcher to the driver stage).
pub struct Sandbox {
    pub tap: InstalledTap,
    /// The harness's end of the tap: it starts the app-server for each launch and writes the
    /// transcript. The driver stage finishes it when the driver ended.
    pub recording: Arc<Recording>,
    /// Which bubblewrap Codex uses in this environment (evidence).
    pub bubblewrap: String,
}

/// Stage 3 of `cell`.
pub async fn enter(
    ctx: &CellContext,
    cell: &Cell,
    folders: &Folders,
    app_server: &AppServer,
    driver: &Driver,
    guard: &mut CellGuard,
) -> Result<Sandbox> {
    let environment = cell.id.environment.as_str();
    let dirs = &folders.dirs;
    if environment != "local" {
        probe_once(ctx, environment).await?;
    }
    // What harnesses killed before left behind goes first (once per process, bounded).
    sandbox::reap::stale_once();
    // The one place the mounts are merged: the cell's folder, then what the app-server and the
    // driver need, in that order.
    let mounts = EnvMounts::scratch(&dirs.root)
        .merge(app_server.mounts.clone())
        .merge(driver.mounts.clone());
    let cgroup = CellCgroup::create(&dirs.root)?;
    let options = LauncherOptions {
        cgroup: cgroup.as_ref().map(|c| c.path().to_path_buf()),
        kept_bundles: ctx.kept_bundles.clone(),
    };
    let launcher = launcher_with(environment, &mounts, &options)
        .with_context(|| format!("starting environment `{environment}`"))?;
    let launcher: Arc<dyn Launcher> = match cgroup {
        Some(cgroup) => {
            let contained = Arc::new(ContainedLauncher::new(launcher, cgroup.joiner()?));
            guard.hold_cgroup(cgroup);
            contained
        }
        None => launcher,
    };
    let visible = (environment != "local").then(|| {
        std::iter::once(mounts.scratch.clone())
            .chain(mounts.writable.iter().cloned())
            .chain(mounts.readonly.iter().cloned())
            .collect()
    });
    let spawn = crate::recorder::LauncherSpawn::new(launcher.clone(), &dirs.workspace, visible);
    let (tap, recording) = install_tap(ctx, folders, app_server, spawn)?;
    let bubblewrap = sandbox::probe::bubblewrap_in_use(
        launcher.as_ref(),
        &app_server.bundled_bwrap,
        &dirs.workspace,
    )
    .await;
    guard.hold_launcher(launcher);
    Ok(Sandbox {
        tap,
        recording,
        bubblewrap,
    })
}

/// Install the tap for the driver and start recording at its other end: each launch runs the
/// app-server's program with its leading arguments (less the `app-server` the driver gives
/// itself), the driver's arguments, and the cell's extra arguments.
fn install_tap(
    ctx: &CellContext,
    folders: &Folders,
    app_server: &AppServer,
    spawn: crate::recorder::LauncherSpawn,
) -> Result<(InstalledTap, Arc<Recording>)> {
    let program = &app_server.program;
    // The driver gives `app-server` itself; the program's own flags stay (e.g. the fake's
    // `--sandbox real` of `harness repro`).
    let prefix: Vec<String> = program
        .leading_args
        .iter()
        .filter(|a| *a != "app-server")
        .cloned()
        .collect();
    let dirs = &folders.dirs;
    let tap = tap::install(
        &dirs.evidence.tap(),
        &hidden::tap_program(&ctx.harness_binary),
    )?;
    let setup = AppServerSetup {
        program: program.program.clone(),
        prefix,
        server_args: program.extra_args.clone(),
        env: program.env.clone(),
    };
    let recording = crate::recorder::start(
        &tap.socket,
        &dirs.evidence.transcript(),
        setup,
        spawn,
        ctx.mutation,
    )?;
    Ok((tap, Arc::new(recording)))
}

type ProbeOnce = Arc<OnceCell<Result<(), String>>>;

/// Probe `environment` once per process (environments concurrently, each cell waiting only for
/// its own environment's); a probe that disagrees with the spec is an error of every cell there.
async fn probe_once(ctx: &CellContext, environment: &str) -> Result<()> {
    static PROBES: OnceLock<Mutex<HashMap<String, ProbeOnce>>> = OnceLock::new();
    let once = PROBES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(environment.to_string())
        .or_default()
        .clone();
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
