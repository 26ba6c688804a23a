//! The cell's session recorder (`tap::session::Recording`), with its app-servers started the way
//! every process of the cell is: through the cell's launcher — the host for `local`, a container
//! of the cell's environment otherwise — as the harness's children, never the driver's. The
//! sandbox stage starts it; the driver stage finishes it when the driver ended; the events
//! stage checks the transcript against its seal.

use anyhow::{Context, Result};
use sandbox::launcher::{Launcher, ProcessSpec};
use sandbox::prestart::Prestarted;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tap::session::{AppServerSetup, LaunchRequest, Options, Recording, Spawn, Spawned};

/// Starts each launch's app-server through the cell's launcher.
pub(crate) struct LauncherSpawn {
    launcher: Arc<dyn Launcher>,
    /// Where an app-server starts when the tap's folder is not one it can see: the workspace.
    workspace: PathBuf,
    /// Folders the app-server's environment has at their own paths (a tap's folder below one
    /// of them is kept); `None`: every folder of the host (`local`).
    visible: Option<Vec<PathBuf>>,
    /// The first launch's container, started while the driver starts ([`Self::prestart`]).
    prestarted: std::sync::Mutex<Option<Prestarted>>,
}

impl LauncherSpawn {
    pub(crate) fn new(
        launcher: Arc<dyn Launcher>,
        workspace: &Path,
        visible: Option<Vec<PathBuf>>,
    ) -> Self {
        Self {
            launcher,
            workspace: workspace.to_path_buf(),
            visible,
            prestarted: std::sync::Mutex::new(None),
        }
    }

    /// Where a launch costs a container start, start the first launch's container now, with
    /// the harness binary standing in for `program` until the launch says what to run
    /// ([`sandbox::prestart`]): the driver's session then does not wait for it. Only for an
    /// app-server the harness binary serves (the fake): the stand-in is then the program the
    /// container is set up for. A prestart that fails costs nothing but itself: the launch
    /// starts its container as it would have.
    pub(crate) fn prestart(&self, program: &Path, binary: &Path) {
        if !self.launcher.prestart_pays() || program != binary {
            return;
        }
        let stand_in = [crate::hidden::TOLD_EXEC.to_string()];
        if let Ok(prestarted) =
            Prestarted::start(self.launcher.as_ref(), program, &stand_in, &self.workspace)
        {
            *self
                .prestarted
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(prestarted);
        }
    }

    /// The launch in the prestarted container, if there is one for `request`'s program and it
    /// takes the spec; else `None` (and an unusable one is ended).
    fn launch_prestarted(&self, request: &LaunchRequest, cwd: &Path) -> Option<Spawned> {
        let prestarted = self
            .prestarted
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
            .filter(|p| p.program() == request.program)?;
        let told = ProcessSpec {
            program: request.program.to_path_buf(),
            args: request.args.to_vec(),
            env: request.env.to_vec(),
            cwd: cwd.to_path_buf(),
        };
        let (child, guard) = prestarted.run(&told).ok()?;
        Some(Spawned {
            child,
            cwd: cwd.to_path_buf(),
            guard,
        })
    }

    /// The app-server's folder: the tap's (the driver's), as the driver's `codex` would have
    /// had, where the app-server's environment has it; else the workspace.
    fn cwd(&self, tap_cwd: &Path) -> PathBuf {
        let seen = match &self.visible {
            None => tap_cwd.is_absolute() && tap_cwd.is_dir(),
            Some(folders) => folders.iter().any(|f| tap_cwd.starts_with(f)) && tap_cwd.is_dir(),
        };
        if seen {
            tap_cwd.to_path_buf()
        } else {
            self.workspace.clone()
        }
    }
}

impl Spawn for LauncherSpawn {
    fn spawn(&self, request: &LaunchRequest) -> Result<Spawned> {
        let cwd = self.cwd(request.tap_cwd);
        if let Some(spawned) = self.launch_prestarted(request, &cwd) {
            return Ok(spawned);
        }
        let prepared = self.launcher.prepare(&ProcessSpec {
            program: request.program.to_path_buf(),
            args: request.args.to_vec(),
            env: request.env.to_vec(),
            cwd: cwd.clone(),
        })?;
        let (child, guard) = prepared
            .spawn_piped()
            .with_context(|| format!("starting {}", request.program.display()))?;
        Ok(Spawned { child, cwd, guard })
    }
}

/// Start recording the cell: the socket the tap connects to, the transcript, what each launch
/// starts and where, the mutation operator its driver's lines go through (`harness mutate`) and
/// the transport timing of its case's scenario.
pub(crate) fn start(
    socket: &Path,
    transcript: &Path,
    setup: AppServerSetup,
    spawn: LauncherSpawn,
    options: Options,
) -> Result<Recording> {
    Recording::start_with(socket, transcript, setup, Arc::new(spawn), options)
        .with_context(|| format!("listening for the tap on {}", socket.display()))
}
