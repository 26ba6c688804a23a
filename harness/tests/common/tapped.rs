//! The reference driver as the matrix runs it, without the matrix: `harness drive` as its own
//! process, with the wire tap as its `codex` in front of the fake app-server, told what it is
//! told in a cell (the task envelope and the events contract's environment, the fake's bounds),
//! then graded from the wire like a cell: the transcript through `graders::wire`, the model log,
//! the terminal. What the matrix's driver stage delivers (a SIGINT, a stdin line) the test
//! delivers itself, once the turn is live.

use driver::event_log::EventLog;
use driver::launch::LaunchRequest;
use driver::run::{AppServerProgram, RunSpec};
use driver::task::{Envelope, Task};
use graders::events::{CellId, Event, PolicyGeneration, ProtocolSetup, Source, Target};
use graders::verdict::{Verdict, VerdictKind};
use graders::wire::{self, DriverEnd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::io::AsyncWriteExt;

/// What the test does to the running driver once its turn is live.
pub enum Deliver {
    Nothing,
    /// SIGINT to the driver's process.
    Sigint,
    /// One line on the driver's stdin.
    StdinLine(String),
}

/// A finished tapped run.
pub struct TappedRun {
    pub exit_code: Option<i32>,
    pub events: Vec<Event>,
    /// The driver's own run events (`HARNESS_EVENTS`).
    pub driver_events: String,
    pub transcript: String,
    pub root: tempfile::TempDir,
}

impl TappedRun {
    pub fn grade(&self, suite: &str, case: &str) -> Verdict {
        graders::grade::grade(suite, case, &self.events).unwrap()
    }

    /// Grade the run as `suite`/`case`, asserting the verdict.
    pub fn assert_verdict(&self, suite: &str, case: &str, expected: VerdictKind) -> Verdict {
        let verdict = self.grade(suite, case);
        assert_eq!(
            verdict.verdict, expected,
            "{suite}/{case}: {}",
            verdict.reason
        );
        verdict
    }

    pub fn workspace(&self) -> PathBuf {
        self.root.path().join("workspace")
    }

    /// The driver's requests of `method`, over all launches.
    pub fn requests(&self, method: &str) -> Vec<serde_json::Value> {
        self.sent()
            .into_iter()
            .filter(|m| m["method"] == method && m.get("id").is_some())
            .collect()
    }

    /// Every message the driver sent, over all launches.
    pub fn sent(&self) -> Vec<serde_json::Value> {
        self.transcript
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|l| l["direction"] == "in")
            .map(|l| l["message"].clone())
            .collect()
    }
}

/// How long a tapped run may take before the test calls it hung.
const RUN_BOUND: Duration = Duration::from_secs(90);

fn harness() -> PathBuf {
    env!("CARGO_BIN_EXE_harness").into()
}

/// Whether the fake already told the driver that a turn started.
fn turn_is_live(transcript: &Path) -> bool {
    std::fs::read_to_string(transcript).is_ok_and(|text| {
        text.lines().any(|l| {
            l.contains("\"direction\":\"out\"") && l.contains("\"method\":\"turn/started\"")
        })
    })
}

/// Run `task` with the reference driver against the fake playing `scenario` (`builtin:NAME`).
pub async fn run(scenario: &str, task: Task, deliver: Deliver) -> TappedRun {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path();
    let (workspace, home, tmp) = (dir.join("workspace"), dir.join("home"), dir.join("tmp"));
    for d in [&workspace, &home, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(workspace.join(".git")).unwrap();
    std::fs::write(workspace.join("AGENTS.md"), "# Agents\nBe terse.\n").unwrap();
    let path = |p: &Path| p.display().to_string();
    let model_log = dir.join("model-log.jsonl");
    let app_env = vec![
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        ("HOME".to_string(), path(&home)),
        ("CODEX_HOME".to_string(), path(&home.join(".codex"))),
        ("TMPDIR".to_string(), path(&tmp)),
        ("LANG".to_string(), "C.UTF-8".to_string()),
    ];
    let tap_dir = dir.join("tap");
    let installed = tap::install(&tap_dir, &matrix::hidden::tap_program(&harness())).unwrap();
    let transcript_path = dir.join("transcript.jsonl");
    let recording = tap::session::Recording::start(
        &installed.socket,
        &transcript_path,
        tap::session::AppServerSetup {
            program: harness(),
            prefix: vec![matrix::hidden::FAKE_APP_SERVER.into()],
            server_args: vec![
                "--scenario".into(),
                scenario.into(),
                "--model-log".into(),
                path(&model_log),
            ],
            env: app_env.clone(),
            inherit_env: Vec::new(),
        },
        std::sync::Arc::new(tap::session::HostSpawn),
    )
    .unwrap();
    let timeouts = matrix::stages::app_server::fake_timeouts();
    let cell = CellId::new("driver-tests", "runner-fake", "local", "case");
    let run_spec = RunSpec {
        cell: cell.clone(),
        task: task.clone(),
        timeouts,
        launch: LaunchRequest {
            mode: task.mode,
            target: Target::Local,
            network_enabled: false,
            policy: PolicyGeneration::Current,
            workspace: workspace.clone(),
        },
        app_server: AppServerProgram {
            program: installed.codex.clone(),
            leading_args: vec!["app-server".into()],
            extra_args: Vec::new(),
            env: app_env,
        },
    };
    let task_path = dir.join("task.json");
    std::fs::write(
        &task_path,
        serde_json::to_vec(&Envelope::new(&task, &timeouts)).unwrap(),
    )
    .unwrap();
    let events_path = dir.join("driver-events.jsonl");
    let mut env = driver::external::driver_env(&run_spec, &task_path, &events_path);
    env.retain(|(k, _)| k != "PATH");
    env.push((
        "PATH".into(),
        format!("{}:/usr/local/bin:/usr/bin:/bin", path(&installed.bin_dir)),
    ));
    let mut child = tokio::process::Command::new(harness())
        .arg(matrix::hidden::DRIVE)
        .env_clear()
        .envs(env)
        .current_dir(&workspace)
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create(dir.join("driver-stdout.log")).unwrap())
        .stderr(std::fs::File::create(dir.join("driver-stderr.log")).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take();
    let started = Instant::now();
    if !matches!(deliver, Deliver::Nothing) {
        while !turn_is_live(&transcript_path) {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the driver's turn never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        match deliver {
            Deliver::Sigint => nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.id().unwrap() as i32),
                nix::sys::signal::Signal::SIGINT,
            )
            .unwrap(),
            Deliver::StdinLine(line) => {
                let pipe = stdin.as_mut().unwrap();
                pipe.write_all(format!("{line}\n").as_bytes())
                    .await
                    .unwrap();
                pipe.flush().await.unwrap();
            }
            Deliver::Nothing => {}
        }
    }
    let status = tokio::time::timeout(RUN_BOUND, child.wait())
        .await
        .expect("the driver ended within the bound")
        .unwrap();
    drop(stdin);
    let end = match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(code), _) => DriverEnd::Exited { code },
        (None, Some(signal)) => DriverEnd::Signaled { signal },
        _ => unreachable!("a process ends with a code or a signal"),
    };
    let ctx = wire::Context {
        cell,
        driver: "reference".into(),
        mode: task.mode,
        target: Target::Local,
        network_enabled: false,
        policy: PolicyGeneration::Current,
        protocol: ProtocolSetup {
            release: Some(fake_app_server::persona::DEFAULT_VERSION.to_string()),
            declarations: suites::spec::DeclaredDriver::harness_own(String::new()).declarations(),
            canaries: None,
            experimental_only_notifications: Vec::new(),
            task: None,
        },
    };
    let seal = recording.finish(driver::bounds::LAUNCH_FINISH_GRACE);
    assert_eq!(
        seal.check(&transcript_path),
        Ok(()),
        "the transcript is the recorder's"
    );
    let transcript = std::fs::read_to_string(&transcript_path).unwrap();
    let translation = wire::translate(transcript.as_bytes(), &ctx, &end).unwrap();
    let mut log = EventLog::in_memory("tapped");
    for body in translation.events {
        log.emit(Source::Driver, body).unwrap();
    }
    matrix::stages::events::append_model_events(&mut log, &model_log).unwrap();
    log.end(translation.terminal).unwrap();
    TappedRun {
        exit_code: status.code(),
        events: log.events().to_vec(),
        driver_events: std::fs::read_to_string(&events_path).unwrap_or_default(),
        transcript,
        root,
    }
}
