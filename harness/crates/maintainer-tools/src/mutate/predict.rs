//! Which operator would rewrite anything in a cell, read from the cell's unmutated run (the
//! reference): its transcript replayed through the operator ([`WireMutation`]), line by line in
//! the order the recorder wrote them, and its driver's end (`exit-zero`).
//!
//! Why skipping is sound: a mutant's run is the reference run until the operator's first
//! rewrite (the recorder relays every line untouched until then). So when the reference holds
//! no line the operator would rewrite, the mutant's run would be the reference again — the
//! operator is not applicable there, and running it would only measure how steady the cell is.
//! The recorder writes each line before it relays it, in either direction, so the transcript's
//! order is the order in which a mutated relay would have seen the lines (a server request
//! before the driver's answer to it).
//!
//! Where the transcript cannot tell — it is missing lines (a cut, a line the recorder did not
//! keep from the driver, a remark about the driver's side), or it cannot be read — the
//! prediction is [`Prediction::Unknown`] and the mutant runs.

use anyhow::Context;
use graders::events::DriverEnded;
use graders::wire::transcript::{self, Direction, Record};
use report::layout::CellEvidence;
use std::collections::HashMap;
use std::path::Path;
use tap::mutation::{Operator, Received, Sent, WireMutation};

/// What the reference run says of one operator in one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Prediction {
    /// It would rewrite this many lines (or force the exit status): the mutant must run.
    Applies(usize),
    /// Nothing in the reference is what it rewrites: the mutant's run would be the reference.
    Untouched,
    /// The reference cannot tell (why): the mutant runs.
    Unknown(String),
}

impl Prediction {
    /// Whether the mutant must run to be judged.
    pub fn must_run(&self) -> bool {
        !matches!(self, Prediction::Untouched)
    }
}

/// Each of `operators` in `cell`, from the reference run's evidence below `reference_root`
/// (its transcript read once for all of them).
pub fn predict(reference_root: &Path, cell: &str, operators: &[Operator]) -> Vec<Prediction> {
    let evidence = CellEvidence::of(reference_root, cell);
    let mut transcript = None;
    let mut ended = None;
    operators
        .iter()
        .map(|operator| {
            let found = if operator.on_the_wire() {
                let records =
                    transcript.get_or_insert_with(|| read_transcript(&evidence.transcript()));
                match records {
                    Ok(records) => Ok(replay(records, *operator)),
                    Err(e) => Err(anyhow::anyhow!("{e:#}")),
                }
            } else {
                match ended.get_or_insert_with(|| exit_applications(&evidence.events())) {
                    Ok(found) => Ok(*found),
                    Err(e) => Err(anyhow::anyhow!("{e:#}")),
                }
            };
            match found {
                Ok(Some(0)) => Prediction::Untouched,
                Ok(Some(n)) => Prediction::Applies(n),
                Ok(None) => Prediction::Unknown("the reference does not show every line".into()),
                Err(e) => Prediction::Unknown(format!("{e:#}")),
            }
        })
        .collect()
}

/// The transcript at `path`; none when there is none (the driver never started its
/// app-server: nothing to rewrite).
fn read_transcript(path: &Path) -> anyhow::Result<Vec<Record>> {
    let Some(file) =
        graders::evidence_file::open(path, graders::evidence_file::MAX_STREAMED_BYTES)?
    else {
        return Ok(Vec::new());
    };
    transcript::read(std::io::BufReader::new(file))
        .with_context(|| format!("reading {}", path.display()))
}

/// How many lines `operator` would rewrite in a launch's `records`; `None` when they are
/// missing lines it would have to see.
pub(crate) fn replay(records: &[Record], operator: Operator) -> Option<usize> {
    // One operator state per launch, as the recorder keeps one per launch.
    let mut launches: HashMap<u64, WireMutation> = HashMap::new();
    let mut applied = 0;
    for record in records {
        match record {
            Record::Message {
                launch,
                direction,
                message,
                ..
            } => {
                let state = launches
                    .entry(*launch)
                    .or_insert_with(|| WireMutation::new(operator));
                let rewrites = match direction {
                    Direction::In => state.driver_sent(message) != Sent::Unchanged,
                    // Counted whether or not the driver had closed the app-server's stdin
                    // already (the recorder then leaves it): a needless run, never a missed one.
                    Direction::Out => state.server_sent(message) == Received::ForwardThenCut,
                };
                applied += usize::from(rewrites);
            }
            // An oversized line of the app-server's is relayed unparsed by a mutated relay too,
            // so no operator sees it; anything else said of the stream may hide a line.
            Record::Note {
                direction: Direction::Out,
                bytes: Some(_),
                ..
            } => {}
            Record::Note { .. } => return None,
            // Not JSON: a mutated relay passes it on unparsed.
            Record::Raw { .. } => {}
            _ => {}
        }
    }
    Some(applied)
}

/// `exit-zero`: 1 when the reference's driver exited with a status other than 0, else 0;
/// `None` when its events do not say how it ended.
fn exit_applications(path: &Path) -> anyhow::Result<Option<usize>> {
    let bytes = graders::evidence_file::read(path, graders::evidence_file::MAX_STREAMED_BYTES)?
        .with_context(|| format!("reading {}: there is none", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    // Only the lines that can be it are parsed: a streamed turn's log is long.
    for line in text.lines().filter(|l| l.contains("driver.ended")) {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if event["kind"] != "driver.ended" {
            continue;
        }
        let ended: DriverEnded = serde_json::from_value(event["payload"].clone())
            .with_context(|| format!("{}: driver.ended", path.display()))?;
        return Ok(Some(usize::from(matches!(
            ended,
            DriverEnded::Exited { code } if code != 0
        ))));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn message(direction: Direction, message: Value) -> Record {
        Record::Message {
            launch: 1,
            direction,
            time: 0,
            message,
        }
    }

    /// A launch in which the app-server asks for an approval and the driver declines it.
    fn declined_approval() -> Vec<Record> {
        vec![
            message(
                Direction::In,
                json!({"id": 0, "method": "initialize", "params": {}}),
            ),
            message(Direction::Out, json!({"id": 0, "result": {}})),
            message(Direction::In, json!({"method": "initialized"})),
            message(
                Direction::In,
                json!({"id": 1, "method": "turn/start", "params": {"threadId": "t"}}),
            ),
            message(Direction::Out, json!({"id": 1, "result": {"turn": {}}})),
            message(
                Direction::Out,
                json!({"id": 9, "method": "item/commandExecution/requestApproval", "params": {}}),
            ),
            message(
                Direction::In,
                json!({"id": 9, "result": {"decision": "decline"}}),
            ),
        ]
    }

    #[test]
    fn an_operator_applies_where_the_reference_holds_what_it_rewrites() {
        let records = declined_approval();
        assert_eq!(replay(&records, Operator::ApproveEverything), Some(1));
        assert_eq!(replay(&records, Operator::DropAnswers), Some(1));
        assert_eq!(replay(&records, Operator::DropInitialized), Some(1));
        assert_eq!(replay(&records, Operator::CloseAfterTurnStart), Some(1));
        assert_eq!(replay(&records, Operator::DuplicateRequests), Some(2));
        assert_eq!(replay(&records, Operator::ApprovalNever), Some(1));
        assert_eq!(
            replay(&records, Operator::WidenSandbox),
            Some(0),
            "a turn/start naming no sandbox policy is left as it is"
        );
    }

    #[test]
    fn an_answer_that_already_approves_everything_is_no_mutant() {
        let mut records = declined_approval();
        records[6] = message(
            Direction::In,
            json!({"id": 9, "result": {"decision": "acceptForSession"}}),
        );
        assert_eq!(replay(&records, Operator::ApproveEverything), Some(0));
        assert_eq!(replay(&records, Operator::MalformedAnswers), Some(1));
    }

    #[test]
    fn a_transcript_missing_lines_cannot_tell() {
        let mut records = declined_approval();
        records.insert(
            1,
            Record::Note {
                launch: 1,
                direction: Direction::In,
                time: 0,
                note: "oversized line".into(),
                bytes: Some(2_000_000),
                delivered: None,
            },
        );
        assert_eq!(replay(&records, Operator::WidenSandbox), None);
        let mut records = declined_approval();
        records.push(Record::Note {
            launch: 1,
            direction: Direction::Out,
            time: 0,
            note: "an oversized line of the app-server's".into(),
            bytes: Some(2_000_000),
            delivered: None,
        });
        assert_eq!(
            replay(&records, Operator::WidenSandbox),
            Some(0),
            "no operator reads the app-server's oversized lines"
        );
    }

    #[test]
    fn exit_zero_applies_where_the_driver_exited_non_zero() {
        let dir = tempfile::tempdir().unwrap();
        let events = dir.path().join("events.jsonl");
        let ended = |payload: Value| {
            json!({"v": 3, "seq": 1, "ts_ms": 0, "run": "r", "source": "driver", "kind": "driver.ended", "payload": payload})
                .to_string()
        };
        std::fs::write(&events, ended(json!({"how": "exited", "code": 1}))).unwrap();
        assert_eq!(exit_applications(&events).unwrap(), Some(1));
        std::fs::write(&events, ended(json!({"how": "exited", "code": 0}))).unwrap();
        assert_eq!(exit_applications(&events).unwrap(), Some(0));
        std::fs::write(&events, "{}\n").unwrap();
        assert_eq!(exit_applications(&events).unwrap(), None);
    }
}
