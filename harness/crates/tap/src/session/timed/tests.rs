use crate::session::{test_launch, Options};
use crate::timing::{Rule, Timing};
use serde_json::Value;
use std::time::Duration;

fn timed(rules: Vec<Rule>, bound: Duration, server: &str, sent: &str) -> (String, Vec<Value>) {
    let options = Options {
        mutation: None,
        timing: Some(Timing { rules, bound }),
    };
    let (echoed, records, _, _) = test_launch::through(server, options, sent.as_bytes(), true);
    (String::from_utf8(echoed).unwrap(), records)
}

/// The records of the messages and timings, in the transcript's order: `in:METHOD`,
/// `out:METHOD`, `out:answer ID`, `timing:RULE`.
fn order(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| {
            if r["kind"] == "timing" {
                return Some(format!("timing:{}", r["rule"].as_str()?));
            }
            let message = r.get("message")?;
            let what = match message["method"].as_str() {
                Some(method) => method.to_string(),
                None => format!("answer {}", message["id"]),
            };
            Some(format!("{}:{what}", r["direction"].as_str()?))
        })
        .collect()
}

const TURN_START: &str = "{\"id\":1,\"method\":\"turn/start\",\"params\":{\"threadId\":\"t\"}}\n";

/// Answers turn/start at once, then plays the turn: the real Codex's usual order.
const ANSWER_FIRST: &str = r#"read line
printf '%s\n' '{"id":1,"result":{"turn":{"id":"u1","status":"inProgress"}}}'
sleep 0.05
printf '%s\n' '{"method":"turn/started","params":{"threadId":"t","turn":{"id":"u1"}}}'
printf '%s\n' '{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u1","status":"completed"}}}'
"#;

#[test]
fn a_withheld_request_never_reaches_the_app_server_and_the_transcript_says_so() {
    let sent = "{\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"id\":1,\"method\":\"thread/start\",\"params\":{}}\n{\"id\":2,\"method\":\"model/list\"}\n";
    let rules = vec![Rule::Withhold {
        method: "thread/start".into(),
    }];
    let (echoed, records) = timed(rules, Duration::from_secs(5), "exec cat", sent);
    assert_eq!(
        echoed,
        "{\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"id\":2,\"method\":\"model/list\"}\n",
        "what the app-server (cat) received"
    );
    let order = order(&records);
    let at = order.iter().position(|r| r == "in:thread/start").unwrap();
    assert_eq!(order[at + 1], "timing:withhold", "{order:?}");
    let timing = records.iter().find(|r| r["kind"] == "timing").unwrap();
    assert_eq!(timing["method"], "thread/start");
    assert_eq!(timing["id"], 1);
    assert!(
        !order.contains(&"out:thread/start".to_string()),
        "{order:?}"
    );
}

#[test]
fn the_turn_start_answer_reaches_the_driver_after_the_turns_completion() {
    let rules = vec![Rule::AnswerAfterEvents {
        method: "turn/start".into(),
    }];
    let (echoed, records) = timed(rules, Duration::from_secs(5), ANSWER_FIRST, TURN_START);
    let methods: Vec<String> = echoed
        .lines()
        .map(|l| {
            let m: Value = serde_json::from_str(l).unwrap();
            m["method"].as_str().unwrap_or("answer").to_string()
        })
        .collect();
    assert_eq!(methods, ["turn/started", "turn/completed", "answer"]);
    assert_eq!(
        order(&records),
        [
            "in:turn/start",
            "out:turn/started",
            "out:turn/completed",
            "timing:answer-after-events",
            "out:answer 1"
        ],
        "recorded as delivered"
    );
    let timing = records.iter().find(|r| r["kind"] == "timing").unwrap();
    assert_eq!(timing["released"], "after-turn-completed");
    assert_eq!(timing["turn"], "u1");
}

#[test]
fn a_held_answer_goes_on_at_the_bound_when_its_turn_never_completes() {
    let server = r#"read line
printf '%s\n' '{"id":1,"result":{"turn":{"id":"u1","status":"inProgress"}}}'
sleep 2
printf '%s\n' '{"method":"thread/status/changed","params":{}}'
"#;
    let rules = vec![Rule::AnswerAfterEvents {
        method: "turn/start".into(),
    }];
    let (_, records) = timed(rules, Duration::from_millis(200), server, TURN_START);
    assert_eq!(
        order(&records),
        [
            "in:turn/start",
            "timing:answer-after-events",
            "out:answer 1",
            "out:thread/status/changed"
        ]
    );
    let timing = records.iter().find(|r| r["kind"] == "timing").unwrap();
    assert_eq!(timing["released"], "bound");
    let held = timing["held_ms"].as_u64().unwrap();
    assert!((200..1500).contains(&held), "held {held} ms");
}

#[test]
fn without_a_timing_the_app_servers_order_is_kept() {
    let (echoed, records, _, _) = test_launch::through(
        ANSWER_FIRST,
        Options::default(),
        TURN_START.as_bytes(),
        true,
    );
    assert!(String::from_utf8(echoed).unwrap().starts_with("{\"id\":1,"));
    assert_eq!(order(&records)[1], "out:answer 1");
}

#[test]
fn a_request_withheld_again_and_again_is_recorded_up_to_the_bound() {
    use graders::wire::transcript::MAX_TIMING_RECORDS;
    let sent: String = (0..MAX_TIMING_RECORDS + 20)
        .map(|id| format!("{{\"id\":{id},\"method\":\"thread/start\"}}\n"))
        .collect();
    let rules = vec![Rule::Withhold {
        method: "thread/start".into(),
    }];
    let (echoed, records) = timed(rules, Duration::from_secs(5), "exec cat", &sent);
    assert_eq!(echoed, "");
    let timings = records.iter().filter(|r| r["kind"] == "timing").count();
    assert_eq!(timings, MAX_TIMING_RECORDS);
    let notes: Vec<&Value> = records
        .iter()
        .filter(|r| {
            r["note"]
                .as_str()
                .is_some_and(|n| n.contains("transport timing"))
        })
        .collect();
    assert_eq!(notes.len(), 1, "{notes:?}");
}

/// A mutated cell keeps its timing: `close-after-turn-start` cuts at the turn/start answer as
/// the driver gets it, after the turn's completion the tap let through first.
#[test]
fn a_mutated_cell_keeps_its_timing_and_its_operator_sees_the_delivered_order() {
    let options = Options {
        mutation: Some(crate::mutation::Operator::CloseAfterTurnStart),
        timing: Some(Timing {
            rules: vec![Rule::AnswerAfterEvents {
                method: "turn/start".into(),
            }],
            bound: Duration::from_secs(5),
        }),
    };
    let server = format!("{ANSWER_FIRST}sleep 5\n");
    let (echoed, records, applied, _) =
        test_launch::through(&server, options, TURN_START.as_bytes(), false);
    assert_eq!(applied, 1, "the operator applied once");
    let echoed = String::from_utf8(echoed).unwrap();
    assert!(
        echoed.trim_end().ends_with("\"status\":\"inProgress\"}}}"),
        "the answer comes last: {echoed}"
    );
    let order = order(&records);
    let timing = order
        .iter()
        .position(|r| r == "timing:answer-after-events")
        .unwrap();
    assert_eq!(order[timing - 1], "out:turn/completed", "{order:?}");
    assert_eq!(order[timing + 1], "out:answer 1", "{order:?}");
    assert!(records.iter().any(|r| r["kind"] == "mutation"));
}
