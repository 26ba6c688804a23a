//! The real Codex (pinned, provisioned into the cache on first use) against the mock model API,
//! driven by the reference driver. Every test here needs the real Codex binary (npm on first
//! use) and bubblewrap; the container ones also need root and runc. Without them a test is
//! reported as ignored with the reason; under `CI=true` it fails instead.

use crate::common;

use common::prereq;

use codex::provision;
use codex::runner::{self, CellDirs, PreparedCodex};
use driver::event_log::EventLog;
use driver::launch::LaunchRequest;
use driver::reference::{run_reference, DriverConfig};
use driver::run::RunSpec;
use driver::task::{PlanReview, Task};
use fake_app_server::model_log::ModelLogEntry;
use fake_app_server::scenario::Scenario;
use graders::events::{Body, CellId, Ending, Item, Mode, PolicyGeneration, Target};
use sandbox::launcher::{Launcher, LocalLauncher};
use std::path::Path;
use std::sync::Arc;

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let on_host = || prereq::environment_missing("local").or_else(prereq::codex_missing);
    let in_environment =
        |environment: &str| prereq::environment_missing(environment).or_else(prereq::codex_missing);
    let trials = vec![
        prereq::trial(
            "plan_write_refused_full_read_profile_needs_real_codex",
            on_host(),
            || prereq::block_on(plan_write_refused_full_read_profile_needs_real_codex()),
        ),
        prereq::trial(
            "plan_write_refused_narrow_profile_needs_real_codex",
            on_host(),
            || prereq::block_on(plan_write_refused_narrow_profile_needs_real_codex()),
        ),
        prereq::trial(
            "daytona_legacy_policy_is_rejected_at_startup_needs_root_runc_and_real_codex",
            in_environment("daytona"),
            || {
                prereq::block_on(
                    daytona_legacy_policy_is_rejected_at_startup_needs_root_runc_and_real_codex(),
                )
            },
        ),
        prereq::trial(
            "daytona_current_policy_refuses_the_write_needs_root_runc_and_real_codex",
            in_environment("daytona"),
            || {
                prereq::block_on(
                    daytona_current_policy_refuses_the_write_needs_root_runc_and_real_codex(),
                )
            },
        ),
        prereq::trial(
            "daytona_uidmap_sandbox_fails_to_start_needs_root_runc_and_real_codex",
            in_environment("daytona-uidmap"),
            || {
                prereq::block_on(
                    daytona_uidmap_sandbox_fails_to_start_needs_root_runc_and_real_codex(),
                )
            },
        ),
    ];
    trials
}

struct Run {
    ended: graders::events::RunEnded,
    events: Vec<graders::events::Event>,
    model_log: Vec<ModelLogEntry>,
    prepared: PreparedCodex,
    workspace: std::path::PathBuf,
}

fn workspace_in(root: &Path) -> std::path::PathBuf {
    let workspace = root.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(
        workspace.join("AGENTS.md"),
        "# Project agents\nAlways be terse.\n",
    )
    .unwrap();
    workspace
}

async fn run_plan_write_refused(
    root: &Path,
    environment: &str,
    target: Target,
    policy: PolicyGeneration,
    launcher: Arc<dyn Launcher>,
    prepared: PreparedCodex,
) -> Run {
    let workspace = root.join("workspace");
    let mut task = Task::new(
        Mode::Planning,
        "Plan how to add a changelog entry. Do not change any file.",
    );
    task.plan_reviews = vec![PlanReview::Approve];
    let config = DriverConfig {
        run: RunSpec {
            cell: CellId::new(
                "codex-planning-read-only",
                "runner-codex",
                environment,
                "plan-write-refused",
            ),
            task,
            launch: LaunchRequest {
                mode: Mode::Planning,
                target,
                network_enabled: true,
                policy,
                workspace: workspace.clone(),
            },
            app_server: prepared.app_server.clone(),
            timeouts: PreparedCodex::timeouts(),
        },
        launcher,
        stderr_log: root.join("stderr.log"),
        transcript: Some(root.join("transcript.jsonl")),
    };
    let mut log = EventLog::in_memory("real-codex-test");
    let ended = tokio::time::timeout(
        std::time::Duration::from_secs(240),
        run_reference(&config, &mut log),
    )
    .await
    .expect("the run is bounded");
    let model_log = std::fs::read_to_string(&prepared.model_log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    Run {
        ended,
        events: log.events().to_vec(),
        model_log,
        prepared,
        workspace,
    }
}

fn probe_files(workspace: &Path) -> Vec<String> {
    std::fs::read_dir(workspace)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("plan-write-probe-"))
        .collect()
}

fn plan_texts(events: &[graders::events::Event]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match &e.body {
            Body::ItemCompleted(item) => match &item.item {
                Item::Plan { text, .. } => Some(text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The full-read planning profile (what the current policy picks for an external sandbox),
/// run on the host: the mock's exec call reaches the real sandbox, which refuses the write.
async fn plan_write_refused_full_read_profile_needs_real_codex() {
    assert_plan_write_refused(Target::ExternalSandbox).await;
}

/// The narrow planning profile (local target): root `none`, the minimal system set, the Codex
/// install folder and the workspace readable. The runner keeps CODEX_HOME inside HOME (Codex's
/// default layout), so the profile adds no explicit deny over the sandbox helper alias Codex
/// executes from `$CODEX_HOME/tmp/arg0-linux/…`, and the sandbox refuses the write.
async fn plan_write_refused_narrow_profile_needs_real_codex() {
    assert_plan_write_refused(Target::Local).await;
}

async fn assert_plan_write_refused(target: Target) {
    let dir = tempfile::tempdir().unwrap();
    workspace_in(dir.path());
    let scenario = Scenario::builtin("plan-write-refused").unwrap();
    let prepared = runner::prepare(provision::PINNED, &CellDirs::new(dir.path()), &scenario)
        .await
        .expect("prepare the real Codex");
    let run = run_plan_write_refused(
        dir.path(),
        "local",
        target,
        PolicyGeneration::Current,
        Arc::new(LocalLauncher),
        prepared,
    )
    .await;
    let stderr = std::fs::read_to_string(dir.path().join("stderr.log")).unwrap_or_default();
    assert_eq!(
        run.ended.ending,
        Ending::Succeeded,
        "{:?}\nstderr:\n{stderr}",
        run.ended
    );
    // The mock made the exec call and got the real sandbox's refusal back.
    let exec_call = run
        .model_log
        .iter()
        .find_map(|entry| match entry {
            ModelLogEntry::ToolCall { call_id, name, .. } if name == "exec_command" => {
                Some(call_id.clone())
            }
            _ => None,
        })
        .expect("the mock called exec_command");
    let output = run
        .model_log
        .iter()
        .find_map(|entry| match entry {
            ModelLogEntry::ToolOutput { call_id, output } if *call_id == exec_call => {
                Some(output.clone())
            }
            _ => None,
        })
        .expect("the mock received the exec output");
    assert!(output.contains("Read-only file system"), "{output}");
    assert!(
        probe_files(&run.workspace).is_empty(),
        "no probe file was written"
    );
    let plans = plan_texts(&run.events);
    assert!(
        plans.iter().any(|p| p.starts_with("WRITE_REFUSED")),
        "{plans:?}"
    );
    // Nothing but POST /v1/responses, no credentials, one thread.
    let requests = run.prepared.mock.requests();
    // Turn and response told apart from the history alone: planning turn (probe, plan), then the
    // follow-up turn after approval (message + paperclip_finish, closing response).
    let positions: Vec<(usize, usize)> = requests
        .iter()
        .map(|r| r.position.map(|p| (p.turn, p.response)).unwrap_or((99, 99)))
        .collect();
    assert_eq!(positions, [(0, 0), (0, 1), (1, 0), (1, 1)]);
    for request in &requests {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/v1/responses")
        );
        assert!(request.header("authorization").is_none());
    }
}

/// A cell of `codex-planning-read-only` in a restricted environment on runc (the trial has
/// checked that the environment and Codex are here).
async fn run_in_environment(environment: &str, policy: PolicyGeneration, dir: &Path) -> Run {
    workspace_in(dir);
    let scenario = Scenario::builtin("plan-write-refused").unwrap();
    let dirs = CellDirs::owned_for_environment(dir, environment).unwrap();
    let prepared = runner::prepare(provision::PINNED, &dirs, &scenario)
        .await
        .expect("prepare the real Codex");
    let mounts = sandbox::launcher::EnvMounts {
        scratch: dir.to_path_buf(),
        writable: prepared.writable_mounts(),
        readonly: prepared.readonly_mounts(),
        bundled_bwraps: vec![prepared.install.bundled_bwrap()],
    };
    let launcher = sandbox::environment::launcher(environment, &mounts).expect("launcher");
    run_plan_write_refused(
        dir,
        environment,
        Target::ExternalSandbox,
        policy,
        launcher,
        prepared,
    )
    .await
}

fn exec_outputs(run: &Run) -> Vec<String> {
    run.model_log
        .iter()
        .filter_map(|entry| match entry {
            ModelLogEntry::ToolOutput { output, .. } => Some(output.clone()),
            _ => None,
        })
        .collect()
}

async fn daytona_legacy_policy_is_rejected_at_startup_needs_root_runc_and_real_codex() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_in_environment("daytona", PolicyGeneration::Legacy, dir.path()).await;
    assert_eq!(
        run.ended.ending,
        Ending::FailedPermanently,
        "{:?}",
        run.ended
    );
    assert_eq!(
        run.ended.error_code.as_deref(),
        Some("provider_startup_rejected")
    );
    let reason = run.ended.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"),
        "{reason}"
    );
    assert!(
        run.prepared.mock.requests().is_empty(),
        "no turn ever reached the model"
    );
}

async fn daytona_current_policy_refuses_the_write_needs_root_runc_and_real_codex() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_in_environment("daytona", PolicyGeneration::Current, dir.path()).await;
    assert_eq!(run.ended.ending, Ending::Succeeded, "{:?}", run.ended);
    let outputs = exec_outputs(&run);
    assert!(
        outputs.iter().any(|o| o.contains("Read-only file system")),
        "{outputs:?}"
    );
    assert!(probe_files(&run.workspace).is_empty());
}

async fn daytona_uidmap_sandbox_fails_to_start_needs_root_runc_and_real_codex() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_in_environment("daytona-uidmap", PolicyGeneration::Current, dir.path()).await;
    // The thread starts (full-read profile), but every command fails before it runs; Codex
    // shows no command item for it, so the model log is the trace.
    let outputs = exec_outputs(&run);
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("bwrap: setting up uid map: Permission denied")),
        "{:?} {outputs:?}",
        run.ended
    );
    let plans = plan_texts(&run.events);
    assert!(
        plans.iter().any(|p| p.starts_with("SANDBOX_FAILED")),
        "{plans:?}"
    );
    assert!(probe_files(&run.workspace).is_empty());
}
