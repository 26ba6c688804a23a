//! The two app-servers a session is played against, each in fresh folders of its own: the fake
//! (the harness binary's `fake-app-server`, playing the scenario and the release the pin is) and
//! the pinned real Codex, offline, its model the mock model API playing the same scenario. Both
//! get the model provider and the features a matrix cell's app-server gets
//! (`codex::runner::{provider_args, feature_args}`), so what differs is the app-server.

use super::run::{session_folders, SideCommand};
use super::session::Session;
use anyhow::{Context, Result};
use codex::mock_api::{MockConfig, MockModelApi, MockScript};
use codex::runner as codex_runner;
use std::path::{Path, PathBuf};

/// The provider URL the fake is given: it never calls it.
const UNUSED_MODEL_URL: &str = "http://127.0.0.1:9/v1";

/// Which app-server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideKind {
    Fake,
    Real,
}

impl SideKind {
    pub fn name(self) -> &'static str {
        match self {
            SideKind::Fake => "fake",
            SideKind::Real => "real",
        }
    }
}

/// What plays a session's sides: the harness binary (for the fake) and the pinned Codex.
#[derive(Debug, Clone)]
pub struct Players {
    pub harness_binary: PathBuf,
    /// The real Codex (`None`: the fake alone).
    pub codex: Option<codex::provision::CodexInstall>,
}

fn scenario_script(session: &Session) -> Result<(MockScript, Vec<&'static str>)> {
    let scenario = fake_app_server::scenario::Scenario::builtin(&session.scenario)
        .map_err(|e| anyhow::anyhow!("scenario {}: {e}", session.scenario))?;
    let script = MockScript::from_scenario(&scenario)
        .map_err(|e| anyhow::anyhow!("scenario {}: {e:?}", session.scenario))?;
    let features = codex_runner::features_for(&script.turns);
    Ok((script, features))
}

fn aliases(home: &Path, workspace: &Path, tmp: &Path, install: &Path) -> Vec<(String, String)> {
    let show = |p: &Path| p.display().to_string();
    let mut aliases = vec![
        (show(&home.join(".codex")), "<codex-home>".to_string()),
        (show(home), "<home>".to_string()),
        (show(workspace), "<workspace>".to_string()),
        (show(tmp), "<tmp>".to_string()),
        (show(install), "<app-server-install>".to_string()),
    ];
    aliases.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    aliases
}

/// A side's transcript, and the placeholders of its folders.
pub type Played = (
    Vec<graders::wire::transcript::Record>,
    Vec<(String, String)>,
);

/// Play `session` on `kind` in fresh folders under `root`: the transcript and the aliases of
/// its folders.
pub fn play_on(
    players: &Players,
    kind: SideKind,
    session: &Session,
    root: &Path,
) -> Result<Played> {
    let root = root.join(kind.name());
    if root.exists() {
        std::fs::remove_dir_all(&root).with_context(|| format!("clearing {}", root.display()))?;
    }
    let (home, workspace, tmp) = session_folders(&root)?;
    let (script, features) = scenario_script(session)?;
    match kind {
        SideKind::Fake => {
            let mut args = matrix::hidden::fake_app_server_args(&[]);
            args.extend([
                "--scenario".to_string(),
                format!("builtin:{}", session.scenario),
                "--model-log".to_string(),
                root.join("model-log.jsonl").display().to_string(),
            ]);
            args.extend(codex_runner::provider_args(UNUSED_MODEL_URL));
            args.extend(codex_runner::feature_args(&features));
            let install = players
                .harness_binary
                .parent()
                .unwrap_or(&players.harness_binary);
            let side = SideCommand {
                program: players.harness_binary.clone(),
                args,
                env: codex_runner::allowlisted_env(&home, &home.join(".codex"), &tmp),
                cwd: workspace.clone(),
                aliases: aliases(&home, &workspace, &tmp, install),
            };
            let transcript = super::run::play(session, &side)?;
            Ok((transcript, side.aliases))
        }
        SideKind::Real => {
            let install = players
                .codex
                .as_ref()
                .context("no real Codex to play the session on")?;
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .context("starting the mock model API's runtime")?;
            let mock = runtime.block_on(MockModelApi::start_with(MockConfig {
                script,
                model_log: root.join("model-log.jsonl"),
                request_log: None,
            }))?;
            let mut args = vec!["app-server".to_string()];
            args.extend(codex_runner::provider_args(&mock.base_url()));
            args.extend(codex_runner::feature_args(&features));
            let side = SideCommand {
                program: install.binary.clone(),
                args,
                env: codex_runner::allowlisted_env(&home, &home.join(".codex"), &tmp),
                cwd: workspace.clone(),
                aliases: aliases(&home, &workspace, &tmp, &install.package_dir),
            };
            let transcript = super::run::play(session, &side);
            runtime.block_on(mock.shutdown());
            Ok((transcript?, side.aliases))
        }
    }
}
