//! `protocol-task-binding`: a driver that does not do what the task chose — another working
//! folder, a writable planning turn, a standard task run as a plan, approvals other than the
//! task's — fails the case of that choice; each legitimate way to express the choice passes.

use crate::support::wire::*;
use graders::events::{Mode, TaskChoices};
use graders::verdict::VerdictKind::{self, Fail, Incomplete, Pass};
use rstest::rstest;
use serde_json::{json, Value};

fn binding(case: &str, transcript: Transcript) -> Run {
    case_run(case).transcript(|_| transcript)
}

fn case_run(case: &str) -> Run {
    healthy("protocol-task-binding", case)
}

/// Handshake, `thread/start` with `params` answered with `reported` on top of a read-only
/// thread in the workspace, and the driver's turn with `turn` added to its `turn/start`.
fn session_with(start: Transcript, params: Value, reported: Value, turn: Value) -> Transcript {
    let mut turn_params = json!({"threadId": THREAD, "input": [{"type": "text", "text": "go"}]});
    for (key, value) in turn.as_object().into_iter().flatten() {
        turn_params[key] = value.clone();
    }
    start
        .handshake()
        .open_thread_with(params, reported)
        .request(TURN_START_ID, "turn/start", turn_params)
        .result(TURN_START_ID, json!({"turn": {"id": TURN}}))
        .turn_started(THREAD, TURN)
        .finish()
}

fn plain(params: Value, reported: Value, turn: Value) -> Transcript {
    session_with(Transcript::new(), params, reported, turn)
}

// ---- the workspace -------------------------------------------------------------------------

#[test]
fn a_driver_that_opens_its_thread_elsewhere_fails_task_workspace() {
    let verdict = binding(
        "workspace-cwd",
        plain(
            json!({"cwd": "/home/me/project"}),
            json!({"thread": {"id": THREAD, "cwd": "/home/me/project"}}),
            json!({}),
        ),
    )
    .grade();
    check(&verdict, Fail, "task-workspace");
    insta::assert_json_snapshot!("task-binding.workspace-cwd.elsewhere", verdict);
}

/// The cwd on `thread/start`, on `turn/start` only (Codex takes a turn's cwd for it and the turns
/// after it), none at all with the app-server started in the workspace, a relative one: each is
/// the thread running in the task's workspace. A turn moved elsewhere, an app-server started
/// elsewhere with no cwd sent, a sibling folder: each is not.
#[rstest]
#[case::on_thread_start(Transcript::new(), json!({"cwd": "/w"}), json!({}), Pass)]
#[case::with_a_trailing_slash(Transcript::new(), json!({"cwd": "/w/"}), json!({}), Pass)]
#[case::on_turn_start_only(Transcript::started_in("/"), json!({}), json!({"cwd": "/w"}), Pass)]
#[case::turn_start_overrides_the_thread(Transcript::new(), json!({"cwd": "/tmp"}), json!({"cwd": "/w"}), Pass)]
#[case::none_sent_the_app_server_started_there(Transcript::new(), json!({}), json!({}), Pass)]
#[case::relative_to_the_app_servers_folder(Transcript::started_in("/"), json!({"cwd": "./w"}), json!({}), Pass)]
#[case::turn_start_moves_away(Transcript::new(), json!({"cwd": "/w"}), json!({"cwd": "/srv/other"}), Fail)]
#[case::no_cwd_and_started_elsewhere(Transcript::started_in("/opt/driver"), json!({}), json!({}), Fail)]
#[case::a_sibling_folder(Transcript::new(), json!({"cwd": "/w2"}), json!({}), Fail)]
fn the_working_folder_in_every_spelling(
    #[case] start: Transcript,
    #[case] thread: Value,
    #[case] turn: Value,
    #[case] expected: VerdictKind,
) {
    // Nothing reported: the requests decide.
    let reported = json!({"thread": {"id": THREAD}});
    let verdict = binding("workspace-cwd", session_with(start, thread, reported, turn)).grade();
    if expected == Fail {
        check(&verdict, Fail, "task-workspace");
    } else {
        assert_eq!(verdict.verdict, expected, "{verdict:?}");
    }
}

#[test]
fn the_canonical_path_of_a_linked_workspace_passes() {
    let task = TaskChoices {
        workspace: vec!["/tmp/link/w".into(), "/private/tmp/real/w".into()],
        ..TaskChoices::default()
    };
    for cwd in ["/tmp/link/w", "/private/tmp/real/w", "/tmp/link/./w"] {
        let verdict = binding(
            "workspace-cwd",
            plain(
                json!({"cwd": cwd}),
                json!({"thread": {"id": THREAD, "cwd": cwd}}),
                json!({}),
            ),
        )
        .with_task(Some(task.clone()))
        .grade();
        assert_eq!(verdict.verdict, Pass, "{cwd}: {verdict:?}");
    }
}

/// Every launch counts: a relaunch whose thread opens elsewhere fails though the first one
/// was right.
#[test]
fn a_relaunch_that_opens_its_thread_elsewhere_fails() {
    let transcript = Transcript::session()
        .complete_turn(THREAD, TURN, "completed")
        .close()
        .relaunch()
        .handshake()
        .request(
            THREAD_START_ID,
            "thread/resume",
            json!({"threadId": THREAD, "cwd": "/elsewhere"}),
        )
        .result(
            THREAD_START_ID,
            json!({"thread": {"id": THREAD, "cwd": "/elsewhere"}}),
        )
        .start_turn(TURN_START_ID, THREAD, "turn-2")
        .complete_turn(THREAD, "turn-2", "completed")
        .close();
    let verdict = binding("workspace-cwd", transcript).grade();
    check(&verdict, Fail, "task-workspace");
    assert!(verdict.reason.contains("turn-2"), "{}", verdict.reason);
}

#[test]
fn a_stream_without_the_tasks_record_is_incomplete() {
    let verdict = case_run("workspace-cwd").with_task(None).grade();
    assert_eq!(verdict.verdict, Incomplete, "{verdict:?}");
    assert!(verdict.reason.contains("run.started.protocol.task"));
}

// ---- the mode ------------------------------------------------------------------------------

fn planning(transcript: Transcript) -> Run {
    binding("mode-planning", transcript).in_mode(Mode::Planning)
}

/// Plan mode on a thread that can write: the driver took the mode for the plan collaboration
/// mode alone, and Codex runs the model's tools in plan mode too.
#[test]
fn a_writable_planning_turn_fails_planning_read_only() {
    let plan = json!({"collaborationMode": {"mode": "plan", "settings": {"model": "m"}}});
    let verdict = planning(plain(
        json!({"cwd": "/w", "sandbox": "workspace-write"}),
        json!({"sandbox": {"type": "workspaceWrite"}}),
        plan,
    ))
    .grade();
    check(&verdict, Fail, "planning-read-only");
    insta::assert_json_snapshot!("task-binding.mode-planning.writable", verdict);
}

#[rstest]
#[case::a_profile_that_writes_on_turn_start(json!({}), json!({}), json!({"permissions": ":workspace"}))]
#[case::a_writable_policy_on_turn_start(json!({}), json!({}), json!({"sandboxPolicy": {"type": "dangerFullAccess"}}))]
#[case::a_writable_mode_nobody_reported(json!({"sandbox": "danger-full-access"}), json!({"sandbox": null}), json!({}))]
fn a_planning_turn_given_write_access_in_any_spelling_fails(
    #[case] thread: Value,
    #[case] reported: Value,
    #[case] turn: Value,
) {
    let verdict = planning(plain(thread, reported, turn)).grade();
    check(&verdict, Fail, "planning-read-only");
}

/// The app-server's read-only default, the legacy sandbox mode, the built-in read-only profile,
/// or a read-only policy per turn on a thread that could write (codex-acp's read-only mode):
/// each keeps the planning turn from writing.
#[rstest]
#[case::the_app_servers_default(json!({"cwd": "/w"}), json!({}), json!({}))]
#[case::the_sandbox_mode(json!({"sandbox": "read-only"}), json!({"sandbox": null}), json!({}))]
#[case::the_read_only_profile(json!({"permissions": ":read-only"}), json!({"sandbox": null}), json!({}))]
#[case::a_read_only_policy_per_turn(json!({}), json!({"sandbox": {"type": "workspaceWrite"}}), json!({"sandboxPolicy": {"type": "readOnly", "networkAccess": false}}))]
#[case::with_the_plan_mode(json!({}), json!({}), json!({"collaborationMode": {"mode": "plan", "settings": {"model": "m"}}}))]
fn every_read_only_planning_spelling_passes(
    #[case] thread: Value,
    #[case] reported: Value,
    #[case] turn: Value,
) {
    let verdict = planning(plain(thread, reported, turn)).grade();
    assert_eq!(verdict.verdict, Pass, "{verdict:?}");
}

#[rstest]
#[case::on_turn_start(json!({"collaborationMode": {"mode": "plan", "settings": {"model": "m"}}}), None)]
#[case::by_a_settings_update(json!({}), Some(json!({"threadId": THREAD, "collaborationMode": {"mode": "plan", "settings": {"model": "m"}}})))]
fn a_standard_task_run_as_a_plan_fails_mode_not_plan(
    #[case] turn: Value,
    #[case] update: Option<Value>,
) {
    let mut transcript = Transcript::new().handshake().open_thread(THREAD);
    if let Some(params) = update {
        transcript = transcript
            .request(7, "thread/settings/update", params)
            .result(7, json!({}));
    }
    let mut params = json!({"threadId": THREAD, "input": []});
    for (key, value) in turn.as_object().into_iter().flatten() {
        params[key] = value.clone();
    }
    let transcript = transcript
        .request(TURN_START_ID, "turn/start", params)
        .result(TURN_START_ID, json!({"turn": {"id": TURN}}))
        .finish();
    let verdict = binding("mode-standard", transcript).grade();
    check(&verdict, Fail, "mode-not-plan");
    let ask = binding("mode-ask", Transcript::session().finish())
        .in_mode(Mode::Ask)
        .grade();
    assert_eq!(ask.verdict, Pass, "{ask:?}");
}

#[test]
fn the_default_collaboration_mode_is_a_standard_turn() {
    let turn = json!({"collaborationMode": {"mode": "default", "settings": {"model": "m"}}});
    let verdict = binding(
        "mode-standard",
        plain(json!({"cwd": "/w"}), json!({}), turn),
    )
    .grade();
    assert_eq!(verdict.verdict, Pass, "{verdict:?}");
}

// ---- the approvals -------------------------------------------------------------------------

fn approvals(case: &str, asked: &str, transcript: Transcript) -> Run {
    binding(case, transcript).with_task(Some(task_in_workspace(Some(asked))))
}

#[test]
fn approvals_ignored_name_what_the_task_asked() {
    let verdict = approvals(
        "approvals-never",
        "never",
        plain(json!({"cwd": "/w"}), json!({}), json!({})),
    )
    .grade();
    insta::assert_json_snapshot!("task-binding.approvals-never.ignored", verdict);
}

/// On the thread, on the turn, or as Codex reported it: each is the thread's setting, and one
/// other than the task's fails.
#[rstest]
#[case::never_ignored("approvals-never", "never", json!({}), json!({}), json!({}), Fail)]
#[case::auto_review_ignored("approvals-auto-review", "auto-review", json!({}), json!({}), json!({}), Fail)]
#[case::a_user_never_asked("approvals-user", "user-accept", json!({"approvalPolicy": "never"}), json!({"approvalPolicy": "never"}), json!({}), Fail)]
#[case::the_user_replaced_by_the_reviewer("approvals-user", "user-decline", json!({}), json!({}), json!({"approvalsReviewer": "auto_review"}), Fail)]
#[case::never_on_turn_start("approvals-never", "never", json!({}), json!({}), json!({"approvalPolicy": "never"}), Pass)]
#[case::never_reported("approvals-never", "never", json!({}), json!({"approvalPolicy": "never"}), json!({}), Pass)]
#[case::reviewer_on_thread_start("approvals-auto-review", "auto-review", json!({"approvalsReviewer": "auto_review"}), json!({}), json!({}), Pass)]
#[case::reviewer_on_turn_start("approvals-auto-review", "auto-review", json!({}), json!({}), json!({"approvalsReviewer": "auto_review"}), Pass)]
#[case::the_legacy_reviewer_name("approvals-auto-review", "auto-review", json!({}), json!({"approvalsReviewer": "guardian_subagent"}), json!({}), Pass)]
#[case::the_default_user("approvals-user", "user-default", json!({}), json!({}), json!({}), Pass)]
#[case::the_user_said_outright("approvals-user", "user-accept", json!({"approvalsReviewer": "user"}), json!({"approvalsReviewer": "user"}), json!({"approvalPolicy": "untrusted"}), Pass)]
fn the_tasks_approvals_in_every_spelling(
    #[case] case: &str,
    #[case] asked: &str,
    #[case] thread: Value,
    #[case] reported: Value,
    #[case] turn: Value,
    #[case] expected: VerdictKind,
) {
    let verdict = approvals(case, asked, plain(thread, reported, turn)).grade();
    if expected == Fail {
        check(&verdict, Fail, "task-approvals");
    } else {
        assert_eq!(verdict.verdict, expected, "{verdict:?}");
    }
}

// ---- the model -----------------------------------------------------------------------------

/// On the thread, on the turn, or as Codex reported it: the task's model passes; the app-server's
/// default kept by a driver that ignores the task, or another model on a later turn, fails.
#[rstest]
#[case::on_thread_start(json!({"model": "mock-model"}), json!({"model": "mock-model"}), json!({}), Pass)]
#[case::on_turn_start(json!({}), json!({"model": "gpt-5.5"}), json!({"model": "mock-model"}), Pass)]
#[case::the_default_kept(json!({}), json!({"model": "gpt-5.5"}), json!({}), Fail)]
#[case::another_on_the_turn(json!({"model": "mock-model"}), json!({"model": "mock-model"}), json!({"model": "gpt-5.5"}), Fail)]
fn the_tasks_model_in_every_spelling(
    #[case] thread: Value,
    #[case] reported: Value,
    #[case] turn: Value,
    #[case] expected: VerdictKind,
) {
    let task = TaskChoices {
        model: Some("mock-model".into()),
        ..task_in_workspace(None)
    };
    let verdict = binding("model", plain(thread, reported, turn))
        .with_task(Some(task))
        .grade();
    if expected == Fail {
        check(&verdict, Fail, "task-model");
    } else {
        assert_eq!(verdict.verdict, expected, "{verdict:?}");
    }
}
