//! The published drivers' launch scripts (`drivers/python-sdk/run.py`, `drivers/codex-acp/client.mjs`)
//! against the real Codex 0.169.0 offline (the mock model API), on the host. Each needs the
//! pinned Codex, bubblewrap and the driver package installed by `harness provision`; without
//! them a trial is ignored with the reason (a failure under `CI=true`).
//!
//! The driver launches a stand-in `codex` that starts the pinned binary with the cell's
//! allowlisted environment and the mock provider (what the matrix's tap adds in a cell); the
//! evidence is what the model was told (the mock's model log), the workspace, and what the
//! launch script printed.

// Each test crate uses its own part of the shared helpers.
#[allow(dead_code)]
mod common;

use common::prereq;

use fake_app_server::model_log::ModelLogEntry;
use fake_app_server::scenario::Scenario;
use harness::codex::driver_packages::{self, DriverPackage};
use harness::codex::provision;
use harness::codex::runner::{self, CellDirs, PreparedCodex};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bound on one launch script run (its own bound is shorter; see the envelope below).
const SCRIPT_LIMIT: Duration = Duration::from_secs(120);

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let needs = |package: DriverPackage| {
        prereq::environment_missing("local")
            .or_else(prereq::codex_missing)
            .or_else(|| driver_missing(package))
    };
    let sdk = || needs(driver_packages::PYTHON_SDK);
    let acp = || needs(driver_packages::CODEX_ACP);
    let trials = vec![
        libtest_mimic::Trial::test(
            "provision_names_the_missing_installer_and_runtime",
            provision_names_the_missing_installer_and_runtime,
        ),
        prereq::trial(
            "python_sdk_message_marker_needs_real_codex_and_sdk",
            sdk(),
            || prereq::block_on(python_sdk_message_marker()),
        ),
        prereq::trial(
            "python_sdk_read_only_write_probe_is_refused_needs_real_codex_and_sdk",
            sdk(),
            || prereq::block_on(python_sdk_read_only_write_probe_is_refused()),
        ),
        prereq::trial(
            "python_sdk_refuses_tasks_it_cannot_express_needs_sdk",
            driver_missing(driver_packages::PYTHON_SDK),
            || {
                prereq::block_on(refuses_tasks_it_cannot_express(
                    Driver::PythonSdk,
                    "user-decline",
                ))
            },
        ),
        prereq::trial(
            "codex_acp_client_refuses_tasks_it_cannot_express_needs_codex_acp",
            driver_missing(driver_packages::CODEX_ACP),
            || prereq::block_on(refuses_tasks_it_cannot_express(Driver::CodexAcp, "never")),
        ),
        prereq::trial(
            "python_sdk_hung_app_server_ends_within_the_bound_and_is_killed_needs_sdk",
            driver_missing(driver_packages::PYTHON_SDK),
            || prereq::block_on(hung_app_server_is_bounded(Driver::PythonSdk)),
        ),
        prereq::trial(
            "codex_acp_client_hung_app_server_ends_within_the_bound_and_is_killed_needs_codex_acp",
            driver_missing(driver_packages::CODEX_ACP),
            || prereq::block_on(hung_app_server_is_bounded(Driver::CodexAcp)),
        ),
        prereq::trial(
            "codex_acp_message_marker_needs_real_codex_and_codex_acp",
            acp(),
            || prereq::block_on(codex_acp_message_marker()),
        ),
        prereq::trial(
            "codex_acp_read_only_write_probe_is_refused_needs_real_codex_and_codex_acp",
            acp(),
            || prereq::block_on(codex_acp_read_only_write_probe_is_refused()),
        ),
        prereq::trial(
            "python_sdk_default_handler_accepts_an_escalated_write_needs_real_codex_and_sdk",
            sdk(),
            || {
                prereq::block_on(escalated_write(
                    Driver::PythonSdk,
                    "user-accept",
                    Landed::Yes,
                ))
            },
        ),
        prereq::trial(
            "codex_acp_client_accepting_lets_an_escalated_write_land_needs_real_codex_and_codex_acp",
            acp(),
            || {
                prereq::block_on(escalated_write(
                    Driver::CodexAcp,
                    "user-accept",
                    Landed::Yes,
                ))
            },
        ),
        prereq::trial(
            "codex_acp_client_declining_cancels_the_turn_and_keeps_the_write_out_needs_real_codex_and_codex_acp",
            acp(),
            || {
                prereq::block_on(escalated_write(
                    Driver::CodexAcp,
                    "user-decline",
                    Landed::NoTurnCancelled,
                ))
            },
        ),
        prereq::trial(
            "python_sdk_never_keeps_an_escalated_write_out_needs_real_codex_and_sdk",
            sdk(),
            || prereq::block_on(escalated_write(Driver::PythonSdk, "never", Landed::No)),
        ),
    ];
    libtest_mimic::run(&args, trials).exit();
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

/// A cell-like folder: `workspace/` (with AGENTS.md) and the Codex home/tmp the runner makes.
struct Cell {
    dir: tempfile::TempDir,
    prepared: PreparedCodex,
    codex: PathBuf,
}

impl Cell {
    async fn new(scenario: &str) -> Self {
        Self::with_scenario(Scenario::builtin(scenario).unwrap()).await
    }

    async fn with_scenario(scenario: Scenario) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        std::fs::write(workspace.join("AGENTS.md"), "# Project agents\nBe terse.\n").unwrap();
        let prepared = runner::prepare(provision::PINNED, &CellDirs::new(dir.path()), &scenario)
            .await
            .expect("prepare the real Codex");
        let codex = stand_in_codex(dir.path(), &prepared);
        Self {
            dir,
            prepared,
            codex,
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
        std::fs::read_to_string(&self.prepared.model_log)
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

/// A `codex` that runs the pinned binary with nothing of the test's environment, the mock
/// provider configuration first (Codex's `-c` is accepted before any subcommand), then the
/// driver's own arguments.
fn stand_in_codex(root: &Path, prepared: &PreparedCodex) -> PathBuf {
    let quote = |s: &str| shlex::try_quote(s).unwrap().into_owned();
    let env: Vec<String> = prepared
        .app_server
        .env
        .iter()
        .map(|(k, v)| quote(&format!("{k}={v}")))
        .collect();
    let args: Vec<String> = prepared
        .app_server
        .extra_args
        .iter()
        .map(|a| quote(a))
        .collect();
    let script = format!(
        "#!/bin/sh\nexec env -i {} {} {} \"$@\"\n",
        env.join(" "),
        quote(&prepared.install.binary.to_string_lossy()),
        args.join(" ")
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

#[derive(Clone, Copy)]
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
            provision::which("node").unwrap(),
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

async fn run_in_cell(driver: Driver, cell: &Cell, task: serde_json::Value) -> ScriptRun {
    let task = cell.write_task(task);
    run_driver(driver, &task, &cell.codex, &cell.workspace()).await
}

const MARKER_PROMPT: &str = "Reply with the marker MARKER-c0ffee42 and nothing else.";
const PROBE_PROMPT: &str = "Plan how to add a changelog entry. Do not change any file.";

/// The model's probe command reached the real sandbox, which refused it; nothing was written.
fn assert_write_probe_refused(cell: &Cell) {
    let outputs = cell.exec_outputs();
    assert!(
        outputs.iter().any(|o| o.contains("Read-only file system")),
        "{outputs:?}"
    );
    assert!(cell.probe_files().is_empty(), "{:?}", cell.probe_files());
}

fn assert_only_the_mock_was_asked(cell: &Cell) {
    let requests = cell.prepared.mock.requests();
    assert!(!requests.is_empty(), "the model was never asked");
    for request in &requests {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/v1/responses")
        );
        assert!(request.header("authorization").is_none());
    }
}

async fn python_sdk_message_marker() {
    let cell = Cell::new("message-marker").await;
    let run = run_in_cell(
        Driver::PythonSdk,
        &cell,
        envelope("standard", MARKER_PROMPT, serde_json::json!({})),
    )
    .await;
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    let summary = run.summary();
    assert_eq!(summary["status"], "completed", "{summary}");
    assert_eq!(summary["final_response"], "MARKER-c0ffee42", "{summary}");
    assert_only_the_mock_was_asked(&cell);
}

/// `Sandbox.read_only`: the model's write probe reaches the real sandbox, which refuses it.
async fn python_sdk_read_only_write_probe_is_refused() {
    let cell = Cell::new("plan-write-refused").await;
    let run = run_in_cell(
        Driver::PythonSdk,
        &cell,
        envelope(
            "planning",
            PROBE_PROMPT,
            // As the shipped plan-write-refused case says; no plan is proposed to approve.
            serde_json::json!({"plan_reviews": [{"decision": "approve"}]}),
        ),
    )
    .await;
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.summary()["status"], "completed");
    assert_write_probe_refused(&cell);
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

async fn codex_acp_message_marker() {
    let cell = Cell::new("message-marker").await;
    let run = run_in_cell(
        Driver::CodexAcp,
        &cell,
        envelope("standard", MARKER_PROMPT, serde_json::json!({})),
    )
    .await;
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    let summary = run.summary();
    assert_eq!(summary["stopReason"], "end_turn", "{summary}");
    assert!(
        summary["text"]
            .as_str()
            .is_some_and(|t| t.contains("MARKER-c0ffee42")),
        "{summary}"
    );
    assert_only_the_mock_was_asked(&cell);
}

/// codex-acp's `read-only` mode: the write probe reaches the real sandbox, which refuses it.
async fn codex_acp_read_only_write_probe_is_refused() {
    let cell = Cell::new("plan-write-refused").await;
    let run = run_in_cell(
        Driver::CodexAcp,
        &cell,
        envelope(
            "planning",
            PROBE_PROMPT,
            // As the shipped plan-write-refused case says; no plan is proposed to approve.
            serde_json::json!({"plan_reviews": [{"decision": "approve"}]}),
        ),
    )
    .await;
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(run.summary()["mode"], "read-only");
    assert_write_probe_refused(&cell);
}

/// A read-only run whose model asks to run the write probe outside the sandbox.
const ESCALATED_WRITE: &str = r#"
name = "escalated-write"
description = "The model asks to write the probe file with escalated permissions, then reports."
[[turns]]
steps = [
  { step = "shell", cmd = "printf probe > plan-write-probe-{probe_id}.txt && echo WRITE_SUCCEEDED", escalate = true, justification = "Write the probe file outside the sandbox?" },
  { step = "message", text = "{write_outcome}" },
]
"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Landed {
    Yes,
    No,
    /// Not written, and the turn was cancelled: codex-acp offers a rejection only as Codex's
    /// `cancel` decision ("No, and tell Codex what to do differently"), which ends the turn.
    NoTurnCancelled,
}

/// The escalated write lands exactly when the driver's answer lets it.
async fn escalated_write(driver: Driver, approvals: &str, landed: Landed) {
    let scenario =
        Scenario::from_toml_str(ESCALATED_WRITE, Path::new("escalated-write.toml")).unwrap();
    let cell = Cell::with_scenario(scenario).await;
    let run = run_in_cell(
        driver,
        &cell,
        envelope(
            "planning",
            "Write the probe file.",
            serde_json::json!({ "approvals": approvals }),
        ),
    )
    .await;
    let probes = cell.probe_files();
    let outputs = cell.exec_outputs();
    let evidence = format!(
        "probes {probes:?}\noutputs {outputs:?}\nstdout:\n{}\nstderr:\n{}",
        run.stdout, run.stderr
    );
    match landed {
        Landed::Yes => {
            assert!(run.status.success(), "{evidence}");
            assert_eq!(probes.len(), 1, "{evidence}");
        }
        Landed::No => {
            assert!(run.status.success(), "{evidence}");
            assert!(probes.is_empty(), "{evidence}");
        }
        Landed::NoTurnCancelled => {
            let summary = run.summary();
            assert_eq!(summary["stopReason"], "cancelled", "{evidence}");
            assert_eq!(summary["permissions"][0]["answer"], "cancel", "{evidence}");
            assert!(probes.is_empty(), "{evidence}");
        }
    }
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
