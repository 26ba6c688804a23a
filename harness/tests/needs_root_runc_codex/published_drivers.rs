//! The published drivers' launch scripts (`drivers/python-sdk/run.py`, `drivers/codex-acp/client.mjs`)
//! against the fake app-server and against the real Codex 0.169.0 offline (the mock model API),
//! on the host, in every case the drivers can express: message-marker, the read-only write probe,
//! escalated writes under each approval handling. The same task on both app-servers must end the
//! same way — the fake checked against clients nobody here wrote. Each trial needs the driver
//! package installed by `harness provision` and bubblewrap; the real-Codex ones the pinned Codex
//! too. Without them a trial is ignored with the reason (a failure under `CI=true`).
//!
//! The driver launches a stand-in `codex` that starts the app-server with the cell's allowlisted
//! environment and the mock provider configuration (what the matrix's tap adds in a cell); the
//! evidence is what the model was told (the model log), the workspace, and what the launch script
//! printed.
//!
//! Longer than 600 lines on purpose: one trial list over both drivers and both app-servers,
//! sharing the stand-in `codex`, the prerequisites and the comparison of the two ends; split by
//! driver, each half would repeat them.

use crate::common;

use common::prereq;

use codex::driver_packages::{self, DriverPackage};
use codex::provision;
use codex::runner::{self, CellDirs, PreparedCodex};
use fake_app_server::model_log::ModelLogEntry;
use fake_app_server::scenario::Scenario;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bound on one launch script run (its own bound is shorter; see the envelope below).
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let mut trials = vec![libtest_mimic::Trial::test(
        "provision_names_the_missing_installer_and_runtime",
        provision_names_the_missing_installer_and_runtime,
    )];
    for driver in [Driver::PythonSdk, Driver::CodexAcp] {
        let (id, unexpressible) = match driver {
            Driver::PythonSdk => ("python_sdk", "user-decline"),
            Driver::CodexAcp => ("codex_acp", "never"),
        };
        let package = driver.package();
        trials.push(prereq::trial(
            format!(
                "{id}_refuses_tasks_it_cannot_express_needs_{}",
                package.id.replace('-', "_")
            ),
            driver_missing(package),
            move || prereq::block_on(refuses_tasks_it_cannot_express(driver, unexpressible)),
        ));
        trials.push(prereq::trial(
            format!(
                "{id}_hung_app_server_ends_within_the_bound_and_is_killed_needs_{}",
                package.id.replace('-', "_")
            ),
            driver_missing(package),
            move || prereq::block_on(hung_app_server_is_bounded(driver)),
        ));
        for server in [Server::Fake, Server::RealCodex] {
            for case in cases(driver) {
                trials.push(prereq::trial(
                    format!("{id}_{}_against_{}", case.name, server.needs(package)),
                    server.missing(package),
                    move || prereq::block_on(run_case(driver, server, case)),
                ));
            }
        }
    }
    trials
}

/// Which app-server the driver's `codex` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Server {
    Fake,
    RealCodex,
}

impl Server {
    /// The end of a trial's name: the app-server and what the trial needs.
    fn needs(self, package: DriverPackage) -> String {
        let package = package.id.replace('-', "_");
        match self {
            Server::Fake => format!("the_fake_needs_bubblewrap_and_{package}"),
            Server::RealCodex => format!("real_codex_needs_bubblewrap_real_codex_and_{package}"),
        }
    }

    fn missing(self, package: DriverPackage) -> Option<String> {
        let host = prereq::environment_missing("local");
        let codex = match self {
            Server::Fake => None,
            Server::RealCodex => prereq::codex_missing(),
        };
        host.or(codex).or_else(|| driver_missing(package))
    }
}

/// What the model does in a case.
#[derive(Debug, Clone, Copy)]
enum Script {
    Builtin(&'static str),
    Inline(&'static str),
}

/// How a case must end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// The turn completed and the agent's message carries the marker.
    Marker,
    /// The probe command reached the sandbox, which refused it; nothing was written.
    SandboxRefused,
    /// The escalated write ran outside the sandbox and the probe file exists.
    WriteLanded,
    /// The turn completed and no probe file exists.
    WriteKeptOut,
    /// The automatic reviewer denied the escalation (the model was told `Rejected(…)`, not that
    /// the review failed), the turn completed, and no probe file exists.
    ReviewerDenied,
    /// Not written, and the turn was cancelled: codex-acp offers a rejection only as Codex's
    /// `cancel` decision ("No, and tell Codex what to do differently"), which ends the turn.
    WriteKeptOutTurnCancelled,
}

#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    script: Script,
    mode: &'static str,
    prompt: &'static str,
    approvals: Option<&'static str>,
    outcome: Outcome,
}

const MARKER_PROMPT: &str = "Reply with the marker MARKER-c0ffee42 and nothing else.";
const PROBE_PROMPT: &str = "Plan how to add a changelog entry. Do not change any file.";

/// A run whose model asks to write the probe file outside the sandbox (suites/scenarios/).
const ESCALATED_WRITE: &str = include_str!("../../../suites/scenarios/escalated-write.toml");
/// The same, with the automatic reviewer's verdict scripted as allow.
const ESCALATED_WRITE_REVIEW_ALLOW: &str =
    include_str!("../../../suites/scenarios/escalated-write-review-allow.toml");

/// Every case a driver can express, with how it must end — on both app-servers.
fn cases(driver: Driver) -> Vec<Case> {
    let escalated = |name, mode, approvals, script, outcome| Case {
        name,
        script,
        mode,
        prompt: "Write the probe file.",
        approvals: Some(approvals),
        outcome,
    };
    let mut cases = vec![
        Case {
            name: "message_marker",
            script: Script::Builtin("message-marker"),
            mode: "standard",
            prompt: MARKER_PROMPT,
            approvals: None,
            outcome: Outcome::Marker,
        },
        // `planning`: the SDK's Sandbox.read_only, codex-acp's read-only mode.
        Case {
            name: "read_only_write_probe_is_refused",
            script: Script::Builtin("plan-write-refused"),
            mode: "planning",
            prompt: PROBE_PROMPT,
            approvals: None,
            outcome: Outcome::SandboxRefused,
        },
        // The reviewer's verdict is scripted (the fake plays it, the mock model API answers the
        // real Codex's review request with it); the driver is sent no approval request.
        escalated(
            "auto_review_allowing_lets_an_escalated_write_land",
            "standard",
            "auto-review",
            Script::Inline(ESCALATED_WRITE_REVIEW_ALLOW),
            Outcome::WriteLanded,
        ),
        escalated(
            "auto_review_denying_keeps_an_escalated_write_out",
            "standard",
            "auto-review",
            Script::Inline(ESCALATED_WRITE),
            Outcome::ReviewerDenied,
        ),
    ];
    match driver {
        Driver::PythonSdk => cases.extend([
            // A finding about the driver: its default approval handler accepts everything.
            escalated(
                "default_handler_accepts_an_escalated_write",
                "planning",
                "user-accept",
                Script::Inline(ESCALATED_WRITE),
                Outcome::WriteLanded,
            ),
            escalated(
                "never_keeps_an_escalated_write_out",
                "planning",
                "never",
                Script::Inline(ESCALATED_WRITE),
                Outcome::WriteKeptOut,
            ),
        ]),
        Driver::CodexAcp => cases.extend([
            escalated(
                "client_accepting_lets_an_escalated_write_land",
                "planning",
                "user-accept",
                Script::Inline(ESCALATED_WRITE),
                Outcome::WriteLanded,
            ),
            escalated(
                "client_declining_cancels_the_turn_and_keeps_the_write_out",
                "planning",
                "user-decline",
                Script::Inline(ESCALATED_WRITE),
                Outcome::WriteKeptOutTurnCancelled,
            ),
        ]),
    }
    cases
}

/// Why `package` cannot run here (not installed, wrong version, no interpreter).
fn driver_missing(package: DriverPackage) -> Option<String> {
    if let Err(e) = package.resolve() {
        return Some(format!("driver package {}: {e:#}", package.id));
    }
    package.runtime_missing()
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A cell-like folder: `workspace/` (with AGENTS.md), a stand-in `codex`, the model log.
struct Cell {
    dir: tempfile::TempDir,
    /// Keeps the mock model API alive (the real Codex only).
    prepared: Option<PreparedCodex>,
    codex: PathBuf,
    model_log: PathBuf,
}

impl Cell {
    async fn new(server: Server, script: Script) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("AGENTS.md"), "# Project agents\nBe terse.\n").unwrap();
        match server {
            Server::RealCodex => {
                let scenario = match script {
                    Script::Builtin(name) => Scenario::builtin(name).unwrap(),
                    Script::Inline(text) => {
                        Scenario::from_toml_str(text, Path::new("inline.toml")).unwrap()
                    }
                };
                let prepared =
                    runner::prepare(provision::PINNED, &CellDirs::new(dir.path()), &scenario)
                        .await
                        .expect("prepare the real Codex");
                let codex = stand_in_codex(
                    dir.path(),
                    &prepared.app_server.env,
                    &prepared.install.binary,
                    &[],
                    &prepared.app_server.extra_args,
                );
                let model_log = prepared.model_log.clone();
                Self {
                    dir,
                    prepared: Some(prepared),
                    codex,
                    model_log,
                }
            }
            Server::Fake => {
                let spec = match script {
                    Script::Builtin(name) => format!("builtin:{name}"),
                    Script::Inline(text) => {
                        let path = dir.path().join("scenario.toml");
                        std::fs::write(&path, text).unwrap();
                        path.display().to_string()
                    }
                };
                let home = dir.path().join("home");
                let tmp = dir.path().join("tmp");
                std::fs::create_dir_all(home.join(".codex")).unwrap();
                std::fs::create_dir_all(&tmp).unwrap();
                let model_log = dir.path().join("model-log.jsonl");
                let transcript = dir.path().join("transcript.jsonl");
                let env = runner::allowlisted_env(&home, &home.join(".codex"), &tmp);
                let show = |p: &Path| p.display().to_string();
                // Configured as the real Codex is (the mock provider), so a driver reads the
                // same `account/read` and `model/list` from both.
                let mut trailing = vec![
                    "--scenario".to_string(),
                    spec,
                    "--model-log".into(),
                    show(&model_log),
                    "--transcript".into(),
                    show(&transcript),
                ];
                trailing.extend(runner::provider_args("http://127.0.0.1:9/v1"));
                let codex = stand_in_codex(
                    dir.path(),
                    &env,
                    Path::new(env!("CARGO_BIN_EXE_harness")),
                    &["fake-app-server".into()],
                    &[],
                );
                // The fake takes its options after the driver's arguments.
                let text = std::fs::read_to_string(&codex).unwrap().replace(
                    "\"$@\"",
                    &format!(
                        "\"$@\" {}",
                        trailing
                            .iter()
                            .map(|a| shlex::try_quote(a).unwrap().into_owned())
                            .collect::<Vec<_>>()
                            .join(" ")
                    ),
                );
                std::fs::write(&codex, text).unwrap();
                Self {
                    dir,
                    prepared: None,
                    codex,
                    model_log,
                }
            }
        }
    }

    fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    fn write_task(&self, task: serde_json::Value) -> PathBuf {
        let path = self.dir.path().join("task.json");
        std::fs::write(&path, serde_json::to_vec(&task).unwrap()).unwrap();
        path
    }

    fn model_log(&self) -> Vec<ModelLogEntry> {
        std::fs::read_to_string(&self.model_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn exec_outputs(&self) -> Vec<String> {
        self.model_log()
            .into_iter()
            .filter_map(|entry| match entry {
                ModelLogEntry::ToolOutput { output, .. } => Some(output),
                _ => None,
            })
            .collect()
    }

    fn probe_files(&self) -> Vec<String> {
        std::fs::read_dir(self.workspace())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("plan-write-probe-"))
            .collect()
    }
}

/// A `codex` that runs `program` with nothing of the test's environment but `env`: `leading`
/// arguments, then `config` (Codex's `-c` is accepted before any subcommand), then the
/// driver's own arguments.
fn stand_in_codex(
    root: &Path,
    env: &[(String, String)],
    program: &Path,
    leading: &[String],
    config: &[String],
) -> PathBuf {
    let quote = |s: &str| shlex::try_quote(s).unwrap().into_owned();
    let words = |items: &[String]| items.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ");
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let script = format!(
        "#!/bin/sh\nexec env -i {} {} {} {} \"$@\"\n",
        words(&env),
        quote(&program.to_string_lossy()),
        words(leading),
        words(config)
    );
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = bin.join("codex");
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A task envelope with the real-Codex bounds of the harness.
fn envelope(mode: &str, prompt: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut task = serde_json::json!({
        "mode": mode,
        "prompt": prompt,
        "timeouts": {"request_ms": 30000, "turn_idle_ms": 60000, "turn_total_ms": 60000,
                     "shutdown_ms": 10000, "startup_attempts": 3},
    });
    if let (Some(task), Some(extra)) = (task.as_object_mut(), extra.as_object()) {
        task.extend(extra.clone());
    }
    task
}

struct ScriptRun {
    status: std::process::ExitStatus,
    stdout: String,
    stderr: String,
}

impl ScriptRun {
    /// The script's closing JSON line (SDK) or its summary line (ACP client).
    fn summary(&self) -> serde_json::Value {
        let line = self.stdout.lines().last().unwrap_or_default();
        serde_json::from_str(line).unwrap_or_else(|e| {
            panic!(
                "no JSON summary ({e}); status {}\nstdout:\n{}\nstderr:\n{}",
                self.status, self.stdout, self.stderr
            )
        })
    }
}

async fn run_script(program: &Path, args: &[&std::ffi::OsStr]) -> ScriptRun {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(SCRIPT_LIMIT, command.output())
        .await
        .unwrap_or_else(|_| panic!("{} did not end within {SCRIPT_LIMIT:?}", program.display()))
        .expect("run the launch script");
    ScriptRun {
        status: output.status,
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

#[derive(Debug, Clone, Copy)]
enum Driver {
    PythonSdk,
    CodexAcp,
}

/// Run a driver's launch script on one task, as the shipped drivers file does.
async fn run_driver(driver: Driver, task: &Path, codex: &Path, workspace: &Path) -> ScriptRun {
    let repo = repo_root();
    let (program, mut args): (PathBuf, Vec<std::ffi::OsString>) = match driver {
        Driver::PythonSdk => (
            driver_packages::PYTHON_SDK.resolve().unwrap().entry,
            vec![repo.join("drivers/python-sdk/run.py").into()],
        ),
        Driver::CodexAcp => (
            sandbox::system::which("node").unwrap(),
            vec![
                repo.join("drivers/codex-acp/client.mjs").into(),
                "--agent".into(),
                driver_packages::CODEX_ACP.resolve().unwrap().entry.into(),
            ],
        ),
    };
    for (flag, value) in [
        ("--task", task),
        ("--codex", codex),
        ("--workspace", workspace),
    ] {
        args.push(flag.into());
        args.push(value.into());
    }
    let args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_os_str()).collect();
    run_script(&program, &args).await
}

impl Driver {
    fn package(self) -> DriverPackage {
        match self {
            Driver::PythonSdk => driver_packages::PYTHON_SDK,
            Driver::CodexAcp => driver_packages::CODEX_ACP,
        }
    }
}

async fn run_in_cell(driver: Driver, cell: &Cell, task: serde_json::Value) -> ScriptRun {
    let task = cell.write_task(task);
    run_driver(driver, &task, &cell.codex, &cell.workspace()).await
}

/// Run one case and check it ended as it must.
async fn run_case(driver: Driver, server: Server, case: Case) {
    let cell = Cell::new(server, case.script).await;
    let mut extra = serde_json::json!({});
    if let Some(approvals) = case.approvals {
        extra["approvals"] = approvals.into();
    }
    if case.outcome == Outcome::SandboxRefused {
        // As the shipped plan-write-refused case says; no plan is proposed to approve.
        extra["plan_reviews"] = serde_json::json!([{"decision": "approve"}]);
    }
    let run = run_in_cell(driver, &cell, envelope(case.mode, case.prompt, extra)).await;
    let probes = cell.probe_files();
    let outputs = cell.exec_outputs();
    let evidence = format!(
        "probes {probes:?}\noutputs {outputs:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    match case.outcome {
        Outcome::WriteKeptOutTurnCancelled => {
            let summary = run.summary();
            assert_eq!(summary["stopReason"], "cancelled", "{evidence}");
            assert_eq!(summary["permissions"][0]["answer"], "cancel", "{evidence}");
        }
        _ => assert!(run.status.success(), "{evidence}"),
    }
    match case.outcome {
        Outcome::Marker => {
            let summary = run.summary();
            let text = match driver {
                Driver::PythonSdk => &summary["final_response"],
                Driver::CodexAcp => &summary["text"],
            };
            assert!(
                text.as_str().is_some_and(|t| t.contains("MARKER-c0ffee42")),
                "{evidence}"
            );
        }
        Outcome::SandboxRefused => {
            assert!(
                outputs.iter().any(|o| o.contains("Read-only file system")),
                "{evidence}"
            );
            assert!(probes.is_empty(), "{evidence}");
        }
        Outcome::WriteLanded => assert_eq!(probes.len(), 1, "{evidence}"),
        Outcome::WriteKeptOut | Outcome::WriteKeptOutTurnCancelled => {
            assert!(probes.is_empty(), "{evidence}")
        }
        Outcome::ReviewerDenied => {
            assert!(probes.is_empty(), "{evidence}");
            assert!(
                outputs.iter().any(|o| o.contains("Rejected(")),
                "{evidence}"
            );
        }
    }
    // A review that failed (e.g. an answer that is not the review's JSON) also keeps the
    // write out, for the wrong reason.
    assert!(
        !outputs.iter().any(|o| o.contains("review failed")),
        "{evidence}"
    );
    if let Some(prepared) = &cell.prepared {
        // Nothing but POST /v1/responses, never a credential.
        let requests = prepared.mock.requests();
        assert!(!requests.is_empty(), "the model was never asked");
        for request in &requests {
            assert_eq!(
                (request.method.as_str(), request.path.as_str()),
                ("POST", "/v1/responses")
            );
            assert!(request.header("authorization").is_none());
        }
    }
}

/// Tasks a driver has no way to express are refused (exit 2, a reason), never run differently.
async fn refuses_tasks_it_cannot_express(driver: Driver, unexpressible: &str) {
    let dir = tempfile::tempdir().unwrap();
    let missing_codex = dir.path().join("no-such-codex");
    let approvals = format!("approvals `{unexpressible}`");
    for (extra, reason) in [
        (serde_json::json!({"mode": "ask"}), "mode `ask`"),
        (
            serde_json::json!({"approvals": unexpressible}),
            approvals.as_str(),
        ),
        (
            serde_json::json!({"plan_reviews": [{"decision": "revise", "text": "again"}]}),
            "cannot review plans",
        ),
        (
            serde_json::json!({"relaunch": {"prompt": "again"}}),
            "cannot relaunch",
        ),
        (serde_json::json!({}), "does not exist"),
    ] {
        let task = dir.path().join("task.json");
        let body = envelope("standard", "p", extra);
        std::fs::write(&task, serde_json::to_vec(&body).unwrap()).unwrap();
        let run = run_driver(driver, &task, &missing_codex, dir.path()).await;
        assert_eq!(run.status.code(), Some(2), "{body}: {}", run.stderr);
        assert!(run.stderr.contains(reason), "{body}: {}", run.stderr);
    }
}

/// An app-server that never answers: the launch script ends within its bound (derived from the
/// envelope's timeouts), non-zero, and the hung program does not survive it.
async fn hung_app_server_is_bounded(driver: Driver) {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("codex.pid");
    let codex = dir.path().join("codex");
    std::fs::write(
        &codex,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 600\n",
            shlex::try_quote(&pid_file.to_string_lossy()).unwrap()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755)).unwrap();
    let task = dir.path().join("task.json");
    let mut body = envelope("standard", "p", serde_json::json!({}));
    body["timeouts"] = serde_json::json!({"request_ms": 500, "turn_idle_ms": 500,
        "turn_total_ms": 1000, "shutdown_ms": 500, "startup_attempts": 1});
    std::fs::write(&task, serde_json::to_vec(&body).unwrap()).unwrap();
    let started = std::time::Instant::now();
    let run = run_driver(driver, &task, &codex, dir.path()).await;
    let took = started.elapsed();
    assert!(!run.status.success(), "{}", run.stderr);
    // 4 × request + turn = 3 s, plus interpreter start-up and the shutdown grace.
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}: {}",
        run.stderr
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("the driver launched codex")
        .trim()
        .parse()
        .unwrap();
    // Reaped by its parent or by init shortly after; poll a bounded while.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while Path::new(&format!("/proc/{pid}")).exists() && std::time::Instant::now() < deadline {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if state.split_whitespace().nth(2) == Some("Z") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(
        state.is_empty() || state.split_whitespace().nth(2) == Some("Z"),
        "the hung app-server {pid} survived the driver: {state}"
    );
}

/// Without python3 or node on PATH, `harness provision --driver …` fails naming each one (and
/// installs nothing); an unknown driver id is a usage error naming the known ones.
fn provision_names_the_missing_installer_and_runtime() -> Result<(), libtest_mimic::Failed> {
    let cache = tempfile::tempdir()?;
    let empty_path = tempfile::tempdir()?;
    let output = assert_cmd::Command::cargo_bin("harness")?
        .env_clear()
        .env("PATH", empty_path.path())
        .env("CODEX_DRIVER_CACHE", cache.path())
        .args([
            "provision",
            "--driver",
            "python-sdk",
            "--driver",
            "codex-acp",
        ])
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("python3 is not installed"), "{stderr}");
    assert!(stderr.contains("node is not installed"), "{stderr}");
    let unknown = assert_cmd::Command::cargo_bin("harness")?
        .env("CODEX_DRIVER_CACHE", cache.path())
        .args(["provision", "--driver", "pyhton-sdk"])
        .output()?;
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(unknown.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("known: python-sdk, codex-acp"), "{stderr}");
    Ok(())
}
