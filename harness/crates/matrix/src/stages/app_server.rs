//! Stage 2, the app-server: what the tap will start for the driver, by the runner's kind — the
//! fake (the harness binary's embedded fake, playing the cell's scenario) or the real Codex
//! (provisioned, offline, with a mock model API playing the scenario's model script) — with
//! what it needs mounted in the environment and the bounds on the driver's waits.

use super::folders::Folders;
use crate::context::CellContext;
use crate::hidden;
use anyhow::{Context, Result};
use codex::mock_api::MockModelApi;
use codex::runner::{self as codex_runner, CellDirs, PreparedCodex};
use driver::bounds::Timeouts;
use driver::run::AppServerProgram;
use fake_app_server::scenario::{Scenario, TransportPlay};
use sandbox::launcher::EnvMounts;
use sandbox::probe::codex_bundled_bwrap;
use std::path::{Path, PathBuf};
use suites::spec::AppServerKind;
use suites::Cell;
use tap::timing::{Rule, Timing};

/// `PATH` of the fake app-server: system folders only, like the real one's.
const FAKE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What stage 2 hands on: a cell's app-server, ready to be started by the tap.
pub struct AppServer {
    /// The program, its leading arguments (ending in `app-server`), what the cell adds after
    /// the driver's arguments, and its complete environment.
    pub program: AppServerProgram,
    /// What the model was told (the fake's, or the mock model API's).
    pub model_log: PathBuf,
    /// The bounds on the driver's waits against this app-server.
    pub timeouts: Timeouts,
    /// The bundled bubblewrap Codex would use here when there is no system one.
    pub bundled_bwrap: PathBuf,
    /// What the environment must bind for it.
    pub mounts: EnvMounts,
    /// What the tap does to the timing of its wire: the real Codex's, when the scenario has
    /// method behaviours the tap plays (the fake plays them itself).
    pub timing: Option<Timing>,
}

/// The driver's waits against the fake app-server ([`driver::bounds::FAKE_WAITS`]).
pub fn fake_timeouts() -> Timeouts {
    driver::bounds::FAKE_WAITS
}

/// Stage 2's output with what it started that must end with the cell: the real Codex's mock
/// model API, for the cell's guard.
pub struct Prepared {
    pub app_server: AppServer,
    pub mock: Option<MockModelApi>,
}

/// Stage 2 of `cell`.
pub async fn prepare(ctx: &CellContext, cell: &Cell, folders: &Folders) -> Result<Prepared> {
    let mut prepared = match cell.runner.app_server {
        AppServerKind::Fake => Prepared {
            app_server: fake(ctx, cell, folders)?,
            mock: None,
        },
        AppServerKind::Codex => real_codex(cell, folders).await?,
    };
    if sandbox::catalogue::spec(&cell.id.environment)?.vm.is_some() {
        prepared.app_server.timeouts = prepared.app_server.timeouts.in_a_virtual_machine();
    }
    Ok(prepared)
}

/// The fake, as the harness binary embeds it.
fn fake(ctx: &CellContext, cell: &Cell, folders: &Folders) -> Result<AppServer> {
    let dirs = &folders.dirs;
    let path = |p: &Path| p.display().to_string();
    let model_log = dirs.evidence.model_log();
    let mut program = AppServerProgram {
        program: ctx.harness_binary.clone(),
        leading_args: hidden::fake_app_server_args(&ctx.fake_args),
        extra_args: fake_args(
            folders.scenario_arg.clone(),
            path(&model_log),
            &folders.scenario,
        ),
        env: vec![
            ("PATH".into(), FAKE_PATH.into()),
            ("HOME".into(), path(&dirs.home)),
            // Codex's default layout, named so the fake persists its threads there (it never
            // writes an unnamed `~/.codex`) and a relaunch can resume them.
            ("CODEX_HOME".into(), path(&dirs.home.join(".codex"))),
            ("TMPDIR".into(), path(&dirs.tmp)),
            ("LANG".into(), "C.UTF-8".into()),
        ],
    };
    let mut mounts = EnvMounts::default();
    mounts.readonly.push(ctx.harness_binary.clone());
    // The fake writes what the model was told into the evidence, which is the harness's: only
    // that file is bound into its container, created now and handed to its user.
    std::fs::write(&model_log, "").with_context(|| format!("creating {}", model_log.display()))?;
    if let Some((uid, gid)) = dirs.owner {
        std::os::unix::fs::chown(&model_log, Some(uid), Some(gid))
            .with_context(|| format!("handing {} to uid {uid}", model_log.display()))?;
    }
    mounts.writable.push(model_log.clone());
    if Path::new(&folders.scenario_arg).is_absolute() {
        mounts.readonly.push(PathBuf::from(&folders.scenario_arg));
    }
    // In the environment, not the arguments: `codex --version` and the other tool launches
    // (which get no cell arguments) answer as the same release.
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
    // The fake's stand-in for Codex's bundled bubblewrap, in a package folder of its own, so
    // environments that hide or change bundled bubblewraps find it too.
    let package = dirs.evidence.fake_codex_package();
    let bundled = codex_bundled_bwrap(&package.join("bin").join("codex"));
    let mut bundled_bwrap = codex_bundled_bwrap(&program.program);
    if let Some(system) = sandbox::system::which("bwrap") {
        std::fs::create_dir_all(bundled.parent().context("bundled bwrap folder")?)?;
        std::fs::copy(&system, &bundled)
            .with_context(|| format!("copying {}", system.display()))?;
        program.env.push((
            "FAKE_APP_SERVER_BUNDLED_BWRAP".into(),
            bundled.display().to_string(),
        ));
        mounts.readonly.push(package);
        mounts.bundled_bwraps.push(bundled.clone());
        bundled_bwrap = bundled;
    }
    Ok(AppServer {
        program,
        model_log,
        timeouts: fake_timeouts(),
        bundled_bwrap,
        mounts,
        timing: None,
    })
}

/// The real Codex of the runner's version, with its mock model API.
async fn real_codex(cell: &Cell, folders: &Folders) -> Result<Prepared> {
    let version = cell
        .runner
        .codex_version
        .as_deref()
        .context("codex runner without codex_version")?;
    let dirs = CellDirs {
        root: folders.dirs.root.clone(),
        owner: folders.dirs.owner,
    };
    let (prepared, plays) = codex_runner::prepare_tapped(version, &dirs, &folders.scenario)
        .await
        .with_context(|| format!("preparing Codex {version}"))?;
    let mounts = EnvMounts {
        writable: prepared.writable_mounts(),
        readonly: prepared.readonly_mounts(),
        bundled_bwraps: vec![prepared.install.bundled_bwrap()],
        ..EnvMounts::default()
    };
    let PreparedCodex {
        app_server,
        mock,
        model_log,
        ..
    } = prepared;
    Ok(Prepared {
        app_server: AppServer {
            bundled_bwrap: codex_bundled_bwrap(&app_server.program),
            program: app_server,
            model_log,
            timeouts: PreparedCodex::timeouts(),
            mounts,
            timing: timing_of(&plays, &folders.scenario),
        },
        mock: Some(mock),
    })
}

/// The tap's timing for the scenario's plays by timing (none: `None`), its answers held at
/// most as long as the fake's hang lasts (`limits.hang_ms`).
fn timing_of(plays: &[TransportPlay], scenario: &Scenario) -> Option<Timing> {
    let rules: Vec<Rule> = plays
        .iter()
        .map(|play| match play {
            TransportPlay::Withhold { method } => Rule::Withhold {
                method: method.clone(),
            },
            TransportPlay::AnswerAfterTurn { method } => Rule::AnswerAfterEvents {
                method: method.clone(),
            },
        })
        .collect();
    (!rules.is_empty()).then(|| Timing {
        rules,
        bound: std::time::Duration::from_millis(scenario.limits.hang_ms),
    })
}

/// The fake's own arguments. The fake is configured with the custom model provider the
/// real-Codex runner gets (`codex_runner::provider_args`; the fake never calls its URL), so both
/// answer alike what a driver reads and echoes: `account/read` (unconfigured, the fake answers
/// as Codex does for the OpenAI provider, `requiresOpenaiAuth: true`, and codex-acp stops at
/// `Authentication required`), `model/list`, and the thread's model, which a driver sends back
/// in its plan-mode `turn/start`.
/// It gets the features the real Codex would get for the scenario too (see
/// `codex_runner::features_for`).
fn fake_args(scenario_arg: String, model_log: String, scenario: &Scenario) -> Vec<String> {
    let mut args = vec![
        "--scenario".into(),
        scenario_arg,
        "--model-log".into(),
        model_log,
    ];
    args.extend(codex_runner::provider_args("http://127.0.0.1:9/v1"));
    args.extend(codex_runner::feature_args(&codex_runner::features_for(
        &scenario.model_script(),
    )));
    args
}
