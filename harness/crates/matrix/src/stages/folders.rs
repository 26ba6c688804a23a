//! Stage 1: the cell's folders (`workspace/`, `home/`, `tmp/` below the cell's evidence
//! folder), its task, and its scenario.

use anyhow::{anyhow, Context, Result};
use fake_app_server::scenario::Scenario;
use std::path::{Path, PathBuf};
use suites::spec::{AppServerKind, ScenarioRef};
use suites::Cell;

use driver::task::Task;

/// The workspace's `AGENTS.md`: restricted-read profiles load it through Codex's bubblewrap fs
/// helper at `thread/start`, which is what fails in the restricted environments.
const AGENTS_MD: &str = "# Project agents\nAlways be terse.\n";

/// The folders of one cell.
pub struct CellFolders {
    pub root: PathBuf,
    pub workspace: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// uid/gid the environment's container runs processes as (`None`: the harness's own).
    pub owner: Option<(u32, u32)>,
}

impl CellFolders {
    pub fn create(root: &Path, owner: Option<(u32, u32)>) -> Result<Self> {
        if root.exists() {
            std::fs::remove_dir_all(root)
                .with_context(|| format!("clearing old evidence in {}", root.display()))?;
        }
        let layout = Self {
            root: root.to_path_buf(),
            workspace: root.join("workspace"),
            home: root.join("home"),
            tmp: root.join("tmp"),
            owner,
        };
        for dir in [&layout.workspace, &layout.home, &layout.tmp] {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::create_dir_all(layout.workspace.join(".git"))?;
        std::fs::write(layout.workspace.join("AGENTS.md"), AGENTS_MD)?;
        std::fs::write(
            layout.workspace.join("README.md"),
            "# Sample project\nA workspace for one conformance cell.\n",
        )?;
        if let Some((uid, gid)) = owner {
            // The app-server runs as this user inside the container: it must own its folders
            // (the workspace stays writable to it, so a refused write proves the sandbox).
            for dir in [&layout.root, &layout.workspace, &layout.home, &layout.tmp] {
                std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                    .with_context(|| format!("handing {} to uid {uid}", dir.display()))?;
            }
        }
        Ok(layout)
    }

    pub fn transcript(&self) -> PathBuf {
        self.root.join("transcript.jsonl")
    }
}

pub fn task_for(cell: &Cell) -> Result<Task> {
    let mut table = cell.case.task.clone();
    table.insert(
        "mode".into(),
        toml::Value::try_from(cell.case.mode).context("mode")?,
    );
    toml::Value::Table(table)
        .try_into()
        .with_context(|| format!("case `{}`: invalid task", cell.id.case))
}

/// The scenario, and how to name it to the fake (`builtin:NAME` or a file in the cell folder).
pub fn scenario_for(cell: &Cell, root: &Path) -> Result<(Scenario, String)> {
    let named = match (cell.runner.app_server, &cell.case.codex_scenario) {
        (AppServerKind::Codex, Some(codex)) => codex,
        _ => &cell.case.scenario,
    };
    match ScenarioRef::parse(named).map_err(|e| anyhow!(e))? {
        ScenarioRef::Builtin(name) => Ok((Scenario::builtin(&name)?, format!("builtin:{name}"))),
        ScenarioRef::File(name) => {
            let text = suites::scenario_file(&name)
                .ok_or_else(|| anyhow!("scenario file `{name}` is not shipped with suites"))?;
            let path = root.join("scenario.toml");
            std::fs::write(&path, text)?;
            Ok((Scenario::from_file(&path)?, path.display().to_string()))
        }
    }
}
