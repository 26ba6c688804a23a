//! Why a red cell went red, in the words of the evidence the harness recorded itself: what the
//! driver said when it gave up (its stderr, which the harness captures), the protocol message it
//! rejected or never answered (the transcript the tap wrote), what Codex told the model instead
//! of doing what the case needed (the sealed model log), a signal, a bound that expired — the
//! first of these the folder holds. Never the driver's own events: a driver under test could
//! write anything there.
//!
//! The cause is found once a cell is judged and put in front of the reason (graders stay pure:
//! their reason is kept as it is, after it); `verdict.json` keeps it on its own too, for the
//! cell's page. Every quoted value is cut, its whole length stated, so a reason stays a few KB.

use crate::layout::CellEvidence;
use crate::outcome::{CellOutcome, CellResult};
use graders::events::{DriverEnded, Ending, RunEnded};
use graders::evidence_file::{self, MAX_STREAMED_BYTES};
use graders::verdict::VerdictKind;
use graders::wire::transcript::{self, Direction, Record};
use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::time::SystemTime;

/// How much of the driver's stderr a cause quotes (its end: where a driver says why it quit).
pub const STDERR_QUOTE_BYTES: usize = 300;
/// How much of a protocol message or a refusal a cause quotes.
pub const MESSAGE_QUOTE_BYTES: usize = 200;
/// The longest reason once the cause leads it.
pub const MAX_REASON_BYTES: usize = 4096;
/// How much of stderr.log is read to find its last lines.
const STDERR_READ_BYTES: u64 = 16 * 1024;
/// What the cause and the check's reason are joined with.
pub const SEPARATOR: &str = " — ";

/// What Codex answers a model's tool call with instead of running it (the model log's
/// `tool-output`), as the releases word it: `request_user_input is unavailable in Default mode`,
/// `unsupported call: request_permissions`.
const REFUSALS: &[&str] = &["unsupported call", " is unavailable in "];

/// Whether the cell is red: a verdict other than its expectation, a `fail` or `incomplete`, a
/// harness error.
pub fn is_red(result: &CellResult) -> bool {
    match &result.outcome {
        CellOutcome::Graded { verdict, agreement } => {
            !agreement.is_ok()
                || matches!(verdict.verdict, VerdictKind::Fail | VerdictKind::Incomplete)
        }
        CellOutcome::Error { .. } => true,
        CellOutcome::Ignored { .. } | CellOutcome::NotApplicable { .. } => false,
    }
}

/// `result` with the cause of a red cell leading its reason (the grader's reason, or the
/// harness's error), and the cause. Evidence written before `since` is another run's and is not
/// read (a cell whose folder could not be cleared).
pub fn explain(mut result: CellResult, since: Option<SystemTime>) -> (CellResult, Option<String>) {
    if !is_red(&result) {
        return (result, None);
    }
    let Some(cause) = find(&CellEvidence::new(&result.evidence_dir), since) else {
        return (result, None);
    };
    match &mut result.outcome {
        CellOutcome::Graded { verdict, .. } => verdict.reason = lead(&cause, &verdict.reason),
        CellOutcome::Error { message } => *message = lead(&cause, message),
        CellOutcome::Ignored { .. } | CellOutcome::NotApplicable { .. } => {}
    }
    (result, Some(cause))
}

/// `cause — reason`, one line, at most [`MAX_REASON_BYTES`].
pub fn lead(cause: &str, reason: &str) -> String {
    let joined = format!("{cause}{SEPARATOR}{reason}").replace(['\n', '\r'], " ");
    head(&joined, MAX_REASON_BYTES)
}

/// The first cause `evidence` holds, in the order of the module's doc.
pub fn find(evidence: &CellEvidence, since: Option<SystemTime>) -> Option<String> {
    let fresh = |path: &Path| match since {
        None => true,
        Some(since) => std::fs::symlink_metadata(path)
            .and_then(|m| m.modified())
            .is_ok_and(|modified| modified >= since),
    };
    let (driver, run) = if fresh(&evidence.events()) {
        endings(&evidence.events())
    } else {
        (None, None)
    };
    let records = if fresh(&evidence.transcript()) {
        read_transcript(&evidence.transcript())
    } else {
        Vec::new()
    };
    let wire = Wire::of(&records);
    let gave_up = driver
        .as_ref()
        .filter(|d| !matches!(d, DriverEnded::Exited { code: 0 }));
    if let Some(ended) = gave_up {
        let stderr = fresh(&evidence.stderr())
            .then(|| stderr_quote(&evidence.stderr()))
            .flatten();
        if let Some(quote) = stderr {
            return Some(format!(
                "{}{}, saying on stderr {quote}",
                driver_words(ended),
                wire.after_last()
            ));
        }
        if let Some(last) = &wire.last_from_server {
            return Some(format!(
                "{}, {} the app-server's last message, {}",
                driver_words(ended),
                wire.quiet()
                    .map_or("after".into(), |ms| format!("{} after", seconds(ms))),
                last
            ));
        }
    }
    if let Some(unanswered) = &wire.unanswered {
        return Some(unanswered.clone());
    }
    if fresh(&evidence.model_log()) {
        if let Some(refusal) = model_refusal(&evidence.model_log()) {
            return Some(refusal);
        }
    }
    match &driver {
        Some(DriverEnded::Signaled { signal }) => {
            return Some(format!("the driver was killed by signal {signal}"))
        }
        _ if wire.server_signal.is_some() => return wire.server_signal.clone(),
        Some(DriverEnded::KilledAtBound { reason }) => {
            return Some(format!(
                "the harness stopped the driver at its bound: {}",
                head(reason, MESSAGE_QUOTE_BYTES)
            ))
        }
        _ => {}
    }
    match run {
        Some(RunEnded {
            ending: Ending::TimedOut,
            reason,
            ..
        }) => Some(format!(
            "a wait expired: {}",
            head(
                reason.as_deref().unwrap_or("the run timed out"),
                MESSAGE_QUOTE_BYTES
            )
        )),
        _ => match driver {
            Some(DriverEnded::NotStarted { error }) => Some(format!(
                "the driver could not be started: {}",
                head(&error, MESSAGE_QUOTE_BYTES)
            )),
            _ => None,
        },
    }
}

fn driver_words(ended: &DriverEnded) -> String {
    match ended {
        DriverEnded::Exited { code } => format!("the driver exited with status {code}"),
        DriverEnded::Signaled { signal } => format!("the driver was killed by signal {signal}"),
        DriverEnded::KilledAtBound { reason } => format!(
            "the harness stopped the driver at its bound ({})",
            head(reason, MESSAGE_QUOTE_BYTES)
        ),
        DriverEnded::NotStarted { error } => format!(
            "the driver could not be started ({})",
            head(error, MESSAGE_QUOTE_BYTES)
        ),
    }
}

fn seconds(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// The last `driver.ended` and `run.ended` of `events.jsonl` (both are the harness's: the
/// process's status as it saw it, and the terminal it wrote).
fn endings(path: &Path) -> (Option<DriverEnded>, Option<RunEnded>) {
    let (mut driver, mut run) = (None, None);
    let Ok(Some(file)) = evidence_file::open(path, MAX_STREAMED_BYTES) else {
        return (driver, run);
    };
    for line in BufReader::new(file).lines() {
        let Ok(line) = line else { break };
        // Cheap before parsing: most lines are neither.
        if !line.contains("\"driver.ended\"") && !line.contains("\"run.ended\"") {
            continue;
        }
        let Ok(value) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let payload = value.get("payload").cloned().unwrap_or(Value::Null);
        match value.get("kind").and_then(Value::as_str) {
            Some("driver.ended") => driver = serde_json::from_value(payload).ok().or(driver),
            Some("run.ended") => run = serde_json::from_value(payload).ok().or(run),
            _ => {}
        }
    }
    (driver, run)
}

fn read_transcript(path: &Path) -> Vec<Record> {
    match evidence_file::open(path, MAX_STREAMED_BYTES) {
        Ok(Some(file)) => transcript::read(BufReader::new(file)).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// What the wire shows of the driver's last launch that talked.
#[derive(Debug, Default)]
struct Wire {
    /// The app-server's last message to the driver, in words with a quote.
    last_from_server: Option<String>,
    last_from_server_at: Option<u64>,
    /// When the driver let go of that launch (closed its stdin).
    let_go_at: Option<u64>,
    /// The first request of the app-server's the driver never answered, in words.
    unanswered: Option<String>,
    /// The app-server killed by a signal on its own (not by the harness), in words.
    server_signal: Option<String>,
}

impl Wire {
    fn of(records: &[Record]) -> Self {
        let mut wire = Wire::default();
        let last_launch = records
            .iter()
            .rev()
            .find(|r| matches!(r, Record::Message { .. }))
            .map(Record::launch);
        // The driver's requests by launch and id (to name what a response answers), and the
        // app-server's requests still waiting for the driver's answer.
        let mut driver_requests: HashMap<(u64, String), String> = HashMap::new();
        let mut waiting: Vec<(u64, String, String)> = Vec::new();
        for record in records {
            match record {
                Record::Message {
                    launch,
                    direction,
                    time,
                    message,
                } => {
                    let id = message.get("id").map(id_text);
                    let method = message.get("method").and_then(Value::as_str);
                    match (direction, method, id) {
                        (Direction::In, Some(method), Some(id)) => {
                            driver_requests.insert((*launch, id), method.to_string());
                        }
                        (Direction::In, None, Some(id)) => {
                            waiting.retain(|(l, waiting_id, _)| !(l == launch && *waiting_id == id))
                        }
                        (Direction::Out, Some(method), Some(id)) => {
                            waiting.push((*launch, id, method.to_string()))
                        }
                        _ => {}
                    }
                    if *direction == Direction::Out && Some(*launch) == last_launch {
                        wire.last_from_server = Some(describe_server_message(
                            message,
                            driver_requests.get(&(
                                *launch,
                                message.get("id").map(id_text).unwrap_or_default(),
                            )),
                        ));
                        wire.last_from_server_at = Some(*time);
                    }
                }
                Record::StdinClosed { launch, time } if Some(*launch) == last_launch => {
                    wire.let_go_at.get_or_insert(*time);
                }
                Record::Exit {
                    launch,
                    signal: Some(signal),
                    killed_by_harness: None,
                    ..
                } => {
                    wire.server_signal.get_or_insert(format!(
                        "the app-server of launch {launch} was killed by signal {signal}"
                    ));
                }
                _ => {}
            }
        }
        wire.unanswered = waiting.first().map(|(launch, id, method)| {
            format!("the driver never answered the app-server's `{method}` request (id {id}, launch {launch})")
        });
        wire
    }

    /// How long the driver went on after the app-server's last message.
    fn quiet(&self) -> Option<u64> {
        Some(self.let_go_at?.saturating_sub(self.last_from_server_at?))
    }

    /// `, 0.4 s after the app-server's last message (the response to `thread/start`)`, when the
    /// wire shows both.
    fn after_last(&self) -> String {
        match (self.quiet(), &self.last_from_server) {
            (Some(ms), Some(last)) => format!(
                ", {} after the app-server's last message ({})",
                seconds(ms),
                last.split(": `").next().unwrap_or(last)
            ),
            _ => String::new(),
        }
    }
}

fn id_text(id: &Value) -> String {
    id.as_str().map_or_else(|| id.to_string(), str::to_string)
}

/// `the response to `thread/start` (id 1): `{…}`` — a message of the app-server's in words,
/// with a quote of it cut to [`MESSAGE_QUOTE_BYTES`].
fn describe_server_message(message: &Value, answers: Option<&String>) -> String {
    let what = match (
        message.get("method").and_then(Value::as_str),
        message.get("id"),
    ) {
        (Some(method), Some(id)) => format!("the `{method}` request (id {})", id_text(id)),
        (Some(method), None) => format!("the `{method}` notification"),
        (None, id) => {
            let kind = if message.get("error").is_some() {
                "the error response"
            } else {
                "the response"
            };
            match (answers, id) {
                (Some(method), _) => format!("{kind} to `{method}`"),
                (None, Some(id)) => format!("{kind} to id {}", id_text(id)),
                (None, None) => "a message".to_string(),
            }
        }
    };
    format!(
        "{what}: `{}`",
        head(&message.to_string(), MESSAGE_QUOTE_BYTES)
    )
}

/// `(the end of its 5120 bytes of stderr.log): `…`` — the last lines of the driver's stderr,
/// joined by `⏎`, at most [`STDERR_QUOTE_BYTES`]; `None` when it said nothing.
fn stderr_quote(path: &Path) -> Option<String> {
    let dir = path.parent()?;
    let name = path.file_name()?.to_str()?;
    let (text, total) = crate::evidence_lines::tail(dir, name, STDERR_READ_BYTES).ok()??;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    const JOIN: &str = " ⏎ ";
    let mut kept: Vec<&str> = Vec::new();
    let mut used = 0;
    for line in lines.iter().rev() {
        if !kept.is_empty() && used + JOIN.len() + line.len() > STDERR_QUOTE_BYTES {
            break;
        }
        used += line.len() + if kept.is_empty() { 0 } else { JOIN.len() };
        kept.push(line);
    }
    if kept.is_empty() {
        return None;
    }
    kept.reverse();
    let joined = kept.join(JOIN);
    // One last line longer than the quote: its end.
    let mut start = joined.len().saturating_sub(STDERR_QUOTE_BYTES);
    while !joined.is_char_boundary(start) {
        start += 1;
    }
    let quote = if start > 0 {
        format!("…{}", &joined[start..])
    } else {
        joined
    };
    Some(format!(
        "(the end of its {total} bytes of stderr.log): `{quote}`"
    ))
}

/// The first refusal in the model log: Codex answered a tool call the model made with words
/// saying it would not run it.
fn model_refusal(path: &Path) -> Option<String> {
    let file = evidence_file::open(path, MAX_STREAMED_BYTES).ok()??;
    let mut calls: HashMap<String, String> = HashMap::new();
    for (number, line) in BufReader::new(file).lines().enumerate() {
        let Ok(line) = line else { break };
        let Ok(entry) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let text = |key: &str| entry.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "tool-call" => {
                calls.insert(text("call_id").to_string(), text("name").to_string());
            }
            "tool-output" if REFUSALS.iter().any(|r| text("output").contains(r)) => {
                let call = calls
                    .get(text("call_id"))
                    .map_or("a tool call of the model's".to_string(), |name| {
                        format!("the model's `{name}` call")
                    });
                return Some(format!(
                    "Codex did not run {call}, answering it `{}` (model-log.jsonl line {})",
                    head(text("output"), MESSAGE_QUOTE_BYTES),
                    number + 1
                ));
            }
            _ => {}
        }
    }
    None
}

/// `text` cut to its first `max` bytes (on a char boundary), the cut saying the whole length.
pub fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

#[cfg(test)]
mod tests;
