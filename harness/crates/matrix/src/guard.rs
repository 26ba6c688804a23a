//! What one attempt of a cell holds while it runs, as values: the cell's cgroup, the
//! environment's launcher (a Docker container lives as long as it; runc containers live as long
//! as the guard of the process they run, which the process's runner holds), and the real
//! Codex's mock model API. A stage that starts one returns it beside its output, and the cell's
//! attempt hands it to the [`CellGuard`] (no stage holds the guard), so whatever happens next —
//! an error, the scheduler dropping the cell on a stop, a panic — dropping the guard is the
//! teardown; a stage that fails midway drops what it had started itself, as the guard would
//! (launchers first, then the cgroup). The orderly end is [`CellGuard::finish`].

use codex::mock_api::MockModelApi;
use sandbox::containment::CellCgroup;
use sandbox::launcher::Launcher;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct CellGuard {
    /// The cell's name, for what is said about it.
    cell: String,
    /// The cell's evidence folder (its processes' `TMPDIR` is below it).
    root: PathBuf,
    cgroup: Option<CellCgroup>,
    launcher: Option<Arc<dyn Launcher>>,
    app_server_launcher: Option<Arc<dyn Launcher>>,
    mock: Option<MockModelApi>,
    finished: bool,
}

impl CellGuard {
    pub fn new(cell: &str, root: &Path) -> Self {
        Self {
            cell: cell.to_string(),
            root: root.to_path_buf(),
            cgroup: None,
            launcher: None,
            app_server_launcher: None,
            mock: None,
            finished: false,
        }
    }

    /// Hold the real Codex's mock model API (the fake has none) until the cell ends.
    pub(crate) fn hold_mock(&mut self, mock: Option<MockModelApi>) {
        self.mock = mock;
    }

    /// Hold what the sandbox stage started until the cell ends.
    pub(crate) fn hold_sandbox(&mut self, contained: Contained) {
        let Contained {
            cgroup,
            driver_launcher,
            app_server_launcher,
        } = contained;
        self.cgroup = cgroup;
        self.launcher = Some(driver_launcher);
        self.app_server_launcher = Some(app_server_launcher);
    }

    /// The launcher the sandbox stage made, lent to the stages after it.
    pub(crate) fn launcher(&self) -> anyhow::Result<&dyn Launcher> {
        self.launcher.as_deref().ok_or_else(|| {
            anyhow::anyhow!("the cell has no launcher: its sandbox stage did not run")
        })
    }

    /// The orderly end of the attempt: the launcher goes (a Docker container is removed), the
    /// mock model API seals its model log and stops (and writes how long it served), then
    /// whatever the cell left running is killed and its cgroup removed
    /// ([`sandbox::reap::after_cell`], the one reaping of the cell). Returns what had to be
    /// killed and the model log's seal, for the cell's evidence.
    pub(crate) async fn finish(mut self) -> Finished {
        self.finished = true;
        drop(self.launcher.take());
        drop(self.app_server_launcher.take());
        let mut model_log = None;
        if let Some(mock) = self.mock.take() {
            let seal = mock.seal_model_log();
            model_log = Some(tap::record::Seal {
                bytes: seal.bytes,
                sha256: seal.sha256,
            });
            mock.shutdown().await;
        }
        Finished {
            left_behind: sandbox::reap::after_cell(self.cgroup.take(), &self.root),
            model_log,
        }
    }
}

/// What the sandbox stage started that must end with the cell: the cell's cgroup (`None`
/// without containment) and the environment's launchers, the driver's and the app-server's
/// (the recorder starts each launch through it).
pub(crate) struct Contained {
    pub(crate) cgroup: Option<CellCgroup>,
    pub(crate) driver_launcher: Arc<dyn Launcher>,
    pub(crate) app_server_launcher: Arc<dyn Launcher>,
}

/// What [`CellGuard::finish`] leaves for the cell's evidence.
pub(crate) struct Finished {
    /// The processes it had to kill (pid, command).
    pub(crate) left_behind: Vec<(i32, String)>,
    /// What the harness's own model-log writer wrote (the real Codex's mock model API); `None`
    /// when a child wrote it (the fake).
    pub(crate) model_log: Option<tap::record::Seal>,
}

impl Drop for CellGuard {
    /// The attempt ended without [`CellGuard::finish`] (an error, a stop, a panic): the same
    /// teardown, said on stderr since no evidence will carry it.
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        drop(self.launcher.take());
        drop(self.app_server_launcher.take());
        drop(self.mock.take());
        let killed = sandbox::reap::after_cell(self.cgroup.take(), &self.root);
        if !killed.is_empty() {
            tracing::warn!(target: "notice",
                "harness: {}: killed {}",
                self.cell,
                sandbox::cgroup::describe(&killed)
            );
        }
    }
}
