//! Graders: one module per suite case family, a dispatch by `(suite, case)`, and a fold that
//! feeds a grader either events in memory or a stream read line by line.
//!
//! Every grader sees only the kinds it asks for ([`Grader::wants`]); the fold validates the
//! stream first, so an invalid or unterminated stream is `incomplete` for every suite.

mod ask_question;
mod attempts;
mod dispatch;
mod escalated_write;
mod escalation;
mod launch_config;
mod launch_identity;
mod launch_policy;
mod legacy_sandbox;
mod message_marker;
mod plan_revise_accept;
mod plan_write_refused;
mod protocol;
pub mod runner_contract;
mod session;
mod startup_rejection;
mod transport_faults;
mod turns;
mod workspace;

use crate::events::{Body, Ending, Event, Kind, RunEnded, Source};
use crate::reader::{EventReader, ReadError, ReaderConfig, StreamError, StreamValidator};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};
use dispatch::grader_for;
use std::io::BufRead;

pub use escalation::REFUSING_DECISIONS;

#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    #[error("unknown suite `{0}` (known: {known})", known = known_suites().join(", "))]
    UnknownSuite(String),
    #[error("suite `{suite}` has no case `{case}` (known: {known})")]
    UnknownCase {
        suite: String,
        case: String,
        known: String,
    },
    /// The input could not be read (as opposed to read and found invalid, which is a verdict).
    #[error("reading the event stream: {0}")]
    Io(#[from] std::io::Error),
}

/// Every `(suite, case)` this crate can grade (the rows of its graders' table).
pub const CASES: &[(&str, &str)] = &dispatch::CASE_NAMES;

/// The method no Codex release has, sent by `protocol-server-requests/unknown-request`.
pub const UNKNOWN_SERVER_REQUEST: &str = "harness/unknownRequest";

fn known_suites() -> Vec<&'static str> {
    let mut suites: Vec<&str> = CASES.iter().map(|(s, _)| *s).collect();
    suites.dedup();
    suites
}

/// The terminal event, which the fold always decodes and hands to [`Grader::finish`].
#[derive(Debug, Clone)]
pub(crate) struct Terminal {
    pub seq: u64,
    /// Who wrote it: only the harness may (a driver's own `run.ended` is replaced).
    pub source: Source,
    pub ended: RunEnded,
}

impl Terminal {
    pub(crate) fn evidence(&self) -> EvidenceRef {
        EvidenceRef::at(self.seq, &describe_terminal(&self.ended))
    }

    pub(crate) fn ending_name(&self) -> &'static str {
        ending_name(self.ended.ending)
    }

    /// How the run ended, with the cause the run gave (`failed-permanently: the external
    /// driver exited (exit status: 3) without writing run.ended`), so that the verdict's
    /// reason, and the progress line that shows it, name the cause and not only the ending.
    pub(crate) fn ending_with_cause(&self) -> String {
        match self.ended.reason.as_deref().map(str::trim) {
            Some(reason) if !reason.is_empty() => format!("{}: {reason}", self.ending_name()),
            _ => self.ending_name().to_string(),
        }
    }

    /// The `run-succeeded` check: a failing verdict citing `evidence` unless the run ended
    /// succeeded.
    pub(crate) fn fail_unless_succeeded(
        &self,
        evidence: impl FnOnce() -> Vec<EvidenceRef>,
    ) -> Option<Verdict> {
        (self.ended.ending != Ending::Succeeded).then(|| {
            fail(
                "run-succeeded",
                format!("the run ended {}", self.ending_with_cause()),
                evidence(),
            )
        })
    }
}

/// The legal line a case sends mid-turn, in bytes, when it sends one: what a driver's declared
/// `max_line_bytes` is held against (a line above it may end the run, classified).
pub fn legal_line_bytes(suite: &str, case: &str) -> Option<u64> {
    match (suite, case) {
        ("protocol-size", "line-64k") => Some(64 << 10),
        ("protocol-size", "line-1m") => Some(1 << 20),
        ("protocol-size", "line-2m") => Some(2 << 20),
        _ => None,
    }
}

/// A choice of the task that a case binds to the driver's requests (`protocol-task-binding`):
/// the case applies only to a driver told that choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskChoice {
    /// The workspace (`{workspace}`, `HARNESS_WORKSPACE`).
    Workspace,
    /// The mode (`{mode}`, or the task envelope's `mode`).
    Mode,
    /// The approvals (the task envelope's `approvals`, as the driver declares it can take them).
    Approvals,
    /// The model (`{model}`, or the task envelope's `model` under the events contract).
    Model,
}

/// The task choice `suite/case` checks, if it checks one.
pub fn task_choice(suite: &str, case: &str) -> Option<TaskChoice> {
    match (suite, case) {
        ("protocol-task-binding", "workspace-cwd") => Some(TaskChoice::Workspace),
        ("protocol-task-binding", "mode-planning" | "mode-standard" | "mode-ask") => {
            Some(TaskChoice::Mode)
        }
        (
            "protocol-task-binding",
            "approvals-never" | "approvals-auto-review" | "approvals-user",
        ) => Some(TaskChoice::Approvals),
        ("protocol-task-binding", "model") => Some(TaskChoice::Model),
        _ => None,
    }
}

pub(crate) fn ending_name(ending: Ending) -> &'static str {
    match ending {
        Ending::Succeeded => "succeeded",
        Ending::FailedPermanently => "failed-permanently",
        Ending::RetriesExhausted => "retries-exhausted",
        Ending::TransportLost => "transport-lost",
        Ending::TimedOut => "timed-out",
    }
}

fn describe_terminal(ended: &RunEnded) -> String {
    format!(
        "run.ended {} retry_offered={} error_code={} reason={}",
        ending_name(ended.ending),
        ended.retry_offered,
        ended.error_code.as_deref().unwrap_or("-"),
        ended.reason.as_deref().unwrap_or("-"),
    )
}

/// Whether `source` is the documented writer of `body`'s kind ([`Kind::documented_sources`]).
/// A grader reads its own evidence only when it is: a `model` or `harness` line saying what the
/// driver saw is not evidence of it. (The shared watchers — session, attempts, workspace —
/// judge sources themselves, some to note a misattribution rather than drop it.)
pub(crate) fn documented(source: Source, body: &Body) -> bool {
    body.kind().accepts_source(source)
}

/// One grader: folds the events it wants, then decides.
pub(crate) trait Grader {
    /// Kinds whose decoded payload this grader reads (`run.ended` reaches `finish` anyway).
    fn wants(&self, kind: Kind) -> bool;
    /// `source` is the event's writer; evidence a grader trusts only from its documented
    /// source ([`Kind::documented_sources`]) must be checked against it.
    fn observe(&mut self, seq: u64, source: Source, body: &Body);
    /// Called only for a valid stream, so the terminal exists.
    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict;
}

fn unknown_case(suite: &str, case: &str) -> GradeError {
    let known: Vec<&str> = CASES
        .iter()
        .filter(|(s, _)| *s == suite)
        .map(|(_, c)| *c)
        .collect();
    if known.is_empty() {
        return GradeError::UnknownSuite(suite.to_string());
    }
    GradeError::UnknownCase {
        suite: suite.to_string(),
        case: case.to_string(),
        known: known.join(", "),
    }
}

/// The verdict for a stream that is not a valid run stream.
pub fn invalid_stream_verdict(error: &StreamError) -> Verdict {
    Verdict::new(
        VerdictKind::Incomplete,
        format!("the event stream is not valid: {error}"),
        vec![EvidenceRef::at_line(error.line(), &error.to_string())],
    )
}

/// Grade events already in memory (e.g. from `harness::event_log::EventLog::events`).
pub fn grade(suite: &str, case: &str, events: &[Event]) -> Result<Verdict, GradeError> {
    let mut grader = grader_for(suite, case)?;
    let mut validator = StreamValidator::default();
    let mut terminal = None;
    for (i, event) in events.iter().enumerate() {
        let kind = event.body.kind();
        if let Err(e) = validator.accept(
            i as u64 + 1,
            u64::from(event.v),
            event.seq,
            event.ts_ms,
            &event.run,
            kind,
        ) {
            return Ok(invalid_stream_verdict(&e));
        }
        if let Body::RunEnded(ended) = &event.body {
            terminal = Some(Terminal {
                seq: event.seq,
                source: event.source,
                ended: ended.clone(),
            });
        }
        if grader.wants(kind) {
            grader.observe(event.seq, event.source, &event.body);
        }
    }
    if let Err(e) = validator.finish() {
        return Ok(invalid_stream_verdict(&e));
    }
    Ok(finish(grader, terminal))
}

/// Grade a JSONL stream while reading it, keeping only what the grader folds.
pub fn grade_reader<R: BufRead>(suite: &str, case: &str, input: R) -> Result<Verdict, GradeError> {
    grade_reader_with(suite, case, input, ReaderConfig::default())
}

pub fn grade_reader_with<R: BufRead>(
    suite: &str,
    case: &str,
    input: R,
    config: ReaderConfig,
) -> Result<Verdict, GradeError> {
    let mut grader = grader_for(suite, case)?;
    let mut reader = EventReader::with_config(input, config);
    let mut terminal = None;
    while let Some(next) = reader.next_event() {
        let raw = match next {
            Ok(raw) => raw,
            Err(ReadError::Io(e)) => return Err(GradeError::Io(e)),
            Err(ReadError::Invalid(e)) => return Ok(invalid_stream_verdict(&e)),
        };
        let wanted = grader.wants(raw.kind);
        if !wanted && raw.kind != Kind::RunEnded {
            continue;
        }
        let body = match raw.decode() {
            Ok(body) => body,
            Err(e) => return Ok(invalid_stream_verdict(&e)),
        };
        if let Body::RunEnded(ended) = &body {
            terminal = Some(Terminal {
                seq: raw.seq,
                source: raw.source,
                ended: ended.clone(),
            });
        }
        if wanted {
            grader.observe(raw.seq, raw.source, &body);
        }
    }
    Ok(finish(grader, terminal))
}

fn finish(grader: Box<dyn Grader>, terminal: Option<Terminal>) -> Verdict {
    match terminal {
        Some(terminal) => grader.finish(&terminal),
        // Unreachable for a validated stream; kept total so no input can panic.
        None => Verdict::new(
            VerdictKind::Incomplete,
            "the event stream has no `run.ended` terminal",
            Vec::new(),
        ),
    }
}

/// A `fail` verdict naming the check that failed.
pub(crate) fn fail(check: &str, detail: impl AsRef<str>, evidence: Vec<EvidenceRef>) -> Verdict {
    Verdict::new(
        VerdictKind::Fail,
        format!("check `{check}` failed: {}", detail.as_ref()),
        evidence,
    )
}
