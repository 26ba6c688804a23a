//! Running one cell, from scratch folders to the verdict.

use super::evidence::{append_model_events, workspace_evidence};
use super::{prereq, CellOutcome, CellResult, MatrixOptions};
use crate::codex::runner::{self as codex_runner, CellDirs};
use crate::driver::{self, AppServerProgram, DriverConfig, Timeouts};
use crate::env::EnvMounts;
use crate::event_log::EventLog;
use crate::launch::LaunchRequest;
use crate::task::Task;
use anyhow::{anyhow, Context, Result};
use fake_app_server::scenario::Scenario;
use graders::events::{Body, Diagnostic, Ending, Level, RunEnded, Source};
use graders::verdict::Verdict;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use suites::spec::{AppServerKind, DriverKind, ScenarioRef};
use suites::Cell;

/// `PATH` of the fake app-server: system folders only, like the real one's.
const FAKE_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The workspace's `AGENTS.md`: restricted-read profiles load it through Codex's bubblewrap fs
/// helper at `thread/start`, which is what fails in the restricted environments.
const AGENTS_MD: &str = "# Project agents\nAlways be terse.\n";

/// Bounds for runs against the fake app-server: it answers in milliseconds, so a hang is
/// detected after a short idle bound and the `hang` cells stay short.
pub fn fake_timeouts() -> Timeouts {
    Timeouts {
        request: Duration::from_secs(5),
        turn_idle: Duration::from_secs(2),
        turn_total: Duration::from_secs(30),
        shutdown: Duration::from_secs(2),
        ..Timeouts::default()
    }
}

/// The bound on a whole driver run, on top of the driver's own bounds (a driver that ignores
/// them still cannot hang the matrix).
fn run_bound(timeouts: &Timeouts, task: &Task) -> Duration {
    let attempts = timeouts.startup_attempts.max(1);
    timeouts.request * (attempts + 2) * 2
        + timeouts.turn_total * task.max_turns
        + timeouts.shutdown * 2
        + Duration::from_secs(10)
}

/// The folders of one cell.
struct CellDirsLayout {
    root: PathBuf,
    workspace: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

impl CellDirsLayout {
    fn create(root: &Path, owner: Option<(u32, u32)>) -> Result<Self> {
        if root.exists() {
            std::fs::remove_dir_all(root)
                .with_context(|| format!("clearing old evidence in {}", root.display()))?;
        }
        let layout = Self {
            root: root.to_path_buf(),
            workspace: root.join("workspace"),
            home: root.join("home"),
            tmp: root.join("tmp"),
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
}

fn task_for(cell: &Cell) -> Result<Task> {
    let mut table = cell.case.task.clone();
    table.insert(
        "mode".into(),
        toml::Value::try_from(cell.case.mode).context("mode")?,
    );
    toml::Value::Table(table)
        .try_into()
        .with_context(|| format!("case `{}`: invalid task", cell.id.case))
}

/// The existing files an external driver's command line names by absolute path.
fn files_named_by(command: &str) -> Vec<PathBuf> {
    command
        .split_whitespace()
        .map(PathBuf::from)
        .filter(|word| word.is_absolute() && word.is_file())
        .collect()
}

/// The scenario, and how to name it to the fake (`builtin:NAME` or a file in the cell folder).
fn scenario_for(cell: &Cell, root: &Path) -> Result<(Scenario, String)> {
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

/// Run one cell and leave its evidence in `<out_root>/<cell>/`.
pub async fn run_cell(cell: &Cell, options: &MatrixOptions) -> CellResult {
    let started = Instant::now();
    let root = options.out_root.join(cell.name());
    let outcome = if let Some(reason) = &cell.not_applicable {
        // Evidence of an earlier run of this cell would contradict "never run".
        match std::fs::remove_dir_all(&root) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => CellOutcome::Error {
                message: format!("clearing old evidence in {}: {e}", root.display()),
            },
            _ => CellOutcome::NotApplicable {
                reason: reason.clone(),
            },
        }
    } else {
        run_applicable(cell, options, &root).await
    };
    let result = CellResult {
        cell: cell.id.clone(),
        expected: cell.expected.clone(),
        outcome,
        duration: started.elapsed(),
        evidence_dir: root,
    };
    if let Err(e) = write_verdict_file(&result) {
        return CellResult {
            outcome: CellOutcome::Error {
                message: format!("writing verdict.json: {e:#}"),
            },
            ..result
        };
    }
    result
}

async fn run_applicable(cell: &Cell, options: &MatrixOptions, root: &Path) -> CellOutcome {
    match prereq::missing(cell, options) {
        Some(reason) if options.ci => CellOutcome::Error {
            message: format!("CI=true and this cell cannot run here: {reason}"),
        },
        Some(reason) => CellOutcome::Ignored { reason },
        None => match run_checked(cell, options, root).await {
            Ok(verdict) => CellOutcome::Graded {
                agreement: cell.expected.judge(verdict.verdict),
                verdict,
            },
            Err(e) => CellOutcome::Error {
                message: format!("{e:#}"),
            },
        },
    }
}

fn write_verdict_file(result: &CellResult) -> Result<()> {
    std::fs::create_dir_all(&result.evidence_dir)?;
    let summary = crate::report::CellSummary::from_result(result);
    let verdict: Option<&Verdict> = result.verdict();
    let agreement = match &result.outcome {
        CellOutcome::Graded { agreement, .. } => Some(agreement.describe()),
        _ => None,
    };
    let doc = json!({
        "cell": summary.cell,
        "status": summary.status,
        "expected": summary.expected,
        "expected_reason": summary.expected_reason,
        "verdict": verdict,
        "agreement": agreement,
        "message": summary.reason,
        "duration_ms": summary.duration_ms,
    });
    std::fs::write(
        result.evidence_dir.join("verdict.json"),
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    Ok(())
}

async fn run_checked(cell: &Cell, options: &MatrixOptions, root: &Path) -> Result<Verdict> {
    let environment = cell.id.environment.as_str();
    let owner = if environment == "local" {
        None
    } else {
        CellDirs::owned_for_environment(root, environment)?.owner
    };
    let dirs = CellDirsLayout::create(root, owner)?;
    if environment != "local" {
        options.check_probe(environment).await?;
    }
    let task = task_for(cell)?;
    let (scenario, scenario_arg) = scenario_for(cell, root)?;
    let stderr_log = root.join("stderr.log");
    let transcript = root.join("transcript.jsonl");
    let mut mounts = EnvMounts {
        scratch: root.to_path_buf(),
        writable: Vec::new(),
        readonly: Vec::new(),
    };
    // Keeps the mock model API alive for the run.
    let mut _codex = None;
    let (app_server, model_log, timeouts) = match cell.runner.app_server {
        AppServerKind::Fake => {
            let path = |p: &Path| p.display().to_string();
            let program = AppServerProgram {
                program: options.fake_program.clone(),
                leading_args: options.fake_leading_args.clone(),
                extra_args: vec![
                    "--scenario".into(),
                    scenario_arg,
                    "--transcript".into(),
                    path(&transcript),
                    "--model-log".into(),
                    path(&root.join("model-log.jsonl")),
                ],
                env: vec![
                    ("PATH".into(), FAKE_PATH.into()),
                    ("HOME".into(), path(&dirs.home)),
                    // Codex's default layout, named so the fake persists its threads there (it
                    // never writes an unnamed `~/.codex`) and a relaunch can resume them.
                    ("CODEX_HOME".into(), path(&dirs.home.join(".codex"))),
                    ("TMPDIR".into(), path(&dirs.tmp)),
                    ("LANG".into(), "C.UTF-8".into()),
                ],
            };
            mounts.readonly.push(options.fake_program.clone());
            (program, root.join("model-log.jsonl"), fake_timeouts())
        }
        AppServerKind::Codex => {
            let version = cell
                .runner
                .codex_version
                .as_deref()
                .context("codex runner without codex_version")?;
            let codex_dirs = CellDirs {
                root: root.to_path_buf(),
                owner,
            };
            let prepared = codex_runner::prepare(version, &codex_dirs, &scenario)
                .await
                .with_context(|| format!("preparing Codex {version}"))?;
            mounts.writable.extend(prepared.writable_mounts());
            mounts.readonly.extend(prepared.readonly_mounts());
            let program = prepared.app_server.clone();
            let model_log = prepared.model_log.clone();
            _codex = Some(prepared);
            (program, model_log, codex_runner::PreparedCodex::timeouts())
        }
    };
    if matches!(cell.runner.driver, DriverKind::External) {
        // The external driver runs inside the environment too: the files its command names
        // must be visible there even below a folder the container's user cannot enter.
        mounts
            .readonly
            .extend(files_named_by(&options.driver_command(cell)?));
    }
    let launcher = options
        .launcher(environment, &mounts)
        .with_context(|| format!("starting environment `{environment}`"))?;
    let config = DriverConfig {
        cell: cell.id.clone(),
        task,
        launch: LaunchRequest {
            mode: cell.case.mode,
            target: cell.target,
            network_enabled: cell.case.network,
            policy: cell.runner.policy,
            workspace: dirs.workspace.clone(),
        },
        app_server,
        launcher,
        workspace: dirs.workspace.clone(),
        stderr_log,
        // The fake writes its own transcript there; for the real Codex the driver's client does.
        transcript: (cell.runner.app_server == AppServerKind::Codex).then(|| transcript.clone()),
        timeouts,
    };
    let run_id = format!(
        "{}-{}",
        cell.name(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    );
    let mut log = EventLog::to_file(&run_id, &root.join("events.jsonl"))?;
    let bound = run_bound(&config.timeouts, &config.task);
    let driven = async {
        match cell.runner.driver {
            DriverKind::Reference => {
                Ok::<RunEnded, anyhow::Error>(driver::run_reference(&config, &mut log).await)
            }
            DriverKind::External => {
                let command = options.driver_command(cell)?;
                Ok(driver::external::run_external(&command, &config, &mut log).await)
            }
            DriverKind::Declared => Err(anyhow!(
                "declared drivers run through the wire tap, which this executor does not have yet"
            )),
        }
    };
    let ended = match tokio::time::timeout(bound, driven).await {
        Ok(result) => result?,
        Err(_) => {
            log.emit(
                Source::Harness,
                Body::Diagnostic(Diagnostic {
                    level: Level::Error,
                    message: format!(
                        "the driver did not end within the harness bound of {bound:?}"
                    ),
                }),
            )?;
            RunEnded {
                ending: Ending::TimedOut,
                retry_offered: false,
                error_code: Some("harness_bound_exceeded".into()),
                reason: Some(format!("no terminal within {bound:?}")),
            }
        }
    };
    if let Some(codex) = _codex.take() {
        codex.mock.shutdown().await;
    }
    let left_behind = super::leftovers::reap(root);
    if !left_behind.is_empty() {
        let listed: Vec<String> = left_behind
            .iter()
            .map(|(pid, name)| format!("{name} (pid {pid})"))
            .collect();
        log.emit(
            Source::Harness,
            Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message: format!(
                    "killed {} process(es) the app-server left behind: {}",
                    listed.len(),
                    listed.join(", ")
                ),
            }),
        )?;
    }
    append_model_events(&mut log, &model_log)?;
    log.emit(
        Source::Harness,
        Body::WorkspaceEvidence(workspace_evidence(&dirs.workspace)?),
    )?;
    log.end(ended)?;
    log.flush()?;
    let verdict = graders::grade::grade(&cell.id.suite, cell.grader_case(), log.events())
        .map_err(|e| anyhow!("grading: {e}"))?;
    Ok(verdict)
}
