use super::*;

fn timing(rules: Vec<Rule>) -> TimingState {
    TimingState::new(Timing {
        rules,
        bound: Duration::from_secs(5),
    })
}

fn answer_after_events() -> TimingState {
    timing(vec![Rule::AnswerAfterEvents {
        method: "turn/start".into(),
    }])
}

fn line(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).unwrap();
    line.push(b'\n');
    line
}

fn server(state: &mut TimingState, message: Value, now: Instant) -> ServerLine {
    state.server_line(&line(&message), &message, now)
}

fn completed(turn: &str) -> Value {
    json!({"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": turn, "status": "completed"}}})
}

#[test]
fn a_withheld_method_is_not_delivered_and_says_so_others_go_on() {
    let mut state = timing(vec![Rule::Withhold {
        method: "thread/start".into(),
    }]);
    let init = json!({"id": 1, "method": "initialize", "params": {}});
    assert_eq!(state.driver_line(&init), DriverLine::Deliver);
    let start = json!({"id": 2, "method": "thread/start", "params": {}});
    let DriverLine::Withheld(record) = state.driver_line(&start) else {
        panic!("thread/start was delivered");
    };
    assert_eq!(record["rule"], "withhold");
    assert_eq!(record["method"], "thread/start");
    assert_eq!(record["id"], 2);
    assert!(record["did"].as_str().unwrap().contains("harness's tap"));
    // A notification of the same name is no request: nothing waits for its answer.
    let note = json!({"method": "thread/start"});
    assert_eq!(state.driver_line(&note), DriverLine::Deliver);
}

#[test]
fn the_turn_start_answer_waits_for_its_turns_completion() {
    let mut state = answer_after_events();
    let now = Instant::now();
    let start = json!({"id": 7, "method": "turn/start", "params": {"threadId": "t"}});
    assert_eq!(state.driver_line(&start), DriverLine::Deliver);
    let answer = json!({"id": 7, "result": {"turn": {"id": "turn-1", "status": "inProgress"}}});
    assert_eq!(server(&mut state, answer.clone(), now), ServerLine::Held);
    assert!(state.next_deadline().is_some());
    let started = json!({"method": "turn/started", "params": {"turn": {"id": "turn-1"}}});
    assert_eq!(server(&mut state, started, now), ServerLine::Pass(vec![]));
    // Another turn's completion releases nothing.
    assert_eq!(
        server(&mut state, completed("turn-0"), now),
        ServerLine::Pass(vec![])
    );
    let ServerLine::Pass(released) = server(
        &mut state,
        completed("turn-1"),
        now + Duration::from_millis(40),
    ) else {
        panic!("turn/completed was held");
    };
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].line, line(&answer));
    let record = &released[0].record;
    assert_eq!(record["rule"], "answer-after-events");
    assert_eq!(record["released"], "after-turn-completed");
    assert_eq!(record["turn"], "turn-1");
    assert_eq!(record["id"], 7);
    assert_eq!(record["held_ms"], 40);
    assert!(state.next_deadline().is_none());
}

#[test]
fn a_held_answer_goes_on_at_its_bound_or_at_the_streams_end() {
    let mut state = answer_after_events();
    let now = Instant::now();
    state.driver_line(&json!({"id": "a", "method": "turn/start"}));
    state.driver_line(&json!({"id": "b", "method": "turn/start"}));
    let a = json!({"id": "a", "result": {"turn": {"id": "ta"}}});
    let b = json!({"id": "b", "result": {"turn": {"id": "tb"}}});
    assert_eq!(server(&mut state, a.clone(), now), ServerLine::Held);
    let later = now + Duration::from_secs(3);
    assert_eq!(server(&mut state, b.clone(), later), ServerLine::Held);
    assert_eq!(state.next_deadline(), Some(now + Duration::from_secs(5)));
    assert!(state.due(now + Duration::from_secs(4)).is_empty());
    let due = state.due(now + Duration::from_secs(5));
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].line, line(&a));
    assert_eq!(due[0].record["released"], "bound");
    let rest = state.finish(later + Duration::from_secs(1));
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].line, line(&b));
    assert_eq!(rest[0].record["released"], "stream-ended");
}

#[test]
fn only_answers_that_start_a_turn_are_held() {
    let mut state = answer_after_events();
    let now = Instant::now();
    state.driver_line(&json!({"id": 1, "method": "turn/start"}));
    state.driver_line(&json!({"id": 2, "method": "thread/start"}));
    // An error starts no turn; an answer to another method is not the rule's.
    let error = json!({"id": 1, "error": {"code": -32600, "message": "no"}});
    assert_eq!(server(&mut state, error, now), ServerLine::Pass(vec![]));
    let thread = json!({"id": 2, "result": {"thread": {"id": "t"}}});
    assert_eq!(server(&mut state, thread, now), ServerLine::Pass(vec![]));
    // A server request with the same id as a driver's is not an answer.
    state.driver_line(&json!({"id": 3, "method": "turn/start"}));
    let request = json!({"id": 3, "method": "item/commandExecution/requestApproval", "params": {}});
    assert_eq!(server(&mut state, request, now), ServerLine::Pass(vec![]));
    assert!(state.finish(now).is_empty());
}
