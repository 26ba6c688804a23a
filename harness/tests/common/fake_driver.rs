//! Driver runs against the fake app-server, shared by the external-driver tests and the schema
//! test of what drivers send.

use driver::bounds::Timeouts;
use driver::launch::LaunchRequest;
use driver::reference::DriverConfig;
use driver::run::{AppServerProgram, RunSpec};
use driver::task::Task;
use graders::events::{CellId, PolicyGeneration, Target};
use sandbox::launcher::LocalLauncher;
use std::path::Path;
use std::sync::Arc;

/// A driver run against the fake app-server (`harness fake-app-server`) playing `scenario`
/// (`builtin:NAME` or a file), with its folders below `dir`; the fake writes its transcript to
/// `dir/transcript.jsonl`.
pub fn config(dir: &Path, scenario: &str, task: Task, target: Target) -> DriverConfig {
    let workspace = dir.join("workspace");
    let home = dir.join("home");
    let tmp = dir.join("tmp");
    for d in [&workspace, &home, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    DriverConfig {
        run: RunSpec {
            cell: CellId::new(
                "core-compatibility",
                "runner-external",
                "local",
                "plan-revise-accept",
            ),
            launch: LaunchRequest {
                mode: task.mode,
                target,
                network_enabled: false,
                policy: PolicyGeneration::Current,
                workspace: workspace.clone(),
            },
            task,
            app_server: AppServerProgram {
                program: env!("CARGO_BIN_EXE_harness").into(),
                leading_args: vec!["fake-app-server".into(), "app-server".into()],
                extra_args: vec![],
                env: vec![
                    ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
                    ("HOME".into(), home.display().to_string()),
                    ("TMPDIR".into(), tmp.display().to_string()),
                    ("FAKE_APP_SERVER_SCENARIO".into(), scenario.into()),
                    (
                        "FAKE_APP_SERVER_TRANSCRIPT".into(),
                        dir.join("transcript.jsonl").display().to_string(),
                    ),
                ],
            },
            timeouts: Timeouts::default(),
        },
        launcher: Arc::new(LocalLauncher),
        stderr_log: dir.join("cell").join("stderr.log"),
        transcript: None,
    }
}

/// The example external driver's command line.
pub fn script() -> String {
    format!(
        "python3 {}/examples/external_driver.py",
        env!("CARGO_MANIFEST_DIR")
    )
}
