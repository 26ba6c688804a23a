//! Streaming, validating reader of a run's JSONL event stream.
//!
//! Each line's header (`v`, `seq`, `run`, `source`, `kind`) is parsed eagerly; the payload stays
//! a borrowed [`RawValue`] (syntax-checked, not decoded) until a caller asks for it, so a 200 MB
//! log streams in constant memory and only the kinds a grader needs pay for decoding.
//!
//! Validation rules (also in `docs/events.md`): a bounded line length, every line one complete
//! JSON object with the header fields, `v` one of [`READABLE_VERSIONS`] and the same on every
//! line, `ts_ms` on every line of a version-2 stream, `seq` continuous from 0, one run id,
//! exactly one `run.ended` and nothing after it. The first violation ends the stream with a
//! [`StreamError`] naming the line; the reader never panics on any input.

use crate::events::{Body, Event, Kind, Source, READABLE_VERSIONS, SCHEMA_VERSION};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::io::{BufRead, Read};

/// Longest line accepted by default (the newline not counted).
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;
/// The largest `max_line_bytes` a reader accepts: a grader holds one line and its decoded
/// payload at a time, so this bounds its memory (well under 64 MB) whatever the input.
pub const MAX_MAX_LINE_BYTES: usize = 8 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderConfig {
    pub max_line_bytes: usize,
}

impl Default for ReaderConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
        }
    }
}

/// A reader configuration outside the accepted range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("max_line_bytes must be at least 1 (got 0)")]
    LineLimitZero,
    #[error("max_line_bytes {got} is above the largest accepted limit of {MAX_MAX_LINE_BYTES} bytes (8 MiB)")]
    LineLimitTooLarge { got: u64 },
}

impl std::fmt::Display for ReaderConfig {
    /// The line limit, as `--max-line-bytes` takes it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.max_line_bytes)
    }
}

impl ReaderConfig {
    /// A configuration with a checked line limit (1 ..= [`MAX_MAX_LINE_BYTES`]).
    pub fn with_max_line_bytes(max_line_bytes: u64) -> Result<Self, ConfigError> {
        match usize::try_from(max_line_bytes) {
            _ if max_line_bytes == 0 => Err(ConfigError::LineLimitZero),
            Ok(n) if n <= MAX_MAX_LINE_BYTES => Ok(Self { max_line_bytes: n }),
            _ => Err(ConfigError::LineLimitTooLarge {
                got: max_line_bytes,
            }),
        }
    }

    /// The line limit actually applied: a configuration built by hand is clamped into the
    /// accepted range, so no value can overflow the reader's arithmetic or unbound its memory.
    pub fn effective_max_line_bytes(&self) -> usize {
        self.max_line_bytes.clamp(1, MAX_MAX_LINE_BYTES)
    }
}

/// A stream that is readable but not a valid run stream. Line numbers are 1-based.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error("the stream is empty (no events, no `run.ended` terminal)")]
    Empty,
    #[error("line {line}: longer than the line limit of {limit} bytes")]
    LineTooLong { line: u64, limit: usize },
    #[error(
        "line {line}: truncated (the stream ends mid-line: no trailing newline and not valid JSON)"
    )]
    Truncated { line: u64 },
    #[error("line {line}: not valid UTF-8")]
    NotUtf8 { line: u64 },
    #[error("line {line}: empty line")]
    EmptyLine { line: u64 },
    #[error("line {line}: not an event: {detail}")]
    Malformed { line: u64, detail: String },
    #[error(
        "line {line}: schema version {found}; this reader understands versions 1 to {SCHEMA_VERSION}"
    )]
    Version { line: u64, found: u64 },
    #[error("line {line}: schema version {found} differs from version {first} on line 1")]
    MixedVersions { line: u64, first: u64, found: u64 },
    #[error("line {line}: no `ts_ms` timestamp (required on every line from schema version 2)")]
    MissingTimestamp { line: u64 },
    #[error("line {line}: seq {found} {}, expected {expected}", if *found < *expected { "repeats an earlier sequence number" } else { "skips sequence numbers" })]
    Seq {
        line: u64,
        expected: u64,
        found: u64,
    },
    #[error("line {line}: run id `{found}` differs from `{expected}` on line 1")]
    RunMismatch {
        line: u64,
        expected: String,
        found: String,
    },
    #[error("line {line}: `{kind}` event after the `run.ended` terminal on line {terminal_line}")]
    AfterTerminal {
        line: u64,
        kind: Kind,
        terminal_line: u64,
    },
    #[error("the stream ends after line {lines} without a `run.ended` terminal")]
    MissingTerminal { lines: u64 },
    #[error("line {line}: `{kind}` payload does not match the schema: {detail}")]
    BadPayload {
        line: u64,
        kind: Kind,
        detail: String,
    },
}

impl StreamError {
    /// The line the error is about (for a missing terminal: the last line).
    pub fn line(&self) -> u64 {
        match self {
            StreamError::Empty => 0,
            StreamError::LineTooLong { line, .. }
            | StreamError::Truncated { line }
            | StreamError::NotUtf8 { line }
            | StreamError::EmptyLine { line }
            | StreamError::Malformed { line, .. }
            | StreamError::Version { line, .. }
            | StreamError::MixedVersions { line, .. }
            | StreamError::MissingTimestamp { line }
            | StreamError::Seq { line, .. }
            | StreamError::RunMismatch { line, .. }
            | StreamError::AfterTerminal { line, .. }
            | StreamError::BadPayload { line, .. } => *line,
            StreamError::MissingTerminal { lines } => *lines,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The input could not be read at all (I/O), as opposed to read and found invalid.
    #[error("reading the event stream: {0}")]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Invalid(#[from] StreamError),
}

/// The header rules every stream obeys, independent of where the events come from (a file, or
/// events already in memory).
#[derive(Debug, Default, Clone)]
pub struct StreamValidator {
    version: Option<u64>,
    run: Option<String>,
    next_seq: u64,
    terminal_line: Option<u64>,
    lines: u64,
}

impl StreamValidator {
    pub fn accept(
        &mut self,
        line: u64,
        v: u64,
        seq: u64,
        ts_ms: Option<u64>,
        run: &str,
        kind: Kind,
    ) -> Result<(), StreamError> {
        self.lines = line;
        if let Some(terminal_line) = self.terminal_line {
            return Err(StreamError::AfterTerminal {
                line,
                kind,
                terminal_line,
            });
        }
        if !READABLE_VERSIONS.iter().any(|known| u64::from(*known) == v) {
            return Err(StreamError::Version { line, found: v });
        }
        match self.version {
            None => self.version = Some(v),
            Some(first) if first != v => {
                return Err(StreamError::MixedVersions {
                    line,
                    first,
                    found: v,
                })
            }
            Some(_) => {}
        }
        if v >= 2 && ts_ms.is_none() {
            return Err(StreamError::MissingTimestamp { line });
        }
        if seq != self.next_seq {
            return Err(StreamError::Seq {
                line,
                expected: self.next_seq,
                found: seq,
            });
        }
        match &self.run {
            None => self.run = Some(run.to_string()),
            Some(expected) if expected != run => {
                return Err(StreamError::RunMismatch {
                    line,
                    expected: expected.clone(),
                    found: run.to_string(),
                })
            }
            Some(_) => {}
        }
        self.next_seq += 1;
        if kind == Kind::RunEnded {
            self.terminal_line = Some(line);
        }
        Ok(())
    }

    /// Call at the end of the stream.
    pub fn finish(&self) -> Result<(), StreamError> {
        match (self.lines, self.terminal_line) {
            (0, _) => Err(StreamError::Empty),
            (_, Some(_)) => Ok(()),
            (lines, None) => Err(StreamError::MissingTerminal { lines }),
        }
    }

    pub fn run_id(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// The stream's schema version, once the first line was accepted.
    pub fn version(&self) -> Option<u64> {
        self.version
    }
}

#[derive(Deserialize)]
struct Header<'a> {
    v: u64,
    seq: u64,
    #[serde(default)]
    ts_ms: Option<u64>,
    #[serde(borrow)]
    run: Cow<'a, str>,
    source: Source,
    kind: Kind,
    #[serde(borrow)]
    payload: &'a RawValue,
}

/// One validated line whose payload is not decoded yet.
#[derive(Debug, Clone, Copy)]
pub struct RawEvent<'a> {
    pub line: u64,
    pub seq: u64,
    /// `None` only in version-1 streams.
    pub ts_ms: Option<u64>,
    pub source: Source,
    pub kind: Kind,
    payload: &'a RawValue,
}

impl<'a> RawEvent<'a> {
    /// The payload's JSON text, verbatim.
    pub fn payload_json(&self) -> &'a str {
        self.payload.get()
    }

    /// Decode the payload into the typed body of this kind.
    pub fn decode(&self) -> Result<Body, StreamError> {
        decode_body(self.kind, self.payload).map_err(|e| StreamError::BadPayload {
            line: self.line,
            kind: self.kind,
            detail: e.to_string(),
        })
    }
}

/// Decode a payload given its kind (the inverse of `Body`'s `kind`/`payload` serialization).
pub fn decode_body(kind: Kind, payload: &RawValue) -> serde_json::Result<Body> {
    let p = payload.get();
    Ok(match kind {
        Kind::RunStarted => Body::RunStarted(serde_json::from_str(p)?),
        Kind::SessionOpenRequested => Body::SessionOpenRequested(serde_json::from_str(p)?),
        Kind::SessionStarted => Body::SessionStarted(serde_json::from_str(p)?),
        Kind::SessionRejected => Body::SessionRejected(serde_json::from_str(p)?),
        Kind::SessionRelaunched => Body::SessionRelaunched(serde_json::from_str(p)?),
        Kind::TurnSubmitted => Body::TurnSubmitted(serde_json::from_str(p)?),
        Kind::TurnStarted => Body::TurnStarted(serde_json::from_str(p)?),
        Kind::TurnCompleted => Body::TurnCompleted(serde_json::from_str(p)?),
        Kind::TurnError => Body::TurnError(serde_json::from_str(p)?),
        Kind::ItemStarted => Body::ItemStarted(serde_json::from_str(p)?),
        Kind::ItemCompleted => Body::ItemCompleted(serde_json::from_str(p)?),
        Kind::PlanUpdated => Body::PlanUpdated(serde_json::from_str(p)?),
        Kind::ApprovalRequested => Body::ApprovalRequested(serde_json::from_str(p)?),
        Kind::ApprovalResolved => Body::ApprovalResolved(serde_json::from_str(p)?),
        Kind::ReviewStarted => Body::ReviewStarted(serde_json::from_str(p)?),
        Kind::ReviewCompleted => Body::ReviewCompleted(serde_json::from_str(p)?),
        Kind::ModelToolCall => Body::ModelToolCall(serde_json::from_str(p)?),
        Kind::ModelToolOutput => Body::ModelToolOutput(serde_json::from_str(p)?),
        Kind::ResultProposed => Body::ResultProposed(serde_json::from_str(p)?),
        Kind::WorkspaceEvidence => Body::WorkspaceEvidence(serde_json::from_str(p)?),
        Kind::HomeEvidence => Body::HomeEvidence(serde_json::from_str(p)?),
        Kind::Diagnostic => Body::Diagnostic(serde_json::from_str(p)?),
        Kind::ClientRequest => Body::ClientRequest(serde_json::from_str(p)?),
        Kind::ClientNotification => Body::ClientNotification(serde_json::from_str(p)?),
        Kind::ClientRequestAnswered => Body::ClientRequestAnswered(serde_json::from_str(p)?),
        Kind::ServerRequest => Body::ServerRequest(serde_json::from_str(p)?),
        Kind::ServerRequestAnswered => Body::ServerRequestAnswered(serde_json::from_str(p)?),
        Kind::ServerNotifications => Body::ServerNotifications(serde_json::from_str(p)?),
        Kind::StdinClosed => Body::StdinClosed(serde_json::from_str(p)?),
        Kind::AppServerLaunched => Body::AppServerLaunched(serde_json::from_str(p)?),
        Kind::AppServerExited => Body::AppServerExited(serde_json::from_str(p)?),
        Kind::NotRecorded => Body::NotRecorded(serde_json::from_str(p)?),
        Kind::DriverEnded => Body::DriverEnded(serde_json::from_str(p)?),
        Kind::RunEnded => Body::RunEnded(serde_json::from_str(p)?),
    })
}

enum LineRead {
    Eof,
    Line { terminated: bool },
}

/// Reads events one line at a time, reusing one buffer of at most `max_line_bytes + 1` bytes.
pub struct EventReader<R> {
    input: R,
    config: ReaderConfig,
    buf: Vec<u8>,
    line: u64,
    validator: StreamValidator,
    finished: bool,
}

impl<R: BufRead> EventReader<R> {
    pub fn new(input: R) -> Self {
        Self::with_config(input, ReaderConfig::default())
    }

    pub fn with_config(input: R, config: ReaderConfig) -> Self {
        Self {
            input,
            config,
            buf: Vec::new(),
            line: 0,
            validator: StreamValidator::default(),
            finished: false,
        }
    }

    /// The run id of the stream, once the first line was read.
    pub fn run_id(&self) -> Option<&str> {
        self.validator.run_id()
    }

    /// The next validated event; `None` after the end of a valid stream or after the first
    /// error. A missing terminal is reported as an error at the end of the input.
    pub fn next_event(&mut self) -> Option<Result<RawEvent<'_>, ReadError>> {
        if self.finished {
            return None;
        }
        let terminated = match self.read_line() {
            Ok(LineRead::Eof) => {
                self.finished = true;
                return self.validator.finish().err().map(|e| Err(e.into()));
            }
            Ok(LineRead::Line { terminated }) => terminated,
            Err(e) => {
                self.finished = true;
                return Some(Err(e));
            }
        };
        let line = self.line;
        match parse_line(&self.buf, line, terminated, &mut self.validator) {
            Ok(event) => Some(Ok(event)),
            Err(e) => {
                self.finished = true;
                Some(Err(e.into()))
            }
        }
    }

    fn read_line(&mut self) -> Result<LineRead, ReadError> {
        self.buf.clear();
        let limit = self.config.effective_max_line_bytes();
        // `Take` bounds what one line may pull into memory: at most limit + 1 bytes (the line
        // plus its newline), so an oversized line is detected without buffering it.
        let read = (&mut self.input)
            .take((limit as u64).saturating_add(1))
            .read_until(b'\n', &mut self.buf)?;
        if read == 0 {
            return Ok(LineRead::Eof);
        }
        self.line += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            return Ok(LineRead::Line { terminated: true });
        }
        if self.buf.len() > limit {
            return Err(StreamError::LineTooLong {
                line: self.line,
                limit,
            }
            .into());
        }
        Ok(LineRead::Line { terminated: false })
    }
}

fn parse_line<'a>(
    bytes: &'a [u8],
    line: u64,
    terminated: bool,
    validator: &mut StreamValidator,
) -> Result<RawEvent<'a>, StreamError> {
    let text = std::str::from_utf8(bytes).map_err(|_| {
        if terminated {
            StreamError::NotUtf8 { line }
        } else {
            // A cut inside a multi-byte character is a truncation too.
            StreamError::Truncated { line }
        }
    })?;
    if text.is_empty() {
        return Err(StreamError::EmptyLine { line });
    }
    let header: Header<'a> = serde_json::from_str(text).map_err(|e| {
        if !terminated && (e.is_eof() || e.is_syntax()) {
            StreamError::Truncated { line }
        } else {
            StreamError::Malformed {
                line,
                detail: e.to_string(),
            }
        }
    })?;
    validator.accept(
        line,
        header.v,
        header.seq,
        header.ts_ms,
        &header.run,
        header.kind,
    )?;
    Ok(RawEvent {
        line,
        seq: header.seq,
        ts_ms: header.ts_ms,
        source: header.source,
        kind: header.kind,
        payload: header.payload,
    })
}

/// Read and validate a whole stream, decoding every payload. For tools and tests; graders use
/// [`EventReader`] to stream. Events keep the version and timestamp of their lines.
pub fn read_all<R: BufRead>(input: R, config: ReaderConfig) -> Result<Vec<Event>, ReadError> {
    let mut reader = EventReader::with_config(input, config);
    let mut events = Vec::new();
    let mut run = String::new();
    while let Some(next) = reader.next_event() {
        let raw = next?;
        let body = raw.decode()?;
        let (seq, source, ts_ms) = (raw.seq, raw.source, raw.ts_ms);
        if run.is_empty() {
            run = reader.run_id().unwrap_or_default().to_string();
        }
        let v = reader
            .validator
            .version()
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(SCHEMA_VERSION);
        events.push(Event {
            v,
            seq,
            ts_ms,
            run: run.clone(),
            source,
            body,
        });
    }
    Ok(events)
}

/// Check events already in memory against the same rules as the streaming reader.
pub fn validate_events(events: &[Event]) -> Result<(), StreamError> {
    let mut validator = StreamValidator::default();
    for (i, event) in events.iter().enumerate() {
        validator.accept(
            i as u64 + 1,
            u64::from(event.v),
            event.seq,
            event.ts_ms,
            &event.run,
            event.body.kind(),
        )?;
    }
    validator.finish()
}
