//! The reference driver as an ordinary driver process (`harness drive`, hidden): it reads the
//! task envelope and the events contract's environment (docs/driver-contract.md) like any
//! driver under `contract = "events"`, finds `codex` first on `PATH` (in the matrix: the wire
//! tap), runs the task, writes its run events to `HARNESS_EVENTS` (ending with `run.ended`) and
//! exits 0 when the run succeeded, 1 otherwise. SIGINT interrupts its running turn and each line
//! of its stdin steers it ([`super::control`]). The matrix grades it from the wire, like any
//! other driver; its events are the second source.

use super::{control, run_controlled, DriverConfig};
use crate::bounds::Timeouts;
use crate::event_log::EventLog;
use crate::launch::LaunchRequest;
use crate::run::{AppServerProgram, RunSpec};
use crate::task::Envelope;
use anyhow::{anyhow, Context, Result};
use graders::events::{CellId, Ending, PolicyGeneration, Target};
use sandbox::launcher::LocalLauncher;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn var(name: &str) -> Result<String> {
    std::env::var(name).map_err(|_| anyhow!("`{name}` is not set (see docs/driver-contract.md)"))
}

fn timeouts(envelope: &Envelope) -> Timeouts {
    let ms = Duration::from_millis;
    let t = &envelope.timeouts;
    Timeouts {
        request: ms(t.request_ms),
        turn_idle: ms(t.turn_idle_ms),
        turn_total: ms(t.turn_total_ms),
        shutdown: ms(t.shutdown_ms),
        startup_attempts: t.startup_attempts,
    }
}

fn config() -> Result<(DriverConfig, PathBuf, String)> {
    let task_path = var("HARNESS_TASK")?;
    let envelope = Envelope::from_json(
        &std::fs::read_to_string(&task_path).with_context(|| format!("reading {task_path}"))?,
    )?;
    let events = PathBuf::from(var("HARNESS_EVENTS")?);
    let cell: CellId = var("HARNESS_CELL")?.parse()?;
    let workspace = PathBuf::from(var("HARNESS_WORKSPACE")?);
    let policy: PolicyGeneration =
        serde_json::from_value(serde_json::Value::String(var("HARNESS_POLICY")?))
            .context("HARNESS_POLICY")?;
    let flag = |name: &str, on: &str| std::env::var(name).as_deref() == Ok(on);
    let codex = sandbox::system::which("codex")
        .context("no `codex` on PATH (the driver finds Codex as `codex` first on PATH)")?;
    // The app-server's environment, as the contract hands it over, kept to the runner
    // contract's allowlist (HOME and CODEX_HOME here name the folders the profiles deny; the
    // tap gives the app-server the cell's own).
    let mut env: Vec<(String, String)> = match std::env::var("HARNESS_APP_SERVER_ENV") {
        Ok(text) => serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(&text)
            .context("HARNESS_APP_SERVER_ENV")?
            .into_iter()
            .filter(|(k, _)| graders::grade::runner_contract::app_server_env_allowed(k))
            .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
            .collect(),
        Err(_) => Vec::new(),
    };
    if let Ok(dir) = std::env::var(crate::launch::profiles::INSTALL_DIR_VAR) {
        env.push((crate::launch::profiles::INSTALL_DIR_VAR.into(), dir));
    }
    let scratch = events
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let config = DriverConfig {
        run: RunSpec {
            cell,
            launch: LaunchRequest {
                mode: envelope.task.mode,
                target: if flag(crate::launch::ENV_EXTERNAL_SANDBOX, "1") {
                    Target::ExternalSandbox
                } else {
                    Target::Local
                },
                network_enabled: flag(crate::launch::ENV_NETWORK_ACCESS, "enabled"),
                policy,
                workspace,
            },
            timeouts: timeouts(&envelope),
            task: envelope.task,
            app_server: AppServerProgram {
                program: codex,
                leading_args: vec!["app-server".into()],
                extra_args: Vec::new(),
                env,
            },
        },
        launcher: Arc::new(LocalLauncher),
        stderr_log: scratch.join("drive-app-server-stderr.log"),
        transcript: None,
    };
    let run_id = format!("drive-{}", std::process::id());
    Ok((config, events, run_id))
}

/// Entry point of `harness drive`.
pub fn main() -> ExitCode {
    let (config, events, run_id) = match config() {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(target: "notice", "harness drive: {e:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::warn!(target: "notice", "harness drive: starting the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result: Result<Ending> = runtime.block_on(async {
        let mut log = EventLog::to_file(&run_id, &events)
            .with_context(|| format!("opening {}", events.display()))?;
        // SIGINT interrupts the running turn and a stdin line steers it (the declarations
        // `interrupt = "sigint"` and `steer = "stdin-line"`).
        let controls = control::Controls::new(
            control::from_process().context("listening for SIGINT and stdin")?,
        );
        let ended = run_controlled(&config, controls, &mut log).await;
        let ending = ended.ending;
        log.end(ended)?;
        log.flush()?;
        Ok(ending)
    });
    match result {
        Ok(Ending::Succeeded) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => {
            tracing::warn!(target: "notice", "harness drive: {e:#}");
            ExitCode::from(2)
        }
    }
}
