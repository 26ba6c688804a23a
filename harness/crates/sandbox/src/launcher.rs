//! How a process is started: directly on the host, or inside a restricted environment (see
//! [`crate::environment`]). The driver computes *what* to run (the launch policy's
//! argv); a [`Launcher`] decides *where* it runs.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Folders a launcher binds into its containers (same path inside): the cell's scratch and the
/// other writable folders read-write, `readonly` read-only. Each stage of a cell says what it
/// needs as one of these; [`EnvMounts::merge`] joins them in one place.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvMounts {
    pub scratch: PathBuf,
    pub writable: Vec<PathBuf>,
    pub readonly: Vec<PathBuf>,
    /// Codex's bundled bubblewraps (`codex-resources/bwrap` files) in the packages bound here,
    /// named by whoever binds a package (the Codex an app-server runs, a driver's install): an
    /// environment that changes bubblewraps changes these and the system one. A launcher never
    /// searches the folders it binds for them — a bound folder may hold anything, earlier runs'
    /// evidence among it — beyond the package of the program it starts.
    pub bundled_bwraps: Vec<PathBuf>,
}

impl EnvMounts {
    /// Only the scratch folder.
    pub fn scratch(scratch: &std::path::Path) -> EnvMounts {
        EnvMounts {
            scratch: scratch.to_path_buf(),
            ..EnvMounts::default()
        }
    }

    /// `self` with `other`'s writable and read-only folders added after its own (the scratch
    /// stays `self`'s), in order: later binds of a destination win where a runtime keeps one.
    pub fn merge(mut self, other: EnvMounts) -> EnvMounts {
        self.writable.extend(other.writable);
        self.readonly.extend(other.readonly);
        for bundled in other.bundled_bwraps {
            if !self.bundled_bwraps.contains(&bundled) {
                self.bundled_bwraps.push(bundled);
            }
        }
        self
    }
}

/// A process to start: program, arguments, the complete environment (nothing is inherited),
/// and the working directory. Serialized as what a prestarted stand-in is told to run
/// ([`crate::prestart`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

/// A command ready to spawn, plus what must be undone after the process has exited
/// (container state, mounts, bundle folders). Dropping the guard cleans up.
pub struct PreparedCommand {
    pub command: tokio::process::Command,
    pub guard: Box<dyn Send + Sync>,
}

impl PreparedCommand {
    /// Spawn it as a cell's app-server is started: stdio piped, in its own process group (a
    /// signal to the harness's terminal group is not its, and killing the group takes what it
    /// started). The child and the guard to drop once it has ended.
    pub fn spawn_piped(self) -> std::io::Result<(std::process::Child, Box<dyn Send + Sync>)> {
        use std::os::unix::process::CommandExt;
        use std::process::Stdio;
        let mut command = self.command.into_std();
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        Ok((command.spawn()?, self.guard))
    }
}

/// Where app-server processes run.
pub trait Launcher: Send + Sync {
    /// Name of the environment, as used in cell names (`local`, `daytona`, …).
    fn environment(&self) -> &str;
    /// Turn a process spec into a command to spawn here.
    fn prepare(&self, spec: &ProcessSpec) -> anyhow::Result<PreparedCommand>;
    /// Why `program` (a host path) could not be started here at all, if the launcher can tell
    /// before trying (`crate::reachable`): said before a cell runs, not found as exit 126.
    fn cannot_start(&self, _program: &std::path::Path) -> Option<String> {
        None
    }
    /// Whether starting a process here costs enough that starting it ahead, as a stand-in told
    /// later what to run ([`crate::prestart`]), shortens a session: a container start does.
    fn prestart_pays(&self) -> bool {
        false
    }
}

/// Runs the process directly on the host.
#[derive(Debug, Default, Clone)]
pub struct LocalLauncher;

impl Launcher for LocalLauncher {
    fn environment(&self) -> &str {
        "local"
    }

    fn prepare(&self, spec: &ProcessSpec) -> anyhow::Result<PreparedCommand> {
        let mut command = tokio::process::Command::new(&spec.program);
        command
            .args(&spec.args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&spec.cwd)
            .kill_on_drop(true);
        Ok(PreparedCommand {
            command,
            guard: Box::new(()),
        })
    }
}

/// A launcher whose every process joins a cell's cgroup before it execs (see
/// [`crate::containment`]): on the host the process itself, in a container the
/// `runc run` that creates it, so the container's processes start inside the cell's cgroup too.
pub struct ContainedLauncher {
    inner: std::sync::Arc<dyn Launcher>,
    joiner: crate::cgroup::Joiner,
}

impl ContainedLauncher {
    pub fn new(
        inner: std::sync::Arc<dyn Launcher>,
        joiner: crate::cgroup::Joiner,
    ) -> ContainedLauncher {
        ContainedLauncher { inner, joiner }
    }
}

impl Launcher for ContainedLauncher {
    fn environment(&self) -> &str {
        self.inner.environment()
    }

    fn cannot_start(&self, program: &std::path::Path) -> Option<String> {
        self.inner.cannot_start(program)
    }

    fn prestart_pays(&self) -> bool {
        self.inner.prestart_pays()
    }

    fn prepare(&self, spec: &ProcessSpec) -> anyhow::Result<PreparedCommand> {
        let mut prepared = self.inner.prepare(spec)?;
        let joiner = self.joiner.clone();
        // SAFETY: `join` only makes system calls (open, write, close) on a path converted
        // before the fork. A child that cannot join fails to spawn, so nothing runs uncontained.
        unsafe {
            prepared.command.pre_exec(move || joiner.join());
        }
        Ok(prepared)
    }
}

/// Give a folder (recursively) to an environment's uid so its process can write there: what the
/// runc and kvm launchers do with their writable folders when that uid is not root.
pub(crate) fn hand_over(folder: &Path, uid: u32, gid: u32) -> Result<()> {
    let owner = Some(nix::unistd::Uid::from_raw(uid));
    let group = Some(nix::unistd::Gid::from_raw(gid));
    let mut pending = vec![folder.to_path_buf()];
    while let Some(path) = pending.pop() {
        let meta = std::fs::symlink_metadata(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        nix::unistd::fchownat(
            nix::fcntl::AT_FDCWD,
            &path,
            owner,
            group,
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        )
        .with_context(|| format!("giving {} to uid {uid}", path.display()))?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&path)? {
                pending.push(entry?.path());
            }
        }
    }
    Ok(())
}
