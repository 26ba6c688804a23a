//! Stage 1, folders: the cell's folder, cleared — the harness's evidence, and the driver's own
//! part (`driver/`: `workspace/`, `home/` and `tmp/`, handed to the environment's container
//! user; the layout is `report::layout`'s) — the task, and the scenario the app-server plays.

use crate::context::CellContext;
use anyhow::{anyhow, Context, Result};
use driver::task::Task;
use fake_app_server::scenario::Scenario;
use report::layout::CellEvidence;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use suites::spec::{AppServerKind, ScenarioRef};
use suites::Cell;

/// The workspace's `AGENTS.md`: restricted-read profiles load it through Codex's bubblewrap fs
/// helper at `thread/start`, which is what fails in the restricted environments.
const AGENTS_MD: &str = "# Project agents\nAlways be terse.\n";

/// What stage 1 hands on.
pub struct Folders {
    pub dirs: CellFolders,
    pub task: Task,
    pub scenario: Scenario,
    /// How the fake is told the scenario: `builtin:NAME`, or the file written into the folder.
    pub scenario_arg: String,
}

/// Stage 1 of `cell`.
pub fn prepare(ctx: &CellContext, cell: &Cell) -> Result<Folders> {
    let evidence = ctx.evidence(cell);
    let spec = sandbox::catalogue::spec(&cell.id.environment)?;
    let owner = spec.container_user();
    let mut dirs = CellFolders::create(&evidence, owner)?;
    if spec.driver_on_host() {
        dirs.local_driver = local_driver_ids(ctx, owner);
        if let Some(ids) = dirs.local_driver {
            ids.open_to_driver(&[&dirs.driver])?;
            if owner.is_none() {
                let app_server = app_server_ids(ids);
                dirs.local_app_server = Some(app_server);
                dirs.keep_app_server_folders_from_driver(app_server)?;
            }
        }
    }
    let task = task_for(cell)?;
    let (scenario, scenario_arg) = scenario_for(cell, &evidence)?;
    Ok(Folders {
        dirs,
        task,
        scenario,
        scenario_arg,
    })
}

/// The folders of one cell.
pub struct CellFolders {
    pub evidence: CellEvidence,
    pub root: PathBuf,
    /// The driver's own part (the only one it may write): the working folders below, its task
    /// and its own events.
    pub driver: PathBuf,
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// uid/gid the environment's container runs processes as (`None`: the harness's own).
    pub owner: Option<(u32, u32)>,
    /// The uid and gid a root harness runs this `local` cell's driver as
    /// (`sandbox::isolation`): its own part is handed to that group.
    pub local_driver: Option<sandbox::isolation::DriverIds>,
    /// The uid (and the driver's gid, so both write the cell's group-writable folders) a root
    /// harness runs this `local` cell's app-server as: not root, and not the driver's uid, so
    /// the driver can neither signal nor trace it (stage 3 isolates it too).
    pub local_app_server: Option<sandbox::isolation::DriverIds>,
}

/// A uid of the cell's own for its app-server, other than the driver's, with the driver's gid.
fn app_server_ids(driver: sandbox::isolation::DriverIds) -> sandbox::isolation::DriverIds {
    let uid = match sandbox::isolation::DriverIds::fresh().uid {
        same if same == driver.uid => same ^ 1,
        other => other,
    };
    sandbox::isolation::DriverIds {
        uid,
        gid: driver.gid,
    }
}

/// A uid of the cell's own for its driver on the host: where the harness is root and the driver
/// runs isolated (stage 3). Beside a virtual machine's app-server, the guest's uid (`owner`):
/// the launcher hands the driver's part to that uid before each app-server starts, and the
/// driver must still write its own events there.
fn local_driver_ids(
    ctx: &CellContext,
    owner: Option<(u32, u32)>,
) -> Option<sandbox::isolation::DriverIds> {
    (ctx.local_isolation
        && nix::unistd::geteuid().is_root()
        && sandbox::isolation::available().is_ok())
    .then(|| match owner {
        Some((uid, gid)) => sandbox::isolation::DriverIds { uid, gid },
        None => sandbox::isolation::DriverIds::fresh(),
    })
}

impl CellFolders {
    pub(crate) fn create(evidence: &CellEvidence, owner: Option<(u32, u32)>) -> Result<Self> {
        let root = &evidence.root;
        if root.exists() {
            std::fs::remove_dir_all(root)
                .with_context(|| format!("clearing old evidence in {}", root.display()))?;
        }
        let layout = Self {
            evidence: evidence.clone(),
            root: root.clone(),
            driver: evidence.driver(),
            workspace: evidence.workspace(),
            home: evidence.home(),
            tmp: evidence.tmp(),
            owner,
            local_driver: None,
            local_app_server: None,
        };
        for dir in [&layout.workspace, &layout.home, &layout.tmp] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let git = layout.workspace.join(".git");
        std::fs::create_dir_all(&git).with_context(|| format!("creating {}", git.display()))?;
        for (name, text) in [
            ("AGENTS.md", AGENTS_MD),
            (
                "README.md",
                "# Sample project\nA workspace for one conformance cell.\n",
            ),
        ] {
            let path = layout.workspace.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        if let Some((uid, gid)) = owner {
            // The app-server and the driver run as this user inside their containers: they must
            // own their folders (the workspace stays writable to it, so a refused write proves
            // the sandbox). The evidence stays the harness's.
            for dir in [&layout.driver, &layout.workspace, &layout.home, &layout.tmp] {
                std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                    .with_context(|| format!("handing {} to uid {uid}", dir.display()))?;
            }
        }
        Ok(layout)
    }
}

impl CellFolders {
    /// On `local` the app-server runs in the driver's part, following the links it finds
    /// there: the folders it writes its own state in are its uid's, 0755, and the driver's part
    /// and its `home` are sticky: the driver can neither write into them nor move them away to
    /// put its own, with links, in their place. (The real Codex's `codex/` folder, made later,
    /// is handed to the same uid in stage 3.)
    fn keep_app_server_folders_from_driver(
        &self,
        app_server: sandbox::isolation::DriverIds,
    ) -> Result<()> {
        let codex_home = self.home.join(".codex");
        std::fs::create_dir_all(&codex_home)
            .with_context(|| format!("creating {}", codex_home.display()))?;
        std::os::unix::fs::chown(&codex_home, Some(app_server.uid), Some(app_server.gid))
            .with_context(|| {
                format!("handing {} to uid {}", codex_home.display(), app_server.uid)
            })?;
        let set_mode = |path: &Path, mode: u32| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("setting the mode of {}", path.display()))
        };
        set_mode(&codex_home, 0o755)?;
        for folder in [&self.driver, &self.home] {
            let mode = std::fs::metadata(folder)
                .with_context(|| format!("reading {}", folder.display()))?
                .permissions()
                .mode();
            set_mode(folder, (mode & 0o7777) | 0o1000)?;
        }
        Ok(())
    }
}

pub(crate) fn task_for(cell: &Cell) -> Result<Task> {
    let mut table = cell.case.task.clone();
    table.insert(
        "mode".into(),
        toml::Value::try_from(cell.case.mode).context("mode")?,
    );
    toml::Value::Table(table)
        .try_into()
        .with_context(|| format!("case `{}`: invalid task", cell.id.case))
}

/// The scenario the cell's app-server plays: the case's real-Codex one against the real Codex.
fn scenario_named(cell: &Cell) -> Result<ScenarioRef> {
    let named = match (cell.runner.app_server, &cell.case.codex_scenario) {
        (AppServerKind::Codex, Some(codex)) => codex,
        _ => &cell.case.scenario,
    };
    ScenarioRef::parse(named).map_err(|e| anyhow!(e))
}

fn shipped_scenario(name: &str) -> Result<&'static str> {
    suites::scenario_file(name)
        .ok_or_else(|| anyhow!("scenario file `{name}` is not shipped with suites"))
}

/// The cell's scenario exists and parses, read from what the suites ship (nothing written):
/// checked when the matrix is loaded, so a cell that could only fail is never listed as one
/// that runs.
pub(crate) fn check_scenario(cell: &Cell) -> Result<()> {
    match scenario_named(cell)? {
        ScenarioRef::Builtin(name) => drop(Scenario::builtin(&name)?),
        ScenarioRef::File(name) => drop(Scenario::from_toml_str(
            shipped_scenario(&name)?,
            Path::new(&name),
        )?),
    }
    Ok(())
}

/// The scenario, and how to name it to the fake (`builtin:NAME` or a file in the cell folder).
pub(crate) fn scenario_for(cell: &Cell, evidence: &CellEvidence) -> Result<(Scenario, String)> {
    match scenario_named(cell)? {
        ScenarioRef::Builtin(name) => Ok((Scenario::builtin(&name)?, format!("builtin:{name}"))),
        ScenarioRef::File(name) => {
            let text = shipped_scenario(&name)?;
            let path = evidence.scenario();
            std::fs::write(&path, text)?;
            Ok((Scenario::from_file(&path)?, display(&path)))
        }
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}
