use super::*;
use crate::events::{ApprovalKind, Ending, Event, Source};
use serde_json::{json, Value};

fn ctx(mode: Mode) -> Context {
    Context {
        cell: CellId::new("core-compatibility", "r", "local", "message-marker"),
        driver: "wire-driver".into(),
        mode,
        target: Target::Local,
        network_enabled: false,
        policy: PolicyGeneration::Current,
        protocol: Default::default(),
    }
}

fn line(direction: &str, message: Value) -> String {
    json!({"direction": direction, "time": 1, "launch": 1, "message": message}).to_string()
}

fn session(thread_start_error: bool) -> Vec<String> {
    let mut lines = vec![
        json!({"kind":"launch","launch":1,"time":0,"argv":["-c","default_permissions=\"p\"","app-server","--listen","stdio://"],"env_names":["PATH"],"cwd":"/w","added_args":["--x"]}).to_string(),
        line("in", json!({"id":1,"method":"initialize","params":{"capabilities":{"experimentalApi":true}}})),
        line("out", json!({"id":1,"result":{}})),
        line("in", json!({"id":2,"method":"thread/start","params":{"cwd":"/w","permissions":"p"}})),
    ];
    lines.push(if thread_start_error {
        line("out", json!({"id":2,"error":{"code":-32603,"message":"bwrap: loopback: Failed RTM_NEWADDR"}}))
    } else {
        line("out", json!({"id":2,"result":{"thread":{"id":"th1"},"activePermissionProfile":{"id":"p"},"sandbox":{"type":"readOnly"},"approvalPolicy":"on-request"}}))
    });
    lines
}

fn turn(id: u32, turn: &str, mode: &str, text: &str, items: &[Value]) -> Vec<String> {
    let mut lines = vec![
        line(
            "in",
            json!({"id":id,"method":"turn/start","params":{"threadId":"th1","permissions":"p","collaborationMode":{"mode":mode},"input":[{"type":"text","text":text}]}}),
        ),
        line("out", json!({"id":id,"result":{"turn":{"id":turn}}})),
        line(
            "out",
            json!({"method":"turn/started","params":{"turn":{"id":turn}}}),
        ),
    ];
    for item in items {
        lines.push(line(
            "out",
            json!({"method":"item/completed","params":{"turnId":turn,"item":item}}),
        ));
    }
    lines.push(line("out", json!({"method":"turn/completed","params":{"turn":{"id":turn,"status":"completed","error":null}}})));
    lines
}

fn run(lines: &[String], mode: Mode, end: DriverEnd) -> Translation {
    let text = lines.join("\n") + "\n";
    translate(text.as_bytes(), &ctx(mode), &end).unwrap()
}

fn grade(t: &Translation, suite: &str, case: &str) -> crate::verdict::Verdict {
    let mut events: Vec<Event> = t
        .events
        .iter()
        .enumerate()
        .map(|(i, b)| Event::new(i as u64, "r", Source::Driver, b.clone()))
        .collect();
    events.push(Event::new(
        events.len() as u64,
        "r",
        Source::Harness,
        Body::RunEnded(t.terminal.clone()),
    ));
    crate::grade::grade(suite, case, &events).unwrap()
}

#[test]
fn a_plain_turn_becomes_the_events_the_message_marker_grader_passes() {
    let mut lines = session(false);
    lines.extend(turn(
        3,
        "t1",
        "default",
        "Reply with MARKER-ab12",
        &[json!({"type":"agentMessage","id":"m1","text":"MARKER-ab12"})],
    ));
    let t = run(&lines, Mode::Standard, DriverEnd::Exited { code: 0 });
    let Body::RunStarted(started) = &t.events[0] else {
        panic!("{:?}", t.events[0])
    };
    assert_eq!(
        started.launch.argv,
        ["-c", "default_permissions=\"p\""],
        "app-server and --listen left out"
    );
    assert_eq!(started.launch.thread_permissions.as_deref(), Some("p"));
    assert!(started.launch.identity.starts_with("wire-"));
    assert!(t
        .events
        .iter()
        .any(|b| matches!(b, Body::SessionOpenRequested(o) if o.experimental_api)));
    assert_eq!(t.terminal.ending, Ending::Succeeded);
    assert!(
        t.events.iter().any(|b| matches!(b, Body::SessionStarted(s) if s.approval_policy == Some(json!("on-request")))),
        "events v2: the approval policy Codex reported"
    );
    let verdict = grade(&t, "core-compatibility", "message-marker");
    assert!(verdict.is_pass(), "{verdict:?}");
}

#[test]
fn plan_turns_become_plan_approvals_decided_by_the_next_turn() {
    let mut lines = session(false);
    let plan = |id: &str| json!({"type":"plan","id":id,"text":"1. do it"});
    lines.extend(turn(3, "t1", "plan", "Plan.", &[plan("p1")]));
    lines.extend(turn(4, "t2", "plan", "Revise it.", &[plan("p2")]));
    lines.extend(turn(5, "t3", "default", "Go.", &[]));
    let t = run(&lines, Mode::Planning, DriverEnd::Exited { code: 0 });
    let decisions: Vec<(String, String)> = t
        .events
        .iter()
        .filter_map(|b| match b {
            Body::ApprovalResolved(r) => Some((r.request_id.clone(), r.decision.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        decisions,
        [
            ("plan-1".into(), "revise".into()),
            ("plan-2".into(), "accept".into())
        ]
    );
    assert!(t
        .events
        .iter()
        .any(|b| matches!(b, Body::ApprovalRequested(r) if r.kind == ApprovalKind::Plan)));
}

#[test]
fn a_rejected_start_is_a_rejection_and_the_driver_events_only_add_what_the_wire_cannot_show() {
    let t = run(
        &session(true),
        Mode::Planning,
        DriverEnd::Exited { code: 1 },
    );
    assert!(t.events.iter().any(|b| matches!(b, Body::SessionRejected(r) if r.attempt == 1 && r.message.contains("RTM_NEWADDR"))));
    assert_eq!(
        t.terminal.error_code.as_deref(),
        Some("provider_startup_rejected")
    );
    assert!(!t.terminal.retry_offered, "the wire cannot show a Retry");
    let theirs = RunEnded {
        ending: Ending::FailedPermanently,
        retry_offered: true,
        error_code: Some("provider_startup_rejected".into()),
        reason: Some("rejected".into()),
    };
    let lying = vec![Body::SessionStarted(crate::events::SessionStarted {
        thread_id: "ghost".into(),
        sandbox: Default::default(),
        approval_policy: None,
        approvals_reviewer: None,
    })];
    let merged = compare::with_driver_events(t, &lying, Some(&theirs));
    assert!(merged.terminal.retry_offered);
    assert_eq!(merged.findings.len(), 2, "{:?}", merged.findings);
    assert!(merged.findings[0].contains("ghost"));
    assert!(
        !merged
            .events
            .iter()
            .any(|b| matches!(b, Body::SessionStarted(_))),
        "the wire wins"
    );
}

#[test]
fn launch_argv_drops_only_the_subcommand_and_the_transport_flag() {
    let words = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    assert_eq!(
        launch_argv(&words("-c a=1 app-server --listen stdio:// -c b=2")),
        words("-c a=1 -c b=2")
    );
    assert_eq!(
        launch_argv(&words("app-server --listen=stdio:// --strange")),
        words("--strange")
    );
    assert_eq!(
        launch_argv(&words("-c app-server")),
        words("-c app-server"),
        "a -c value stays"
    );
}

#[test]
fn every_wire_event_carries_the_time_its_line_went_through_the_tap() {
    let mut lines = session(false);
    lines.push(
        json!({"direction":"out","time":1_700_000_000_777u64,"launch":1,"message":{"method":"turn/started","params":{"turn":{"id":"t9"}}}})
            .to_string(),
    );
    let t = run(&lines, Mode::Standard, DriverEnd::Exited { code: 0 });
    assert_eq!(t.times.len(), t.events.len(), "{:?}", t.events);
    assert_eq!(t.times[0], 0, "run.started: the first launch record's time");
    let started = t
        .events
        .iter()
        .position(|b| matches!(b, Body::TurnStarted(_)))
        .expect("turn.started from the wire");
    assert_eq!(t.times[started], 1_700_000_000_777);
    for (body, &time) in t.events[1..started].iter().zip(&t.times[1..started]) {
        // The launch is stamped with its launch record's time, every message with its own.
        let expected = if matches!(body, Body::AppServerLaunched(_)) {
            0
        } else {
            1
        };
        assert_eq!(time, expected, "{body:?}");
    }
}

#[test]
fn automatic_reviews_become_review_events_from_the_driver() {
    let command = "/bin/bash -lc 'printf probe > plan-write-probe-1.txt'";
    let review = |method: &str, status: &str| {
        line(
            "out",
            json!({"method": method, "params": {"threadId":"th1","turnId":"t1","reviewId":"r1",
                "targetItemId":"call_1","decisionSource": (status != "inProgress").then_some("agent"),
                "action":{"type":"command","command":command,"cwd":"/w","source":"unifiedExec"},
                "review":{"status":status,"riskLevel":null,"userAuthorization":null,"rationale":"too risky"}}}),
        )
    };
    let mut lines = session(false);
    lines.push(review("item/autoApprovalReview/started", "inProgress"));
    lines.push(review("item/autoApprovalReview/completed", "denied"));
    let t = run(&lines, Mode::Standard, DriverEnd::Exited { code: 0 });
    let reviews: Vec<&crate::events::AutoReview> = t
        .events
        .iter()
        .filter_map(|b| match b {
            Body::ReviewStarted(r) | Body::ReviewCompleted(r) => Some(r),
            _ => None,
        })
        .collect();
    assert_eq!(reviews.len(), 2, "{:?}", t.events);
    let started = t
        .events
        .iter()
        .position(|b| matches!(b, Body::ReviewStarted(_)));
    let completed = t
        .events
        .iter()
        .position(|b| matches!(b, Body::ReviewCompleted(_)));
    assert!(started < completed, "{:?}", t.events);
    assert_eq!(reviews[0].status, "inProgress");
    assert_eq!(reviews[1].status, "denied");
    assert_eq!(reviews[1].review_id, "r1");
    assert_eq!(reviews[1].target_item_id.as_deref(), Some("call_1"));
    assert_eq!(reviews[1].command.as_deref(), Some(command));
    assert_eq!(reviews[1].rationale.as_deref(), Some("too risky"));
    assert_eq!(reviews[1].decision_source.as_deref(), Some("agent"));
}

/// The tap's transport timing (a held `turn/start` answer) is read as the harness's doing: an
/// `info` diagnostic naming the rule, where the events are read; the turn the driver got in the
/// tap's order still completes and passes.
#[test]
fn a_timing_record_becomes_a_diagnostic_and_the_turn_stays_whole() {
    let mut lines = session(false);
    let mut played = turn(
        3,
        "t1",
        "default",
        "Reply with MARKER-ab12",
        &[json!({"type":"agentMessage","id":"m1","text":"MARKER-ab12"})],
    );
    // In the order the driver got it: the answer after turn/completed, its timing record first.
    let answer = played.remove(1);
    played.push(json!({"kind":"timing","launch":1,"time":1,"rule":"answer-after-events","method":"turn/start","id":3,"turn":"t1","held_ms":4,"released":"after-turn-completed","did":"held by the harness's tap"}).to_string());
    played.push(answer);
    lines.extend(played);
    let t = run(&lines, Mode::Standard, DriverEnd::Exited { code: 0 });
    let said = t.events.iter().any(|b| {
        matches!(b, Body::Diagnostic(d) if d.level == crate::events::Level::Info
            && d.message.contains("`answer-after-events`")
            && d.message.contains("harness's tap"))
    });
    assert!(said, "{:?}", t.events);
    let verdict = grade(&t, "core-compatibility", "message-marker");
    assert!(verdict.is_pass(), "{verdict:?}");
}
