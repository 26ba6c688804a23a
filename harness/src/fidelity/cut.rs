//! A run the driver cut short itself: its task done, the driver closed the app-server's stdin
//! while requests it had sent were still unanswered. codex-acp does this on every run: when
//! the prompt's turn completes it starts a side thread to generate a session title
//! (`thread/start`, then `turn/start` with an `outputSchema`), and the ACP client, whose
//! prompt has returned, ends the agent at once. How far the side thread gets before that is a
//! race between the client's exit and the app-server's speed (measured: the real Codex 0.169
//! answers that `thread/start` in ~30 ms and never in time; the fake answers in ~1 ms and
//! plays the whole side turn). So a sequence that ends because of such a cut is compared as a
//! prefix: every message up to the cut must match the other side's, and what the other side
//! went on with is not compared — the cut side has no evidence of what its app-server would
//! have said. Nothing the driver acted on before the cut is left out.

use graders::events::{Body, DriverEnded, Event, Source};
use graders::wire::transcript::{Direction, Record};
use serde_json::Value;
use std::collections::BTreeMap;

/// Why a side's sequence was cut short by its driver, or `None`: the driver ended on its own —
/// its run ended `succeeded` (the harness's `run.ended`), or a wire driver exited by itself,
/// with any status (codex-acp's client exits 1 after a refused or cancelled prompt and still
/// starts its title thread first) — never killed at the harness's bound, and in the
/// app-server's last launch the driver closed stdin while requests it had sent stayed
/// unanswered to the end.
pub fn driver_cut(transcript: &[Record], events: &[Event]) -> Option<String> {
    let ended_on_its_own = events.iter().any(|e| match &e.body {
        Body::RunEnded(ended) => {
            e.source == Source::Harness && ended.ending == graders::events::Ending::Succeeded
        }
        Body::DriverEnded(DriverEnded::Exited { .. }) => true,
        _ => false,
    });
    if !ended_on_its_own {
        return None;
    }
    let last = transcript.iter().map(Record::launch).max()?;
    let mut unanswered: BTreeMap<String, String> = BTreeMap::new();
    let mut stdin_closed = false;
    for record in transcript.iter().filter(|r| r.launch() == last) {
        match record {
            Record::Message {
                direction, message, ..
            } => {
                let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
                    continue;
                };
                let method = message.get("method").and_then(Value::as_str);
                match (direction, method) {
                    (Direction::In, Some(method)) => {
                        unanswered.insert(id.to_string(), method.to_string());
                    }
                    (Direction::Out, None) => {
                        unanswered.remove(&id.to_string());
                    }
                    _ => {}
                }
            }
            Record::StdinClosed { .. } => stdin_closed = true,
            _ => {}
        }
    }
    if !stdin_closed || unanswered.is_empty() {
        return None;
    }
    let requests: Vec<String> = unanswered
        .iter()
        .map(|(id, method)| format!("`{method}` (id {id})"))
        .collect();
    Some(format!(
        "its driver closed the app-server's stdin with {} unanswered",
        requests.join(", ")
    ))
}

/// Read a cell's transcript; a transcript that cannot be read gives no cut (the comparison
/// then stays strict).
pub fn read_transcript(path: &std::path::Path) -> Vec<Record> {
    std::fs::File::open(path)
        .ok()
        .and_then(|file| graders::wire::transcript::read(std::io::BufReader::new(file)).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use graders::events::{Ending, RunEnded};

    fn message(direction: Direction, message: Value) -> Record {
        Record::Message {
            launch: 1,
            direction,
            time: 0,
            message,
        }
    }

    fn ended(ending: Ending) -> Vec<Event> {
        vec![Event::new(
            0,
            "r",
            Source::Harness,
            Body::RunEnded(RunEnded {
                ending,
                retry_offered: false,
                error_code: None,
                reason: None,
            }),
        )]
    }

    fn transcript(answered: bool, closed: bool) -> Vec<Record> {
        let mut records = vec![
            message(
                Direction::In,
                serde_json::json!({"id": 9, "method": "skills/list"}),
            ),
            message(
                Direction::In,
                serde_json::json!({"id": 10, "method": "thread/start"}),
            ),
            message(Direction::Out, serde_json::json!({"id": 9, "result": {}})),
            message(
                Direction::Out,
                serde_json::json!({"method": "thread/started", "params": {}}),
            ),
        ];
        if answered {
            records.push(message(
                Direction::Out,
                serde_json::json!({"id": 10, "result": {}}),
            ));
        }
        if closed {
            records.push(Record::StdinClosed { launch: 1, time: 1 });
        }
        records
    }

    #[test]
    fn a_succeeded_run_that_hung_up_on_a_request_is_cut() {
        let cut = driver_cut(&transcript(false, true), &ended(Ending::Succeeded)).unwrap();
        assert!(cut.contains("`thread/start` (id 10)"), "{cut}");
        assert!(!cut.contains("skills/list"), "{cut}");
    }

    #[test]
    fn no_cut_without_an_unanswered_request_a_closed_stdin_or_success() {
        assert_eq!(
            driver_cut(&transcript(true, true), &ended(Ending::Succeeded)),
            None
        );
        assert_eq!(
            driver_cut(&transcript(false, false), &ended(Ending::Succeeded)),
            None
        );
        assert_eq!(
            driver_cut(&transcript(false, true), &ended(Ending::TimedOut)),
            None
        );
        let killed = driver_ended(DriverEnded::KilledAtBound {
            reason: "idle".into(),
        });
        assert_eq!(driver_cut(&transcript(false, true), &killed), None);
    }

    fn driver_ended(how: DriverEnded) -> Vec<Event> {
        vec![Event::new(0, "r", Source::Driver, Body::DriverEnded(how))]
    }

    /// A wire driver that exits by itself, with a failure status, after hanging up on a request
    /// is cut too: it was not stopped by the harness, so what it left unanswered is its own doing.
    #[test]
    fn a_wire_driver_that_exits_by_itself_after_hanging_up_is_cut() {
        let exited = driver_ended(DriverEnded::Exited { code: 1 });
        assert!(driver_cut(&transcript(false, true), &exited).is_some());
    }
}
