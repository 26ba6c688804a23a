//! External drivers (see `docs/driver-contract.md`): a command started with the task envelope
//! and environment variables naming the app-server command; it writes its run events as JSONL,
//! which are validated and re-sequenced into the harness's log. The driver process is started
//! through the cell's [`sandbox::launcher::Launcher`], so it runs where the app-server
//! would.

use crate::event_log::EventLog;
use crate::reference::{stop, DriverConfig, Stop};
use crate::run::RunSpec;
use crate::task::Envelope;
use graders::events::{Body, Diagnostic, Ending, Kind, Level, RunEnded, Source};
use sandbox::launcher::ProcessSpec;
use serde::Deserialize;
use std::io::{BufRead, Read};
use std::path::Path;
use std::time::Duration;

/// Longest accepted event line from an external driver.
pub(crate) const MAX_EVENT_LINE_BYTES: usize = 1024 * 1024;
/// Most events accepted from one external run.
pub(crate) const MAX_EVENTS: usize = 100_000;

/// One line as an external driver writes it: `kind` and `payload` are required; header fields
/// (`v`, `seq`, `run`, `source`) may be present and are replaced by the harness's own.
#[derive(Deserialize)]
struct ExternalLine {
    #[serde(flatten)]
    body: Body,
}

/// Run `cmd` (a `sh -c` command line) as the driver of `config`'s task.
pub async fn run_external(cmd: &str, config: &DriverConfig, log: &mut EventLog) -> RunEnded {
    match run_inner(cmd, config, log).await {
        Ok(ended) | Err(Stop(ended)) => ended,
    }
}

/// The environment an external driver gets (see `docs/driver-contract.md`).
pub fn driver_env(run: &RunSpec, task_path: &Path, events_path: &Path) -> Vec<(String, String)> {
    let program = &run.app_server;
    let mut command = vec![program.program.to_string_lossy().into_owned()];
    command.extend(program.leading_args.iter().cloned());
    let app_env: serde_json::Map<String, serde_json::Value> = program
        .env
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect();
    let name = |v: serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let mut env = program.env.clone();
    env.extend([
        ("HARNESS_TASK".into(), task_path.display().to_string()),
        ("HARNESS_EVENTS".into(), events_path.display().to_string()),
        (
            "HARNESS_WORKSPACE".into(),
            run.launch.workspace.display().to_string(),
        ),
        ("HARNESS_CELL".into(), run.cell.to_string()),
        (
            "HARNESS_APP_SERVER_CMD".into(),
            serde_json::to_string(&command).expect("strings"),
        ),
        (
            "HARNESS_APP_SERVER_EXTRA_ARGS".into(),
            serde_json::to_string(&program.extra_args).expect("strings"),
        ),
        (
            "HARNESS_APP_SERVER_ENV".into(),
            serde_json::Value::Object(app_env).to_string(),
        ),
        (
            "HARNESS_POLICY".into(),
            name(serde_json::to_value(run.launch.policy).expect("enum")),
        ),
        (
            "HARNESS_TIMEOUT_SECS".into(),
            run.timeouts.request.as_secs().max(1).to_string(),
        ),
        (
            crate::launch::ENV_EXTERNAL_SANDBOX.into(),
            if run.launch.target == graders::events::Target::ExternalSandbox {
                "1"
            } else {
                "0"
            }
            .into(),
        ),
        (
            crate::launch::ENV_NETWORK_ACCESS.into(),
            if run.launch.network_enabled {
                "enabled"
            } else {
                "disabled"
            }
            .into(),
        ),
    ]);
    env
}

/// The whole run's bound: every turn's bound plus start-up.
fn overall_timeout(config: &DriverConfig) -> Duration {
    let t = &config.run.timeouts;
    t.turn_total * (config.run.task.max_turns + 1) + t.request * 2 * t.startup_attempts.max(1)
}

async fn run_inner(cmd: &str, config: &DriverConfig, log: &mut EventLog) -> Result<RunEnded, Stop> {
    let scratch = config
        .stderr_log
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let task_path = scratch.join("external-task.json");
    let events_path = scratch.join("external-events.jsonl");
    let setup = |e: std::io::Error| {
        stop(
            Ending::FailedPermanently,
            false,
            "external_driver_setup",
            &e.to_string(),
        )
    };
    std::fs::create_dir_all(&scratch).map_err(setup)?;
    std::fs::write(
        &task_path,
        serde_json::to_vec_pretty(&Envelope::new(&config.run.task, &config.run.timeouts))
            .expect("the envelope serializes"),
    )
    .map_err(setup)?;
    let _ = std::fs::remove_file(&events_path);
    let spec = ProcessSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), cmd.into()],
        env: driver_env(&config.run, &task_path, &events_path),
        cwd: config.run.launch.workspace.clone(),
    };
    let prepared = config.launcher.prepare(&spec).map_err(|e| {
        stop(
            Ending::FailedPermanently,
            false,
            "external_driver_setup",
            &format!("{e:#}"),
        )
    })?;
    let mut command = prepared.command;
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&config.stderr_log)
        .map_err(setup)?;
    command
        .stdin(std::process::Stdio::null())
        .stdout(stderr.try_clone().map_err(setup)?)
        .stderr(stderr)
        .kill_on_drop(true)
        .process_group(0);
    let mut child = command.spawn().map_err(|e| {
        stop(
            Ending::FailedPermanently,
            false,
            "external_driver_setup",
            &format!("starting `{cmd}`: {e}"),
        )
    })?;
    let limit = overall_timeout(config);
    let status = match tokio::time::timeout(limit, child.wait()).await {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            return Err(stop(
                Ending::TransportLost,
                true,
                "external_driver_failed",
                &e.to_string(),
            ))
        }
        Err(_) => {
            if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let _ = child.kill().await;
            None
        }
    };
    drop(prepared.guard);
    let terminal = copy_events(&events_path, log)?;
    match (terminal, status) {
        (Some(ended), _) => Ok(ended),
        (None, None) => Err(stop(
            Ending::TimedOut,
            true,
            "timed_out",
            &format!("the external driver did not finish within {limit:?}"),
        )),
        (None, Some(status)) => Err(stop(
            Ending::FailedPermanently,
            true,
            "external_driver_no_terminal",
            &format!("the external driver exited ({status}) without writing run.ended"),
        )),
    }
}

/// Validate the driver's events and append them to `log`; returns its `run.ended`, if any.
fn copy_events(path: &Path, log: &mut EventLog) -> Result<Option<RunEnded>, Stop> {
    let bad = |why: String| {
        stop(
            Ending::FailedPermanently,
            false,
            "external_driver_bad_events",
            &why,
        )
    };
    let (bodies, terminal) = read_events(path).map_err(bad)?;
    for body in bodies {
        log.emit(Source::Driver, body)
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(terminal)
}

/// The driver's events (without its `run.ended`) and its `run.ended`, validated: bounded lines
/// and count, `run.started` first, nothing after `run.ended`. A missing file is no events; an
/// invalid one is an error naming `path:line`.
pub fn read_events(path: &Path) -> Result<(Vec<Body>, Option<RunEnded>), String> {
    let bad = |line: usize, why: String| format!("{}:{line}: {why}", path.display());
    // The driver wrote it: a FIFO or a link there must not block or mislead the harness.
    let file = match graders::evidence_file::open(path, graders::evidence_file::MAX_STREAMED_BYTES)
    {
        Ok(Some(file)) => file,
        Ok(None) => return Ok((Vec::new(), None)),
        Err(e) => return Err(e.to_string()),
    };
    let mut reader = std::io::BufReader::new(file);
    let mut terminal = None;
    let mut bodies: Vec<Body> = Vec::new();
    let mut count = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        // `take` bounds the read so a line without a newline cannot grow without limit.
        let n = (&mut reader)
            .take(MAX_EVENT_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| bad(count + 1, e.to_string()))?;
        if n == 0 {
            break;
        }
        count += 1;
        if buf.len() > MAX_EVENT_LINE_BYTES {
            return Err(bad(
                count,
                format!("line longer than {MAX_EVENT_LINE_BYTES} bytes"),
            ));
        }
        if count > MAX_EVENTS {
            return Err(bad(count, format!("more than {MAX_EVENTS} events")));
        }
        let text = String::from_utf8_lossy(&buf);
        if text.trim().is_empty() {
            continue;
        }
        if terminal.is_some() {
            return Err(bad(count, "an event after run.ended".into()));
        }
        let line: ExternalLine =
            serde_json::from_str(&text).map_err(|e| bad(count, format!("not an event: {e}")))?;
        let kind = line.body.kind();
        if bodies.is_empty() && kind != Kind::RunStarted {
            return Err(bad(
                count,
                format!("the first event must be run.started, not {kind:?}"),
            ));
        }
        match line.body {
            Body::RunEnded(ended) => terminal = Some(ended),
            // Evidence only the harness or the model log may write: a driver that writes it
            // is forging it. Dropped, and said so (graders ignore it from a driver anyway).
            body if !kind.accepts_source(Source::Driver) => {
                drop(body);
                bodies.push(Body::Diagnostic(Diagnostic {
                    level: Level::Warn,
                    message: format!(
                        "{}:{count}: dropped a `{kind}` event the driver wrote: only the harness writes it",
                        path.display()
                    ),
                }));
            }
            body => bodies.push(body),
        }
    }
    Ok((bodies, terminal))
}
