//! A run the driver cut short itself: its task done, the driver closed the app-server's stdin
//! while requests it had sent were still unanswered. codex-acp does this on every run: when
//! the prompt's turn completes it starts a side thread to generate a session title
//! (`thread/start`, then `turn/start` with an `outputSchema`), and the ACP client, whose
//! prompt has returned, ends the agent at once. How far the side thread gets before that is a
//! race between the client's exit and the app-server's speed (measured: the real Codex 0.169
//! answers that `thread/start` in ~30 ms and never in time; the fake answers in ~1 ms and
//! plays the whole side turn, or part of it). So a sequence that ends because of such a cut is
//! compared as a prefix ([`up_to_the_cut`]), and where the two sides' closes still fall at
//! different places, up to the earlier close ([`up_to_the_earlier_close`]): every message up
//! to there must match, and what either side went on with is not compared — a side cut there
//! has no evidence of what its app-server would have said. Nothing the driver acted on before
//! the earlier close is left out, and the app-servers' and drivers' exits are compared.

use super::{first_divergence, Divergence, SideOutcome, Truncation};
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
pub(crate) fn driver_cut(transcript: &[Record], events: &[Event]) -> Option<String> {
    if !ended_on_its_own(events) {
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

/// The driver ended on its own: its run ended `succeeded` (the harness's `run.ended`), or a
/// wire driver exited by itself, with any status — never killed at the harness's bound.
pub(crate) fn ended_on_its_own(events: &[Event]) -> bool {
    events.iter().any(|e| match &e.body {
        Body::RunEnded(ended) => {
            e.source == Source::Harness && ended.ending == graders::events::Ending::Succeeded
        }
        Body::DriverEnded(DriverEnded::Exited { .. }) => true,
        _ => false,
    })
}

/// Read a cell's transcript; a transcript that cannot be read gives no cut (the comparison
/// then stays strict).
pub(crate) fn read_transcript(path: &std::path::Path) -> Vec<Record> {
    graders::evidence_file::open(path, graders::evidence_file::MAX_STREAMED_BYTES)
        .ok()
        .flatten()
        .and_then(|file| graders::wire::transcript::read(std::io::BufReader::new(file)).ok())
        .unwrap_or_default()
}

/// Where comparing strictly (a cut side up to its cut) differs and both drivers ended on their
/// own ([`ended_on_its_own`]): both sides compared up to the EARLIER of the two closings of
/// stdin (by position in the compared sequences), then how each app-server and each driver
/// exited (`protocol.app-server-exited`, `driver.ended`). codex-acp's client ends the agent
/// while its title side thread is starting, on both sides, so where each side's close falls
/// among its app-server's answers is the driver's timing: measured (0.169, `local` and
/// `daytona`), the real Codex answered the side thread's `thread/start` and the close came
/// before the driver sent its `turn/start`, while the fake had answered that `turn/start`
/// too — neither side left a request unanswered, so neither is cut, and the strict comparison
/// failed on the real side's close against the fake's `turn.submitted` (4 of 33 pairs in one
/// run).
///
/// Sound because the sequences must agree up to the earlier close: the driver saw the same
/// messages on both sides until then, so it had the same reasons to close on both; what the
/// later side's driver saw in between arrived while it was closing. A driver that closed on a
/// timer of its own (an app-server gone quiet) is not told apart here: the verdicts and the
/// exits, still compared, are what show it. A side whose app-server exited on its own before
/// its stdin was closed (a crash is behaviour), or that has no close, keeps the strict result.
pub(super) fn up_to_the_earlier_close(
    fake: &SideOutcome,
    fake_all: &[Value],
    real: &SideOutcome,
    real_all: &[Value],
) -> Option<(Option<Divergence>, Option<Truncation>)> {
    if !fake.ended_on_its_own || !real.ended_on_its_own {
        return None;
    }
    if exited_before_the_close(&fake.sequence) || exited_before_the_close(&real.sequence) {
        return None;
    }
    // Only a close of the last launch, the same launch on both sides: a short probe launch
    // (`codex --version` before the app-server) closes too, and stopping there would leave
    // every later launch uncompared.
    let last = last_launch(fake_all);
    if last != last_launch(real_all) {
        return None;
    }
    let (fake_at, real_at) = (
        last_launch_close(fake_all, last?)?,
        last_launch_close(real_all, last?)?,
    );
    let at = fake_at.min(real_at);
    let compared = |sequence: &[Value]| -> Vec<Value> {
        let exits = sequence[at..].iter().filter(|event| {
            event["kind"] == "protocol.app-server-exited" || event["kind"] == "driver.ended"
        });
        sequence[..at].iter().chain(exits).cloned().collect()
    };
    if let Some(divergence) = first_divergence(&compared(fake_all), &compared(real_all)) {
        return Some((Some(divergence), None));
    }
    // The side that closed first; on a tie, the side its driver cut.
    let fake_first = fake_at < real_at || (fake_at == real_at && fake.cut.is_some());
    let (side, early, late, late_all) = if fake_first {
        ("fake", fake, real, real_all)
    } else {
        ("real", real, fake, fake_all)
    };
    let reason = match (&early.cut, &late.cut) {
        (Some(reason), _) => reason.clone(),
        (None, Some(reason)) => format!(
            "its driver, its task done, closed the app-server's stdin first (on the other side, later, {reason})"
        ),
        (None, None) => {
            "its driver, its task done, closed the app-server's stdin first".to_string()
        }
    };
    Some((
        None,
        Some(Truncation {
            index: at,
            side,
            reason,
            other_len: late_all.len(),
        }),
    ))
}

/// Whether the app-server's last exit came before the driver closed its stdin: the app-server
/// ended on its own, which is compared whole.
fn exited_before_the_close(sequence: &[Value]) -> bool {
    sequence
        .iter()
        .rev()
        .find(|event| event["kind"] == "protocol.app-server-exited")
        .is_some_and(|event| event["payload"]["after_stdin_closed"] == Value::Bool(false))
}

/// A side its driver cut short ([`driver_cut`]) as compared strictly: up to the driver's
/// closing of the app-server's stdin in its last launch. From there on the side shows how its app-server
/// ended under the cut (the recorder's `stdin-closed` and `app-server-exited`), where the other
/// side's app-server, answering sooner, may still have answered what the driver asked last: a
/// race of the driver's, not a behaviour of either app-server.
pub(super) fn up_to_the_cut(mut sequence: Vec<Value>, side: &SideOutcome) -> Vec<Value> {
    if side.cut.is_some() {
        if let Some(cut) =
            last_launch(&sequence).and_then(|last| last_launch_close(&sequence, last))
        {
            sequence.truncate(cut);
        }
    }
    sequence
}

/// The highest launch number a sequence's events name (`payload.launch`): the app-server the
/// driver talked to last.
pub(super) fn last_launch(sequence: &[Value]) -> Option<u64> {
    sequence
        .iter()
        .filter_map(|event| event["payload"]["launch"].as_u64())
        .max()
}

/// Where the driver closed the stdin of launch `launch`, by position in `sequence`.
fn last_launch_close(sequence: &[Value], launch: u64) -> Option<usize> {
    sequence.iter().rposition(|event| {
        event["kind"] == "protocol.stdin-closed"
            && event["payload"]["launch"].as_u64() == Some(launch)
    })
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
