//! Stage 2: the runner's app-server as a program to start — the fake (the running binary's
//! embedded fake playing the cell's scenario) or the real Codex (provisioned, offline, with a
//! mock model API playing the scenario's model script) — and what it needs mounted.

use super::folders::CellFolders;
use crate::{fake_timeouts, MatrixOptions};
use anyhow::{Context, Result};
use codex::runner::{self as codex_runner, CellDirs, PreparedCodex};
use driver::run::AppServerProgram;
use driver::task::Timeouts;
use fake_app_server::scenario::Scenario;
use sandbox::launcher::EnvMounts;
use std::path::{Path, PathBuf};
use suites::spec::AppServerKind;
use suites::Cell;

/// `PATH` of the fake app-server: system folders only, like the real one's.
const FAKE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A cell's app-server, ready to be started by the tap (or the reference driver).
pub struct AppServer {
    /// The program, its leading arguments (ending in `app-server`), what the cell adds after
    /// the driver's arguments, and its complete environment.
    pub program: AppServerProgram,
    pub model_log: PathBuf,
    pub timeouts: Timeouts,
    /// The real Codex's mock model API, kept alive for the run.
    pub codex: Option<PreparedCodex>,
    /// The fake's stand-in for Codex's bundled bubblewrap, when there is one.
    pub bundled_bwrap: Option<PathBuf>,
}

impl AppServer {
    /// Stop what the app-server needed (the mock model API).
    pub async fn shutdown(&mut self) {
        if let Some(codex) = self.codex.take() {
            codex.mock.shutdown().await;
        }
    }
}

pub async fn prepare(
    cell: &Cell,
    options: &MatrixOptions,
    folders: &CellFolders,
    scenario: &Scenario,
    scenario_arg: String,
    mounts: &mut EnvMounts,
) -> Result<AppServer> {
    let root = &folders.root;
    match cell.runner.app_server {
        AppServerKind::Fake => {
            let path = |p: &Path| p.display().to_string();
            let model_log = root.join("model-log.jsonl");
            let program = AppServerProgram {
                program: options.fake_program.clone(),
                leading_args: options.fake_leading_args.clone(),
                extra_args: fake_args(scenario_arg, path(&model_log)),
                env: vec![
                    ("PATH".into(), FAKE_PATH.into()),
                    ("HOME".into(), path(&folders.home)),
                    // Codex's default layout, named so the fake persists its threads there (it
                    // never writes an unnamed `~/.codex`) and a relaunch can resume them.
                    ("CODEX_HOME".into(), path(&folders.home.join(".codex"))),
                    ("TMPDIR".into(), path(&folders.tmp)),
                    ("LANG".into(), "C.UTF-8".into()),
                ],
            };
            mounts.readonly.push(options.fake_program.clone());
            let mut program = program;
            // In the environment, not the arguments: `codex --version` and the other tool
            // launches (which get no cell arguments) answer as the same release.
            if let Some(version) = &cell.runner.plays {
                program
                    .env
                    .push(("FAKE_APP_SERVER_CODEX_VERSION".into(), version.clone()));
            }
            // A simulation switch of the fake (bubblewrap 0.12's wording) passes through.
            if let Ok(wording) = std::env::var("FAKE_APP_SERVER_BWRAP_WORDING") {
                program
                    .env
                    .push(("FAKE_APP_SERVER_BWRAP_WORDING".into(), wording));
            }
            // The fake's stand-in for Codex's bundled bubblewrap, in a package folder of its
            // own, so environments that hide or change bundled bubblewraps find it too.
            let package = root.join("fake-codex-package");
            let bundled = sandbox::probe::codex_bundled_bwrap(&package.join("bin").join("codex"));
            let mut bundled_bwrap = None;
            if let Some(system) = sandbox::system::which("bwrap") {
                std::fs::create_dir_all(bundled.parent().context("bundled bwrap folder")?)?;
                std::fs::copy(&system, &bundled)
                    .with_context(|| format!("copying {}", system.display()))?;
                program.env.push((
                    "FAKE_APP_SERVER_BUNDLED_BWRAP".into(),
                    bundled.display().to_string(),
                ));
                mounts.readonly.push(package);
                bundled_bwrap = Some(bundled);
            }
            Ok(AppServer {
                program,
                model_log,
                timeouts: fake_timeouts(),
                codex: None,
                bundled_bwrap,
            })
        }
        AppServerKind::Codex => {
            let version = cell
                .runner
                .codex_version
                .as_deref()
                .context("codex runner without codex_version")?;
            let codex_dirs = CellDirs {
                root: root.to_path_buf(),
                owner: folders.owner,
            };
            let prepared = codex_runner::prepare(version, &codex_dirs, scenario)
                .await
                .with_context(|| format!("preparing Codex {version}"))?;
            mounts.writable.extend(prepared.writable_mounts());
            mounts.readonly.extend(prepared.readonly_mounts());
            Ok(AppServer {
                program: prepared.app_server.clone(),
                model_log: prepared.model_log.clone(),
                timeouts: PreparedCodex::timeouts(),
                codex: Some(prepared),
                bundled_bwrap: None,
            })
        }
    }
}

/// The fake's own arguments. The fake is configured with the custom model provider the
/// real-Codex runner gets (`codex_runner::provider_args`; the fake never calls its URL), so both
/// answer alike what a driver reads and echoes: `account/read` (unconfigured, the fake answers
/// as Codex does for the OpenAI provider, `requiresOpenaiAuth: true`, and codex-acp stops at
/// `Authentication required`), `model/list`, and the thread's model, which a driver sends back
/// in its plan-mode `turn/start`.
fn fake_args(scenario_arg: String, model_log: String) -> Vec<String> {
    let mut args = vec![
        "--scenario".into(),
        scenario_arg,
        "--model-log".into(),
        model_log,
    ];
    args.extend(codex_runner::provider_args("http://127.0.0.1:9/v1"));
    args
}
