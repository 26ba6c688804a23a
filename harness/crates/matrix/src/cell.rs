//! Running one cell, from scratch folders to the verdict: a short pipeline of the stages in
//! `super::stages`.

use super::evidence::{append_model_events, workspace_evidence};
use super::stages::{self, driver::ProcessDriver, folders::CellFolders};
use super::{prereq, MatrixOptions};
use anyhow::{anyhow, Context, Result};
use codex::runner::CellDirs;
use driver::event_log::EventLog;
use driver::launch::LaunchRequest;
use driver::run::{AppServerProgram, RunSpec};
use driver::task::Task;
use driver::task::Timeouts;
use graders::events::{Body, Diagnostic, Level, RunEnded, Source};
use graders::verdict::Verdict;
use report::outcome::{CellOutcome, CellResult};
use sandbox::containment::CellCgroup;
use sandbox::launcher::EnvMounts;
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};
use suites::Cell;

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
        None => {
            match super::retry::run_cell_attempts(cell, root, || run_checked(cell, options, root))
                .await
            {
                Ok(verdict) => CellOutcome::Graded {
                    agreement: cell.expected.judge_verdict(&verdict),
                    verdict,
                },
                Err(e) => CellOutcome::Error {
                    message: format!("{e:#}"),
                },
            }
        }
    }
}

fn write_verdict_file(result: &CellResult) -> Result<()> {
    std::fs::create_dir_all(&result.evidence_dir)?;
    let summary = report::CellSummary::from_result(result);
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
    // 1. folders, task, scenario
    let folders = CellFolders::create(root, owner)?;
    if environment != "local" {
        options.check_probe(environment).await?;
    }
    let task = stages::folders::task_for(cell)?;
    let (scenario, scenario_arg) = stages::folders::scenario_for(cell, root)?;
    let mut mounts = EnvMounts {
        scratch: root.to_path_buf(),
        writable: Vec::new(),
        readonly: Vec::new(),
    };
    // 2. the app-server
    let mut app_server = stages::app_server::prepare(
        cell,
        options,
        &folders,
        &scenario,
        scenario_arg,
        &mut mounts,
    )
    .await?;
    let driver = stages::driver::process_driver(cell, options)?;
    // What killed harnesses left behind goes first (once per process, bounded).
    sandbox::reap::stale_once();
    let cgroup = CellCgroup::create(root)?;
    let result = run_process_driver(
        cell,
        options,
        &folders,
        &mut mounts,
        &app_server,
        task,
        &driver,
        cgroup.as_ref(),
    )
    .await;
    app_server.shutdown().await;
    let left_behind = sandbox::reap::after_cell(cgroup, root);
    let (mut log, ended, bubblewrap) = result?;
    // 5. the harness's own evidence
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
    append_model_events(&mut log, &app_server.model_log)?;
    log.emit(
        Source::Harness,
        Body::Diagnostic(Diagnostic {
            level: Level::Info,
            message: format!("bubblewrap Codex uses here: {bubblewrap}"),
        }),
    )?;
    log.emit(
        Source::Harness,
        Body::WorkspaceEvidence(workspace_evidence(&folders.workspace)?),
    )?;
    log.end(ended)?;
    log.flush()?;
    // 6. the grade
    graders::grade::grade(&cell.id.suite, cell.grader_case(), log.events())
        .map_err(|e| anyhow!("grading: {e}"))
}

fn run_id(cell: &Cell) -> String {
    format!(
        "{}-{}",
        cell.name(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default()
    )
}

fn run_spec(
    cell: &Cell,
    task: Task,
    app_server: AppServerProgram,
    folders: &CellFolders,
    timeouts: Timeouts,
) -> RunSpec {
    RunSpec {
        cell: cell.id.clone(),
        task,
        launch: LaunchRequest {
            mode: cell.case.mode,
            target: cell.target,
            network_enabled: cell.case.network,
            policy: cell.runner.policy,
            workspace: folders.workspace.clone(),
        },
        app_server,
        timeouts,
    }
}

/// 3.–5. for a driver process: the tap and the launcher, the driver, its events from the wire.
async fn run_process_driver(
    cell: &Cell,
    options: &MatrixOptions,
    folders: &CellFolders,
    mounts: &mut EnvMounts,
    app_server: &stages::app_server::AppServer,
    task: Task,
    driver: &ProcessDriver,
    cgroup: Option<&CellCgroup>,
) -> Result<(EventLog, RunEnded, String)> {
    let tap = stages::tap::install(&options.tap_program(), &app_server.program, folders)?;
    // The driver runs inside the environment too: the tap, and the files its command names,
    // must be visible there even below a folder the container's user cannot enter.
    mounts.readonly.push(options.fake_program.clone());
    mounts.readonly.extend(stages::driver::files_named_by(
        &driver.declared.command.replace(
            "{repo}",
            &options
                .repo_root
                .as_ref()
                .map(|r| r.display().to_string())
                .unwrap_or_default(),
        ),
    ));
    if driver.declared.command.contains("{cache}") {
        let cache = codex::provision::cache_root()?;
        let command = driver
            .declared
            .command
            .replace("{cache}", &cache.display().to_string());
        mounts
            .readonly
            .extend(stages::driver::installs_named_by(&command, &cache));
    }
    if let Some(dir) = &driver.declared.base_dir {
        mounts.readonly.push(dir.clone());
    }
    let environment = cell.id.environment.as_str();
    let launcher = options
        .launcher(environment, mounts, cgroup)
        .with_context(|| format!("starting environment `{environment}`"))?;
    // Which bubblewrap Codex uses there (the system's or its bundled one) is evidence too.
    let bundled_bwrap = app_server
        .bundled_bwrap
        .clone()
        .unwrap_or_else(|| sandbox::probe::codex_bundled_bwrap(&app_server.program.program));
    let bubblewrap =
        sandbox::probe::bubblewrap_in_use(launcher.as_ref(), &bundled_bwrap, &folders.workspace)
            .await;
    let seen = stages::tap::as_seen_by_driver(&tap, &app_server.program);
    let run = run_spec(cell, task, seen, folders, app_server.timeouts);
    let real = driver::launch::profiles::HostPaths::from_env_pairs(
        &app_server.program.env,
        Some(&app_server.program.program),
    );
    let prepared = stages::driver::prepare(
        driver,
        &run,
        folders,
        &tap,
        options.repo_root.as_deref(),
        real.install_dir.as_deref(),
    )?;
    let bounds = stages::driver::bounds(&run.timeouts, &run.task);
    let end = stages::driver::run(&prepared, launcher.as_ref(), bounds, &tap.transcript).await?;
    let mut log = EventLog::to_file(&run_id(cell), &folders.root.join("events.jsonl"))?;
    let ctx = graders::wire::Context {
        cell: cell.id.clone(),
        driver: driver.name.clone(),
        mode: cell.case.mode,
        target: cell.target,
        network_enabled: cell.case.network,
        policy: cell.runner.policy,
    };
    let ended = stages::evidence::from_wire(
        &mut log,
        &ctx,
        &tap.transcript,
        &end,
        prepared.events.as_deref(),
        &folders.root.join("findings.json"),
    )?;
    Ok((log, ended, bubblewrap))
}
