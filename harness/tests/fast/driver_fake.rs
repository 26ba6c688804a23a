//! The reference driver against the fake app-server (the hidden `harness fake-app-server`
//! subcommand), asserting on the fake's transcript of what the driver really sent, and on the
//! run events the driver wrote.
//!
//! Longer than 600 lines on purpose: one binary for every scenario the reference driver plays
//! against the fake, sharing one way to drive a run and read both transcripts; split, each part
//! would repeat that set-up.

use driver::bounds::Timeouts;
use driver::event_log::EventLog;
use driver::launch::LaunchRequest;
use driver::reference::{run_reference, DriverConfig};
use driver::run::{AppServerProgram, RunSpec};
use driver::task::{PlanReview, Relaunch, Task};
use graders::events::{
    Body, CellId, Ending, Event, Item, Mode, Outcome, PolicyGeneration, RunEnded, Target,
};
use graders::verdict::{Verdict, VerdictKind};
use rstest::rstest;
use sandbox::launcher::LocalLauncher;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

struct Run {
    ended: RunEnded,
    events: Vec<Event>,
    /// Messages the fake received (`in`) / sent (`out`), over every app-server process of the run.
    sent: Vec<Value>,
    received: Vec<Value>,
    /// The driver's own transcript (`DriverConfig::transcript`), same shape.
    client_transcript: Vec<Value>,
    /// The fake's transcript, every entry.
    fake_transcript: Vec<Value>,
    workspace: PathBuf,
    _dir: tempfile::TempDir,
}

impl Run {
    fn requests(&self, method: &str) -> Vec<&Value> {
        self.sent
            .iter()
            .filter(|m| m["method"] == method && m.get("id").is_some())
            .collect()
    }

    fn answers_to(&self, server_method: &str) -> Vec<&Value> {
        let ids: Vec<&Value> = self
            .received
            .iter()
            .filter(|m| m["method"] == server_method && m.get("id").is_some())
            .map(|m| &m["id"])
            .collect();
        self.sent
            .iter()
            .filter(|m| m.get("method").is_none() && ids.contains(&&m["id"]))
            .collect()
    }

    fn bodies(&self) -> impl Iterator<Item = &Body> {
        self.events.iter().map(|e| &e.body)
    }

    fn results(&self) -> Vec<&graders::events::ResultProposed> {
        self.bodies()
            .filter_map(|b| match b {
                Body::ResultProposed(r) => Some(r),
                _ => None,
            })
            .collect()
    }
}

fn fake_timeouts() -> Timeouts {
    Timeouts {
        request: Duration::from_secs(10),
        turn_idle: Duration::from_secs(10),
        turn_total: Duration::from_secs(30),
        shutdown: Duration::from_secs(5),
        startup_attempts: 3,
    }
}

async fn drive(
    scenario: &str,
    task: Task,
    target: Target,
    network: bool,
    policy: PolicyGeneration,
    timeouts: Timeouts,
) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("workspace");
    let home = dir.path().join("home");
    let tmp = dir.path().join("tmp");
    for d in [&workspace, &home, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(workspace.join("AGENTS.md"), "# Agents\nBe terse.\n").unwrap();
    let transcript = dir.path().join("transcript.jsonl");
    let scenario_spec = if Path::new(scenario).is_absolute() {
        scenario.to_string()
    } else {
        format!("builtin:{scenario}")
    };
    let env = vec![
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        ),
        ("HOME".to_string(), home.display().to_string()),
        (
            "CODEX_HOME".to_string(),
            home.join(".codex").display().to_string(),
        ),
        ("TMPDIR".to_string(), tmp.display().to_string()),
        ("FAKE_APP_SERVER_SCENARIO".to_string(), scenario_spec),
        (
            "FAKE_APP_SERVER_TRANSCRIPT".to_string(),
            transcript.display().to_string(),
        ),
    ];
    let config = DriverConfig {
        run: RunSpec {
            cell: CellId::new("driver-tests", "runner-fake", "local", "case"),
            launch: LaunchRequest {
                mode: task.mode,
                target,
                network_enabled: network,
                policy,
                workspace: workspace.clone(),
            },
            task,
            app_server: AppServerProgram {
                program: env!("CARGO_BIN_EXE_harness").into(),
                leading_args: vec!["fake-app-server".into(), "app-server".into()],
                extra_args: vec![],
                env,
            },
            timeouts,
        },
        launcher: Arc::new(LocalLauncher),
        stderr_log: dir.path().join("stderr.log"),
        transcript: Some(dir.path().join("client-transcript.jsonl")),
    };
    let mut log = EventLog::in_memory("run-test");
    let ended = run_reference(&config, &mut log).await;
    let entries = |path: &Path| -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let client_transcript = entries(&dir.path().join("client-transcript.jsonl"));
    let fake_transcript = entries(&transcript);
    let (mut sent, mut received) = (Vec::new(), Vec::new());
    if let Ok(text) = std::fs::read_to_string(&transcript) {
        for line in text.lines() {
            let entry: Value = serde_json::from_str(line).unwrap();
            match (entry["direction"].as_str(), entry.get("message")) {
                (Some("in"), Some(m)) => sent.push(m.clone()),
                (Some("out"), Some(m)) => received.push(m.clone()),
                _ => {}
            }
        }
    }
    Run {
        ended,
        events: log.events().to_vec(),
        sent,
        received,
        client_transcript,
        fake_transcript,
        workspace,
        _dir: dir,
    }
}

/// [`drive`] with the current rules, no network and the usual timeouts.
async fn drive_current(scenario: &str, task: Task, target: Target) -> Run {
    drive(
        scenario,
        task,
        target,
        false,
        PolicyGeneration::Current,
        fake_timeouts(),
    )
    .await
}

/// A planning run in an external sandbox whose thread, saved under `saved_under`, is resumed by
/// an app-server relaunched under the current rules.
async fn relaunched_run(saved_under: PolicyGeneration) -> Run {
    let mut task = Task::new(Mode::Planning, "Plan a small refactor.");
    task.plan_reviews = vec![PlanReview::Approve];
    task.relaunch = Some(Relaunch {
        saved_under: Some(saved_under),
        policy: Some(PolicyGeneration::Current),
        prompt: "Continue.".into(),
    });
    drive_current("healthy", task, Target::ExternalSandbox).await
}

/// Grade the run (with its terminal event) as `suite`/`case`, asserting the verdict kind.
fn assert_grade(run: &Run, suite: &str, case: &str, expected: VerdictKind) -> Verdict {
    let grade = graders::grade::grade(suite, case, &with_terminal(run)).unwrap();
    assert_eq!(grade.verdict, expected, "{suite}/{case}: {}", grade.reason);
    grade
}

/// How many plan-write probe files exist in `workspace`.
fn probe_files(workspace: &Path) -> usize {
    std::fs::read_dir(workspace)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("plan-write-probe")
        })
        .count()
}

fn task_for(mode: Mode) -> (String, Task) {
    match mode {
        Mode::Planning => {
            let mut task = Task::new(mode, "Try to write the probe file, then plan.");
            task.plan_reviews = vec![PlanReview::Approve];
            ("plan-write-refused".into(), task)
        }
        Mode::Standard => (
            "message-marker".into(),
            Task::new(mode, "Echo MARKER-7f3a please."),
        ),
        Mode::Ask => ("ask-question".into(), Task::new(mode, "Which branch?")),
    }
}

/// Every launch rule, on the wire, for every combination.
#[rstest]
#[tokio::test]
async fn the_driver_sends_what_the_policy_says(
    #[values(Mode::Planning, Mode::Standard, Mode::Ask)] mode: Mode,
    #[values(Target::Local, Target::Ssh, Target::ExternalSandbox)] target: Target,
    #[values(false, true)] network: bool,
    #[values(PolicyGeneration::Current, PolicyGeneration::Legacy)] policy: PolicyGeneration,
) {
    let (scenario, task) = task_for(mode);
    let run = drive(&scenario, task, target, network, policy, fake_timeouts()).await;
    let combo = format!("{mode:?}/{target:?}/network={network}/{policy:?}");
    assert_eq!(
        run.ended.ending,
        Ending::Succeeded,
        "{combo}: {:?}",
        run.ended
    );

    let Some(Body::RunStarted(started)) = run.bodies().next() else {
        panic!("{combo}: no run.started")
    };
    let profile = started.launch.thread_permissions.clone().unwrap();
    assert_eq!(started.launch.identity.len(), 64);

    let init = run.requests("initialize");
    assert_eq!(init.len(), 1, "{combo}");
    assert_eq!(init[0]["params"]["capabilities"]["experimentalApi"], true);
    assert!(run
        .sent
        .iter()
        .any(|m| m["method"] == "initialized" && m.get("id").is_none()));

    let threads = run.requests("thread/start");
    assert_eq!(threads.len(), 1, "{combo}");
    let params = &threads[0]["params"];
    assert_eq!(params["permissions"], profile.as_str());
    assert_eq!(params["cwd"], run.workspace.display().to_string());
    let tools: Vec<&str> = params["dynamicTools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["paperclip_finish", "paperclip_block"]);
    assert!(
        params.get("sandbox").is_none(),
        "{combo}: no legacy sandbox widening"
    );

    let turns = run.requests("turn/start");
    assert!(!turns.is_empty(), "{combo}");
    for (i, turn) in turns.iter().enumerate() {
        let p = &turn["params"];
        assert_eq!(
            p["permissions"],
            profile.as_str(),
            "{combo}: turn {i} keeps the profile"
        );
        assert!(p.get("sandboxPolicy").is_none());
        let collab = p["collaborationMode"]["mode"].as_str();
        match mode {
            Mode::Planning if i == 0 => {
                assert_eq!(collab, Some("plan"), "{combo}");
                assert_eq!(
                    p["collaborationMode"]["settings"]["reasoning_effort"],
                    Value::Null
                );
                assert_eq!(
                    p["collaborationMode"]["settings"]["developer_instructions"],
                    Value::Null
                );
                assert!(p["collaborationMode"]["settings"]["model"].is_string());
            }
            Mode::Planning => assert_eq!(
                collab,
                Some("default"),
                "{combo}: follow-up leaves plan mode"
            ),
            _ => assert!(
                p.get("collaborationMode").is_none(),
                "{combo}: no collaboration mode"
            ),
        }
    }
    // The app-server accepted the profile it was given.
    let Some(Body::SessionStarted(session)) =
        run.bodies().find(|b| matches!(b, Body::SessionStarted(_)))
    else {
        panic!("{combo}: no session.started")
    };
    assert_eq!(
        session.sandbox.active_profile.as_deref(),
        Some(profile.as_str())
    );

    match mode {
        Mode::Planning => {
            // The write was attempted and did not land.
            let attempted = run.bodies().any(|b| matches!(b, Body::ItemCompleted(e) if matches!(&e.item, Item::CommandExecution(c) if c.command.contains("plan-write-probe"))));
            assert!(attempted, "{combo}: the probe write was attempted");
            let probes = probe_files(&run.workspace);
            assert_eq!(probes, 0, "{combo}: planning wrote a file");
            assert!(run
                .bodies()
                .any(|b| matches!(b, Body::ApprovalResolved(r) if r.decision == "accept")));
            assert_eq!(turns.len(), 2);
            assert_eq!(run.results().last().unwrap().outcome, Outcome::Done);
        }
        Mode::Standard => {
            assert!(run.bodies().any(|b| matches!(b, Body::ItemCompleted(e) if matches!(&e.item, Item::AgentMessage { text, .. } if text.contains("MARKER-7f3a")))), "{combo}");
            assert_eq!(run.results().last().unwrap().outcome, Outcome::Done);
        }
        Mode::Ask => {
            let last = run.results().last().copied().unwrap().clone();
            assert_eq!(
                (last.outcome, last.owner.as_deref()),
                (Outcome::Blocked, Some("user")),
                "{combo}"
            );
            assert_eq!(
                turns.len(),
                1,
                "{combo}: no answer scripted, so no second turn"
            );
        }
    }
    // Every dynamic tool call was answered as a success.
    for answer in run.answers_to("item/tool/call") {
        assert_eq!(answer["result"]["success"], true, "{combo}: {answer}");
    }
}

/// `Task::relaunch`: the planning thread saved under the legacy rules is resumed by a fresh
/// app-server launched under the current rules (same launch identity), and a turn runs on it.
#[tokio::test]
async fn a_relaunch_under_changed_rules_resumes_the_saved_thread() {
    let run = relaunched_run(PolicyGeneration::Legacy).await;
    assert_eq!(run.ended.ending, Ending::Succeeded, "{:?}", run.ended);

    // Two app-server processes: the first starts a persisted thread, the second resumes it.
    assert_eq!(run.requests("initialize").len(), 2);
    let starts = run.requests("thread/start");
    assert_eq!(starts.len(), 1);
    assert_eq!(starts[0]["params"]["ephemeral"], false);
    let thread_id = run
        .bodies()
        .find_map(|b| match b {
            Body::SessionStarted(s) => Some(s.thread_id.clone()),
            _ => None,
        })
        .unwrap();
    let resumes = run.requests("thread/resume");
    assert_eq!(resumes.len(), 1);
    let resume = &resumes[0]["params"];
    assert_eq!(resume["threadId"], thread_id.as_str());
    assert_eq!(
        resume["permissions"],
        "paperclip-runner-workspace-read-only"
    );
    assert_eq!(resume["cwd"], run.workspace.display().to_string());
    let turns = run.requests("turn/start");
    let last = turns.last().unwrap();
    assert_eq!(last["params"]["threadId"], thread_id.as_str());
    assert_eq!(last["params"]["input"][0]["text"], "Continue.");
    // The fake answered the resume with the thread it had saved.
    let resumed: Vec<&Value> = run
        .received
        .iter()
        .filter(|m| m["id"] == resumes[0]["id"] && m.get("result").is_some())
        .collect();
    assert_eq!(
        resumed.last().unwrap()["result"]["thread"]["id"],
        thread_id.as_str()
    );

    // The first launch ran under the legacy rules, the relaunch under the current ones.
    let Some(Body::RunStarted(started)) = run.bodies().next() else {
        panic!("no run.started")
    };
    assert_eq!(started.launch.policy, PolicyGeneration::Legacy);
    let relaunches: Vec<(u64, &graders::events::SessionRelaunched)> = run
        .events
        .iter()
        .filter_map(|e| match &e.body {
            Body::SessionRelaunched(r) => Some((e.seq, r)),
            _ => None,
        })
        .collect();
    let [(relaunch_seq, relaunched)] = relaunches.as_slice() else {
        panic!("expected one session.relaunched, got {relaunches:?}")
    };
    assert_eq!(relaunched.policy, PolicyGeneration::Current);
    assert_eq!(relaunched.identity, started.launch.identity);
    assert_ne!(relaunched.argv, started.launch.argv, "the rules changed");
    assert_eq!(
        relaunched.resume_thread.as_deref(),
        Some(thread_id.as_str())
    );
    assert_eq!(
        relaunched.thread_permissions.as_deref(),
        Some("paperclip-runner-workspace-read-only")
    );
    // The relaunch is recorded before the resumed session opens.
    let resumed_session_seq = run
        .events
        .iter()
        .filter(|e| matches!(&e.body, Body::SessionStarted(s) if s.thread_id == thread_id))
        .map(|e| e.seq)
        .nth(1)
        .expect("a second session.started for the saved thread");
    assert!(*relaunch_seq < resumed_session_seq);
    // Nothing records the relaunch in a diagnostic's text any more.
    assert!(!run.bodies().any(|b| matches!(
        b,
        Body::Diagnostic(d) if d.message.starts_with("launch-identity=")
            || d.message.starts_with("resume-thread=")
    )));
    assert_grade(
        &run,
        "launch-identity",
        "resume-after-profile-change",
        VerdictKind::Pass,
    );

    // The driver's transcript holds exactly the messages of the fake's, over both processes.
    let messages = |entries: &[Value], direction: &str| -> Vec<Value> {
        entries
            .iter()
            .filter(|e| e["direction"] == direction)
            .filter_map(|e| e.get("message").cloned())
            .collect()
    };
    for direction in ["in", "out"] {
        assert_eq!(
            messages(&run.client_transcript, direction),
            messages(&run.fake_transcript, direction),
            "direction {direction}"
        );
    }
    assert!(messages(&run.client_transcript, "in").len() > 6);
}

/// The same relaunch under unchanged rules still resumes (the identity is equal), but the
/// grader fails it: the run does not show identity stability across a rule change.
#[tokio::test]
async fn a_relaunch_under_unchanged_rules_is_not_a_pass() {
    let run = relaunched_run(PolicyGeneration::Current).await;
    assert_eq!(run.ended.ending, Ending::Succeeded, "{:?}", run.ended);
    assert_eq!(run.requests("thread/resume").len(), 1);
    let grade = assert_grade(
        &run,
        "launch-identity",
        "resume-after-profile-change",
        VerdictKind::Fail,
    );
    assert!(
        grade.reason.contains("did not change the rules"),
        "{}",
        grade.reason
    );
}

#[tokio::test]
async fn plan_revise_then_accept_runs_three_turns() {
    let mut task = Task::new(Mode::Planning, "Plan the change.");
    task.plan_reviews = vec![
        PlanReview::Revise {
            text: "Add a test step.".into(),
        },
        PlanReview::Approve,
    ];
    let run = drive_current("plan-revise-accept", task, Target::Local).await;
    assert_eq!(run.ended.ending, Ending::Succeeded, "{:?}", run.ended);
    let modes: Vec<Option<&str>> = run
        .requests("turn/start")
        .iter()
        .map(|t| t["params"]["collaborationMode"]["mode"].as_str())
        .collect();
    assert_eq!(modes, [Some("plan"), Some("plan"), Some("default")]);
    let texts: Vec<&str> = run
        .requests("turn/start")
        .iter()
        .map(|t| t["params"]["input"][0]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts[1], "Add a test step.");
    let decisions: Vec<&str> = run
        .bodies()
        .filter_map(|b| match b {
            Body::ApprovalResolved(r) => Some(r.decision.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(decisions, ["revise", "accept"]);
    assert_grade(
        &run,
        "core-compatibility",
        "plan-revise-accept",
        VerdictKind::Pass,
    );
}

#[tokio::test]
async fn ask_with_an_answer_continues_and_finishes() {
    let mut task = Task::new(Mode::Ask, "Which branch?");
    task.answers = vec!["Use main.".into()];
    let run = drive_current("ask-question", task, Target::Local).await;
    assert_eq!(run.ended.ending, Ending::Succeeded, "{:?}", run.ended);
    let turns = run.requests("turn/start");
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[1]["params"]["input"][0]["text"], "Use main.");
    assert_eq!(run.results().last().unwrap().outcome, Outcome::Done);
}

fn with_terminal(run: &Run) -> Vec<Event> {
    let mut events = run.events.clone();
    let seq = events.len() as u64;
    events.push(Event::new(
        seq,
        "run-test",
        graders::events::Source::Harness,
        Body::RunEnded(run.ended.clone()),
    ));
    events
}

#[rstest]
#[case::local(Target::Local)]
#[case::ssh(Target::Ssh)]
#[case::external(Target::ExternalSandbox)]
#[tokio::test]
async fn a_definite_startup_rejection_ends_at_once_with_retry_offered(#[case] target: Target) {
    let run = drive_current("startup-rejected", Task::new(Mode::Standard, "hi"), target).await;
    assert_eq!(run.ended.ending, Ending::FailedPermanently);
    assert!(run.ended.retry_offered);
    assert_eq!(
        run.ended.error_code.as_deref(),
        Some("provider_startup_rejected")
    );
    assert_eq!(
        run.ended.reason.as_deref(),
        Some("error creating thread: Fatal error: unexpected status 401 Unauthorized: Missing bearer or basic authentication in header")
    );
    assert_eq!(run.requests("thread/start").len(), 1, "no same-run retry");
    assert!(run.requests("turn/start").is_empty());
}

fn transient_scenario(dir: &Path) -> String {
    let path = dir.join("transient.toml");
    std::fs::write(
        &path,
        "name = \"transient\"\n[methods.\"thread/start\"]\nerror = { code = -32603, message = \"error creating thread: resource temporarily unavailable\" }\n",
    )
    .unwrap();
    path.display().to_string()
}

#[tokio::test]
async fn a_transient_local_failure_is_retried_with_fresh_processes_then_exhausted() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = transient_scenario(dir.path());
    let run = drive_current(&scenario, Task::new(Mode::Standard, "hi"), Target::Local).await;
    assert_eq!(
        run.ended.ending,
        Ending::RetriesExhausted,
        "{:?}",
        run.ended
    );
    assert!(run.ended.retry_offered);
    assert_eq!(run.ended.error_code.as_deref(), Some("retry_exhausted"));
    let opens = run
        .bodies()
        .filter(|b| matches!(b, Body::SessionOpenRequested(_)))
        .count();
    let rejections: Vec<u32> = run
        .bodies()
        .filter_map(|b| match b {
            Body::SessionRejected(r) => Some(r.attempt),
            _ => None,
        })
        .collect();
    assert_eq!(opens, 3);
    assert_eq!(rejections, [1, 2, 3]);
    assert_grade(
        &run,
        "startup-rejection",
        "transient-startup-failure",
        VerdictKind::Pass,
    );
}

#[tokio::test]
async fn the_same_failure_inside_an_external_sandbox_is_definite() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = transient_scenario(dir.path());
    let run = drive_current(
        &scenario,
        Task::new(Mode::Planning, "hi"),
        Target::ExternalSandbox,
    )
    .await;
    assert_eq!(run.ended.ending, Ending::FailedPermanently);
    assert_eq!(
        run.ended.error_code.as_deref(),
        Some("provider_startup_rejected")
    );
    assert_eq!(
        run.ended.reason.as_deref(),
        Some("error creating thread: resource temporarily unavailable")
    );
    assert_eq!(run.requests("thread/start").len(), 1);
}

#[rstest]
#[case::crash("crash-mid-turn", Ending::TransportLost)]
#[case::garbage("garbage-line", Ending::TransportLost)]
#[case::oversized("oversized-line", Ending::TransportLost)]
#[case::hang("hang", Ending::TimedOut)]
#[tokio::test]
async fn transport_faults_are_classified(#[case] scenario: &str, #[case] expected: Ending) {
    // The hang ends at the driver's idle wait, kept short; the others end on a lost transport,
    // which a loaded machine may take longer than 2 s to deliver (a large line's bytes; the
    // oversized case timed out at load 20), so their idle wait is no part of what they show.
    let turn_idle = if expected == Ending::TimedOut {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(15)
    };
    let timeouts = Timeouts {
        turn_idle,
        ..fake_timeouts()
    };
    let started = std::time::Instant::now();
    let run = drive(
        scenario,
        Task::new(Mode::Standard, "work"),
        Target::Local,
        false,
        PolicyGeneration::Current,
        timeouts,
    )
    .await;
    assert_eq!(run.ended.ending, expected, "{:?}", run.ended);
    assert!(run.ended.retry_offered);
    assert!(!run.ended.reason.clone().unwrap_or_default().is_empty());
    assert!(started.elapsed() < Duration::from_secs(40), "bounded");
}

#[tokio::test]
async fn a_failed_turn_ends_the_run_with_the_providers_message() {
    let run = drive_current(
        "turn-failed",
        Task::new(Mode::Standard, "work"),
        Target::Local,
    )
    .await;
    assert_eq!(run.ended.ending, Ending::FailedPermanently);
    assert_eq!(run.ended.error_code.as_deref(), Some("turn_failed"));
    assert!(
        run.ended
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("mock failure for testing"),
        "{:?}",
        run.ended
    );
}

#[tokio::test]
async fn tool_results_first_wins_retry_idempotent_conflict_rejected_and_escalation_declined() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tools.toml");
    std::fs::write(
        &path,
        r#"name = "tools"
[[turns]]
steps = [
  { step = "shell", cmd = "printf x > plan-write-probe-{probe_id}.txt && echo WRITE_SUCCEEDED", escalate = true, justification = "let me write" },
  { step = "tool-call", name = "paperclip_finish", arguments = { status = "maybe", summary = "bad" } },
  { step = "tool-call", name = "paperclip_finish", arguments = { status = "done", summary = "first" } },
  { step = "tool-call", name = "paperclip_finish", arguments = { status = "done", summary = "first" } },
  { step = "tool-call", name = "paperclip_finish", arguments = { status = "done", summary = "second" } },
]
"#,
    )
    .unwrap();
    let run = drive_current(
        &path.display().to_string(),
        Task::new(Mode::Ask, "go"),
        Target::Local,
    )
    .await;
    assert_eq!(run.ended.ending, Ending::Succeeded, "{:?}", run.ended);
    let successes: Vec<bool> = run
        .answers_to("item/tool/call")
        .iter()
        .map(|a| a["result"]["success"].as_bool().unwrap())
        .collect();
    assert_eq!(successes, [false, true, true, false]);
    let results = run.results();
    assert_eq!(results.len(), 1, "one result for the idempotent retry");
    assert_eq!(results[0].summary, "first");
    let approvals = run.answers_to("item/commandExecution/requestApproval");
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0]["result"]["decision"], "decline");
    let probes = probe_files(&run.workspace);
    assert_eq!(probes, 0);
}
