use super::*;

#[test]
fn cell_names_round_trip() {
    let cell = CellId::new(
        "codex-planning-read-only",
        "runner-fake",
        "daytona",
        "plan-write-refused",
    );
    let name = cell.to_string();
    assert_eq!(
        name,
        "codex-planning-read-only.runner-fake.daytona.plan-write-refused"
    );
    assert_eq!(name.parse::<CellId>().unwrap(), cell);
    assert!("a.b.c".parse::<CellId>().is_err());
    assert!("a..c.d".parse::<CellId>().is_err());
}

#[test]
fn kind_names_match_serde() {
    let kinds = [
        Kind::RunStarted,
        Kind::SessionOpenRequested,
        Kind::SessionStarted,
        Kind::SessionRejected,
        Kind::SessionRelaunched,
        Kind::TurnSubmitted,
        Kind::TurnStarted,
        Kind::TurnCompleted,
        Kind::TurnError,
        Kind::ItemStarted,
        Kind::ItemCompleted,
        Kind::PlanUpdated,
        Kind::ApprovalRequested,
        Kind::ApprovalResolved,
        Kind::ReviewStarted,
        Kind::ReviewCompleted,
        Kind::ModelToolCall,
        Kind::ModelToolOutput,
        Kind::ResultProposed,
        Kind::WorkspaceEvidence,
        Kind::HomeEvidence,
        Kind::Diagnostic,
        Kind::ClientRequest,
        Kind::ClientNotification,
        Kind::ClientRequestAnswered,
        Kind::ServerRequest,
        Kind::ServerRequestAnswered,
        Kind::ServerNotifications,
        Kind::StdinClosed,
        Kind::AppServerLaunched,
        Kind::AppServerExited,
        Kind::NotRecorded,
        Kind::DriverEnded,
        Kind::RunEnded,
    ];
    for kind in kinds {
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
    }
}

#[test]
fn events_serialize_with_kind_and_payload() {
    let ev = Event::at(
        1_700_000_000_123,
        3,
        "run-1",
        Source::Harness,
        Body::Diagnostic(Diagnostic {
            level: Level::Warn,
            message: "hi".into(),
        }),
    );
    let line = serde_json::to_string(&ev).unwrap();
    assert_eq!(
        line,
        r#"{"v":3,"seq":3,"ts_ms":1700000000123,"run":"run-1","source":"harness","kind":"diagnostic","payload":{"level":"warn","message":"hi"}}"#
    );
    let back: Event = serde_json::from_str(&line).unwrap();
    assert_eq!(back, ev);
}

#[test]
fn a_relaunch_serializes_as_its_own_kind() {
    let ev = Event::at(
        5,
        7,
        "run-1",
        Source::Driver,
        Body::SessionRelaunched(SessionRelaunched {
            identity: "abc".into(),
            policy: PolicyGeneration::Current,
            argv: vec!["-c".into(), "a=1".into()],
            thread_permissions: Some("p".into()),
            resume_thread: None,
        }),
    );
    assert_eq!(ev.body.kind(), Kind::SessionRelaunched);
    let line = serde_json::to_string(&ev).unwrap();
    assert_eq!(
        line,
        r#"{"v":3,"seq":7,"ts_ms":5,"run":"run-1","source":"driver","kind":"session.relaunched","payload":{"identity":"abc","policy":"current","argv":["-c","a=1"],"thread_permissions":"p","resume_thread":null}}"#
    );
    let back: Event = serde_json::from_str(&line).unwrap();
    assert_eq!(back, ev);
}
