//! The protocol-level events of the translator: requests and answers both ways, the schema
//! verdict of each answer, the notifications summary, and the bound on what a burst can cost.

use super::*;
use crate::events::{
    ClientRequest, ClientRequestAnswered, DriverEnded, Kind, NotRecorded, SchemaVerdict,
    ServerNotifications, ServerRequest, ServerRequestAnswered,
};
use serde_json::{json, Value};

fn ctx(release: Option<&str>) -> Context {
    Context {
        cell: CellId::new("protocol-server-requests", "r", "local", "command-approval"),
        driver: "wire-driver".into(),
        mode: Mode::Standard,
        target: Target::Local,
        network_enabled: false,
        policy: PolicyGeneration::Current,
        protocol: ProtocolSetup {
            release: release.map(str::to_string),
            declarations: Default::default(),
            canaries: None,
            experimental_only_notifications: Vec::new(),
        },
    }
}

fn at(time: u64, direction: &str, message: Value) -> String {
    json!({"direction": direction, "time": time, "launch": 1, "message": message}).to_string()
}

/// A session and a turn whose approval request (id 7, sent at t=100) is answered by `answers`.
fn approval_then(answers: &[(u64, Value)]) -> Vec<String> {
    let mut lines = vec![
        json!({"kind":"launch","launch":1,"time":0,"argv":["app-server"],"env_names":[],"cwd":"/w","added_args":[]}).to_string(),
        at(1, "in", json!({"id":1,"method":"initialize","params":{}})),
        at(2, "out", json!({"id":1,"result":{}})),
        at(3, "in", json!({"method":"initialized"})),
        at(4, "in", json!({"id":2,"method":"thread/start","params":{"cwd":"/w","sandbox":"read-only"}})),
        at(9, "out", json!({"id":2,"result":{"thread":{"id":"th1"},"sandbox":{"type":"readOnly"}}})),
        at(10, "in", json!({"id":3,"method":"turn/start","params":{"threadId":"th1","input":[]}})),
        at(12, "out", json!({"id":3,"result":{"turn":{"id":"t1"}}})),
        at(100, "out", json!({"id":7,"method":"item/permissions/requestApproval",
            "params":{"threadId":"th1","turnId":"t1","itemId":"i1","permissions":{}}})),
    ];
    for (time, answer) in answers {
        lines.push(at(*time, "in", answer.clone()));
    }
    lines.push(at(
        400,
        "out",
        json!({"method":"turn/completed","params":{"threadId":"th1","turn":{"id":"t1","status":"completed"}}}),
    ));
    lines.push(json!({"kind":"stdin-closed","launch":1,"time":401}).to_string());
    lines.push(json!({"kind":"exit","launch":1,"time":402,"status":0}).to_string());
    lines
}

fn translate_lines(lines: &[String], release: Option<&str>) -> Translation {
    let text = lines.join("\n") + "\n";
    translate(
        text.as_bytes(),
        &ctx(release),
        &DriverEnd::Exited { code: 0 },
    )
    .unwrap()
}

fn answers(t: &Translation) -> Vec<&ServerRequestAnswered> {
    t.events
        .iter()
        .filter_map(|b| match b {
            Body::ServerRequestAnswered(a) => Some(a),
            _ => None,
        })
        .collect()
}

fn summary(t: &Translation) -> &ServerNotifications {
    t.events
        .iter()
        .find_map(|b| match b {
            Body::ServerNotifications(s) => Some(s),
            _ => None,
        })
        .expect("a notifications summary")
}

#[test]
fn a_server_request_and_its_answer_become_events_with_the_schema_verdict() {
    let t = translate_lines(
        &approval_then(&[(130, json!({"id":7,"result":{"decision":"decline"}}))]),
        Some("0.169.0"),
    );
    let request = t.events.iter().find_map(|b| match b {
        Body::ServerRequest(r) => Some(r),
        _ => None,
    });
    assert_eq!(
        request,
        Some(&ServerRequest {
            launch: 1,
            id: "7".into(),
            method: "item/permissions/requestApproval".into(),
            thread_id: Some("th1".into()),
            turn_id: Some("t1".into()),
            item_id: Some("i1".into()),
        })
    );
    let answers = answers(&t);
    assert_eq!(answers.len(), 1);
    let answer = answers[0];
    assert_eq!(
        answer.method.as_deref(),
        Some("item/permissions/requestApproval")
    );
    assert_eq!(answer.latency_ms, Some(30));
    assert_eq!(answer.decision.as_deref(), Some("decline"));
    match &answer.schema {
        Some(SchemaVerdict::Invalid {
            error,
            path,
            schema,
        }) => {
            assert!(error.contains("permissions"), "{error}");
            assert_eq!(path, "");
            assert_eq!(schema, "PermissionsRequestApprovalResponse.json");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_a_release_an_answer_is_unchecked_and_with_an_unknown_one_the_reason_names_those_there_are(
) {
    let lines = approval_then(&[(130, json!({"id":7,"result":{"permissions":{}}}))]);
    let none = translate_lines(&lines, None);
    assert!(
        matches!(&answers(&none)[0].schema, Some(SchemaVerdict::Unchecked { why }) if why.contains("not known")),
        "{:?}",
        answers(&none)
    );
    let unknown = translate_lines(&lines, Some("9.9.9"));
    assert!(
        matches!(&answers(&unknown)[0].schema, Some(SchemaVerdict::Unchecked { why }) if why.contains("0.169.0")),
        "{:?}",
        answers(&unknown)
    );
    let known = translate_lines(&lines, Some("0.169.0"));
    assert_eq!(answers(&known)[0].schema, Some(SchemaVerdict::Valid));
}

#[test]
fn a_second_answer_and_an_answer_to_an_id_never_asked_are_their_own_events() {
    let t = translate_lines(
        &approval_then(&[
            (
                110,
                json!({"id":7,"error":{"code":-32601,"message":"not supported"}}),
            ),
            (120, json!({"id":7,"result":{"permissions":{}}})),
            (125, json!({"id":99,"result":{"decision":"accept"}})),
        ]),
        Some("0.169.0"),
    );
    let answers = answers(&t);
    assert_eq!(answers.len(), 3, "{answers:?}");
    assert_eq!(answers[0].answer_number, 1);
    assert_eq!(
        answers[0]
            .error
            .as_ref()
            .map(|e| (e.code, e.message.as_str())),
        Some((Some(-32601), "not supported"))
    );
    assert_eq!(
        answers[0].schema, None,
        "an error answer has no schema verdict"
    );
    assert_eq!(answers[1].answer_number, 2);
    assert_eq!(answers[1].latency_ms, Some(20), "from the request");
    assert_eq!(answers[2].method, None, "never asked");
    assert_eq!(answers[2].latency_ms, None);
    assert!(matches!(
        answers[2].schema,
        Some(SchemaVerdict::Unchecked { .. })
    ));
}

#[test]
fn client_requests_notifications_answers_stdin_and_the_ends_are_recorded() {
    let t = translate_lines(&approval_then(&[]), Some("0.169.0"));
    let requests: Vec<&ClientRequest> = t
        .events
        .iter()
        .filter_map(|b| match b {
            Body::ClientRequest(r) => Some(r),
            _ => None,
        })
        .collect();
    let methods: Vec<&str> = requests.iter().map(|r| r.method.as_str()).collect();
    assert_eq!(methods, ["initialize", "thread/start", "turn/start"]);
    assert_eq!(requests[1].sandbox, Some(json!("read-only")));
    assert_eq!(requests[2].thread_id.as_deref(), Some("th1"));
    assert!(t.events.iter().any(
        |b| matches!(b, Body::ClientNotification(n) if n.method == "initialized" && n.launch == 1)
    ));
    let answered: Vec<&ClientRequestAnswered> = t
        .events
        .iter()
        .filter_map(|b| match b {
            Body::ClientRequestAnswered(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(answered[1].thread_id.as_deref(), Some("th1"));
    assert_eq!(answered[1].sandbox, Some(json!({"type": "readOnly"})));
    assert_eq!(answered[1].latency_ms, 5);
    assert_eq!(answered[2].turn_id.as_deref(), Some("t1"));
    let kinds: Vec<Kind> = t.events.iter().map(Body::kind).collect();
    let closed = kinds.iter().position(|k| *k == Kind::StdinClosed).unwrap();
    let exited = kinds
        .iter()
        .position(|k| *k == Kind::AppServerExited)
        .unwrap();
    assert!(closed < exited);
    assert!(t.events.iter().any(
        |b| matches!(b, Body::AppServerExited(e) if e.after_stdin_closed && e.status == Some(0))
    ));
    assert_eq!(
        t.events.last(),
        Some(&Body::DriverEnded(DriverEnded::Exited { code: 0 }))
    );
    assert_eq!(t.times.len(), t.events.len());
    let Body::RunStarted(started) = &t.events[0] else {
        panic!()
    };
    assert_eq!(
        started.protocol.as_ref().and_then(|p| p.release.as_deref()),
        Some("0.169.0"),
        "the release is recorded so the stream can be graded alone"
    );
}

#[test]
fn a_burst_of_deltas_is_one_summary_line_not_one_event_each() {
    let mut lines = approval_then(&[(130, json!({"id":7,"result":{"permissions":{}}}))]);
    let delta = json!({"method":"item/agentMessage/delta",
        "params":{"threadId":"th1","turnId":"t1","itemId":"m1","delta":"x"}});
    let burst: Vec<String> = (0..100_000)
        .map(|_| at(200, "out", delta.clone()))
        .collect();
    lines.splice(10..10, burst);
    let t = translate_lines(&lines, Some("0.169.0"));
    assert!(t.events.len() < 40, "{} events", t.events.len());
    let summary = summary(&t);
    let deltas = summary
        .methods
        .iter()
        .find(|m| m.method == "item/agentMessage/delta")
        .unwrap();
    assert_eq!(deltas.count, 100_000);
    assert_eq!(deltas.known, Some(true));
    assert_eq!((deltas.checked, deltas.invalid), (64, 0), "{deltas:?}");
    assert!(summary.largest_line_bytes > 100, "{summary:?}");
}

#[test]
fn unknown_methods_invalid_notifications_and_extra_fields_are_counted() {
    let mut lines = approval_then(&[]);
    lines.insert(
        9,
        at(
            50,
            "out",
            json!({"method":"harness/unknownNotification","params":{}}),
        ),
    );
    lines.insert(
        9,
        at(
            51,
            "out",
            json!({"method":"thread/status/changed","params":{"threadId":"x","status":{"type":"brandNew"}}}),
        ),
    );
    lines.insert(
        9,
        at(
            52,
            "out",
            json!({"method":"thread/status/changed","params":{"threadId":"x","status":{"type":"idle"},"x-extra":1}}),
        ),
    );
    let t = translate_lines(&lines, Some("0.169.0"));
    let summary = summary(&t);
    let of = |m: &str| summary.methods.iter().find(|c| c.method == m).unwrap();
    assert_eq!(of("harness/unknownNotification").known, Some(false));
    let status = of("thread/status/changed");
    assert_eq!(
        (status.count, status.invalid, status.extra_fields),
        (2, 1, 1)
    );
}

#[test]
fn past_the_bound_requests_are_counted_not_written() {
    let mut lines = approval_then(&[]);
    let many: Vec<String> = (0..10_050)
        .map(|i| {
            at(
                20,
                "in",
                json!({"id": 1000 + i, "method": "thread/list", "params": {}}),
            )
        })
        .collect();
    lines.splice(9..9, many);
    let t = translate_lines(&lines, Some("0.169.0"));
    let written = t
        .events
        .iter()
        .filter(|b| matches!(b, Body::ClientRequest(_)))
        .count();
    assert_eq!(written, 10_000);
    assert!(t.events.iter().any(|b| *b
        == Body::NotRecorded(NotRecorded {
            what: "protocol.client-request".into(),
            count: 53,
        })));
}
