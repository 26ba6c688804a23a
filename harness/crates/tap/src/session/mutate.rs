//! The recorder's side of `harness mutate`: a launch's two relays when the cell carries a
//! mutation operator ([`crate::mutation`]). Only then are the driver's bytes cut into lines and
//! parsed; an unmutated cell's relay never comes here, so its bytes and costs are unchanged.
//!
//! What the app-server received is what the transcript records (the mutated line), preceded by
//! a `mutation` record: the operator, an excerpt of what the driver sent, what it became. What
//! the app-server sent is recorded whole, whatever of it reaches the driver.

use super::killer::Killer;
use super::lines::{Lines, Piece};
use super::Shared;
use crate::mutation::{Operator, Received, Sent, WireMutation};
use crate::record::LaunchLog;
use graders::wire::transcript::Direction;
use graders::wire::transcript::MAX_MUTATION_RECORDS;
use serde_json::{json, Map, Value};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Longest excerpt of a message in a `mutation` record, in characters.
const EXCERPT_CHARS: usize = 400;

/// The app-server's stdin, shared by the relay that writes it and the one that may close it
/// (`close-after-turn-start`). The closing side never waits for a write in progress (that write
/// may wait for the app-server, which may wait for its stdout to be read): it asks, and the
/// writer closes after its write.
pub(super) struct StdinSlot {
    stdin: Mutex<Option<ChildStdin>>,
    close_asked: AtomicBool,
}

/// Close `stdin` if open, recording `stdin-closed` before the close: an app-server that exits
/// at its stdin's end cannot have its exit recorded first.
fn close_recorded(stdin: &mut Option<ChildStdin>, log: &LaunchLog) {
    if let Some(open) = stdin.take() {
        log.record("stdin-closed", Map::new());
        drop(open);
    }
}

impl StdinSlot {
    pub(super) fn new(stdin: ChildStdin) -> Self {
        Self {
            stdin: Mutex::new(Some(stdin)),
            close_asked: AtomicBool::new(false),
        }
    }

    /// Write `bytes`; whether they were delivered (not: stdin is closed, or the write failed).
    /// A close asked for before or during the write is done around it.
    pub(super) fn write(&self, bytes: &[u8], log: &LaunchLog) -> bool {
        use std::io::Write;
        let mut stdin = self.stdin.lock().unwrap_or_else(|p| p.into_inner());
        let close_if_asked = |stdin: &mut Option<ChildStdin>| {
            if self.close_asked.load(Ordering::SeqCst) {
                close_recorded(stdin, log);
            }
        };
        close_if_asked(&mut stdin);
        let delivered = stdin.as_mut().is_some_and(|s| s.write_all(bytes).is_ok());
        close_if_asked(&mut stdin);
        delivered
    }

    /// Close it as the driver's end of input, recording `stdin-closed`.
    pub(super) fn close_recorded(&self, log: &LaunchLog) {
        close_recorded(
            &mut self.stdin.lock().unwrap_or_else(|p| p.into_inner()),
            log,
        );
    }

    /// Close it without a record: the driver let go of its `codex` without closing it.
    pub(super) fn close(&self) {
        self.stdin.lock().unwrap_or_else(|p| p.into_inner()).take();
    }

    pub(super) fn is_open(&self) -> bool {
        self.stdin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Close it as soon as no write is in progress (now, or right after that write).
    fn close_soon(&self, log: &LaunchLog) {
        self.close_asked.store(true, Ordering::SeqCst);
        // Recorded before the pipe closes (the taken stdin used to be dropped at the end of the
        // condition, before the record), like every other close.
        if let Ok(mut stdin) = self.stdin.try_lock() {
            close_recorded(&mut stdin, log);
        }
    }
}

fn parse(line: &[u8]) -> Option<Value> {
    serde_json::from_slice(line.trim_ascii()).ok()
}

fn excerpt(text: &str) -> String {
    graders::verdict::excerpt(&text.chars().take(EXCERPT_CHARS + 1).collect::<String>())
}

/// Count an application of the cell's operator and say so in the transcript (the first
/// [`MAX_MUTATION_RECORDS`] of a cell; then once that the rest is only counted).
pub(super) fn record_mutation(
    shared: &Shared,
    log: &LaunchLog,
    operator: Operator,
    original: &str,
    became: &str,
) {
    let applied = shared.mutations_applied.fetch_add(1, Ordering::SeqCst) + 1;
    if applied as usize > MAX_MUTATION_RECORDS {
        if applied as usize == MAX_MUTATION_RECORDS + 1 {
            log.note(
                Direction::In,
                &format!("mutation `{operator}` applied more than {MAX_MUTATION_RECORDS} times: later applications are counted, not recorded"),
                None,
            );
        }
        return;
    }
    let record = json!({
        "operator": operator.name(),
        "applied": applied,
        "original": excerpt(original),
        "became": excerpt(became),
    });
    if let Value::Object(fields) = record {
        log.record("mutation", fields);
    }
}

fn text(line: &[u8]) -> String {
    String::from_utf8_lossy(line.trim_ascii()).into_owned()
}

fn line_of(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("JSON");
    line.push(b'\n');
    line
}

/// One side of a mutated launch: its bytes as lines. Bytes that stay as they are wait in `held`
/// and go on in one piece per chunk — or before anything the operator writes, so the
/// transcript keeps the order.
pub(super) struct Side {
    lines: Lines,
    held: Vec<u8>,
    /// Set at `close-after-turn-start`'s cut: what the app-server wrote since.
    cut: Option<AfterCut>,
}

/// What the operator does with a JSON line: `line`, the parsed `message`, the bytes held so
/// far, and where bytes go on.
type OnLine<'a> = dyn FnMut(&[u8], Value, &mut Vec<u8>, &mut dyn FnMut(&[u8])) + 'a;

impl Side {
    pub(super) fn new() -> Self {
        Self {
            lines: Lines::default(),
            held: Vec::new(),
            cut: None,
        }
    }

    /// Pass `chunk` on through `out`: every whole JSON line through `on_line`, the rest held.
    fn pass(&mut self, chunk: &[u8], out: &mut dyn FnMut(&[u8]), on_line: &mut OnLine) {
        let held = &mut self.held;
        self.lines.feed(chunk, &mut |piece| match piece {
            Piece::Through(bytes) => held.extend_from_slice(bytes),
            Piece::Line(line) => match parse(line) {
                Some(message) => on_line(line, message, held, out),
                None => held.extend_from_slice(line),
            },
        });
        flush(held, out);
    }

    /// The end of the stream: what is left of a last line goes on as it is.
    pub(super) fn finish(&mut self, out: &mut dyn FnMut(&[u8])) {
        let held = &mut self.held;
        self.lines.finish(&mut |piece| match piece {
            Piece::Line(bytes) | Piece::Through(bytes) => held.extend_from_slice(bytes),
        });
        flush(held, out);
    }

    /// The driver's `chunk`, rewritten, through `forward` (which records and delivers).
    pub(super) fn driver_sent(
        &mut self,
        chunk: &[u8],
        mutation: &Mutex<WireMutation>,
        shared: &Shared,
        log: &LaunchLog,
        forward: &mut dyn FnMut(&[u8]),
    ) {
        self.pass(chunk, forward, &mut |line, message, held, forward| {
            let mut mutation = mutation.lock().unwrap_or_else(|p| p.into_inner());
            let operator = mutation.operator();
            let sent = mutation.driver_sent(&message);
            drop(mutation);
            let original = text(line);
            match sent {
                Sent::Unchanged => held.extend_from_slice(line),
                Sent::Dropped => {
                    flush(held, forward);
                    record_mutation(shared, log, operator, &original, "not forwarded");
                }
                Sent::Replaced(instead) => {
                    flush(held, forward);
                    let instead = line_of(&instead);
                    record_mutation(shared, log, operator, &original, &text(&instead));
                    forward(&instead);
                }
                Sent::Twice(copy) => {
                    flush(held, forward);
                    let copy = line_of(&copy);
                    let became = format!(
                        "forwarded, then a copy (its answer is not forwarded): {}",
                        text(&copy)
                    );
                    record_mutation(shared, log, operator, &original, &became);
                    // In one write with the original: the app-server reads them together, so
                    // where the copy lands (a `turn/start`'s, in the turn it started) does not
                    // depend on when the relay's second write came.
                    held.extend_from_slice(line);
                    held.extend_from_slice(&copy);
                }
            }
        });
    }

    /// The app-server's `chunk`: `record` gets what the transcript keeps of it (each piece
    /// before the driver can see it), `send` what reaches the driver; the operator sees each
    /// line before the driver can. After a cut ([`Received::ForwardThenCut`]) neither gets
    /// anything more: it is counted for [`Side::finish_server`].
    pub(super) fn server_sent(
        &mut self,
        chunk: &[u8],
        mutated: &Mutated,
        shared: &Shared,
        log: &LaunchLog,
        record: &mut dyn FnMut(&[u8]),
        send: &mut dyn FnMut(&[u8]),
    ) {
        let (held, cut) = (&mut self.held, &mut self.cut);
        // What the transcript is owed, written before anything held goes to the driver.
        let mut unrecorded = Vec::new();
        let mut deliver = |held: &mut Vec<u8>, unrecorded: &mut Vec<u8>| {
            if !unrecorded.is_empty() {
                record(unrecorded);
                unrecorded.clear();
            }
            flush(held, send);
        };
        self.lines.feed(chunk, &mut |piece| {
            if let Some(after) = cut.as_mut() {
                after.count(&piece);
                return;
            }
            let line = match piece {
                Piece::Through(bytes) => {
                    unrecorded.extend_from_slice(bytes);
                    held.extend_from_slice(bytes);
                    return;
                }
                Piece::Line(line) => line,
            };
            unrecorded.extend_from_slice(line);
            let Some(message) = parse(line) else {
                held.extend_from_slice(line);
                return;
            };
            let mut mutation = mutated.mutation.lock().unwrap_or_else(|p| p.into_inner());
            let operator = mutation.operator();
            let received = mutation.server_sent(&message);
            drop(mutation);
            match received {
                Received::Forward => held.extend_from_slice(line),
                Received::Swallow => {}
                Received::ForwardThenCut => {
                    held.extend_from_slice(line);
                    deliver(held, &mut unrecorded);
                    // A driver that closed the stdin itself already is no mutant of it.
                    if mutated.stdin.is_open() {
                        let became = "forwarded to the driver; then the app-server's stdin was closed and it was stopped: nothing it sent after reached the driver";
                        record_mutation(shared, log, operator, &text(line), became);
                        mutated.stdin.close_soon(log);
                        mutated.killer.kill(CUT);
                        *cut = Some(AfterCut::default());
                    }
                }
            }
        });
        deliver(held, &mut unrecorded);
    }

    /// The end of the app-server's stream: as [`Side::finish`], and what came after a cut said
    /// in one note.
    pub(super) fn finish_server(
        &mut self,
        log: &LaunchLog,
        record: &mut dyn FnMut(&[u8]),
        send: &mut dyn FnMut(&[u8]),
    ) {
        match &mut self.cut {
            Some(after) => {
                self.lines.finish(&mut |piece| after.count(&piece));
                if after.bytes > 0 {
                    log.note(Direction::Out, &after.describe(), None);
                }
            }
            None => self.finish(&mut |bytes| {
                record(bytes);
                send(bytes);
            }),
        }
    }
}

/// Why the app-server was stopped at a cut (its `exit` record's `killed_by_harness`).
const CUT: &str = "harness mutate's close-after-turn-start: the app-server's part ended with the answer that started the turn";

/// How many methods a cut's note names.
const NAMED_AFTER_CUT: usize = 8;

/// What the app-server wrote after a cut: kept out of the messages (no grader may read a line
/// the driver never got), said in one note.
#[derive(Default)]
struct AfterCut {
    lines: usize,
    bytes: usize,
    methods: Vec<String>,
}

impl AfterCut {
    fn count(&mut self, piece: &Piece) {
        let bytes = match piece {
            Piece::Line(bytes) => {
                self.lines += 1;
                if self.methods.len() < NAMED_AFTER_CUT {
                    if let Some(method) = parse(bytes)
                        .as_ref()
                        .and_then(|m| m.get("method"))
                        .and_then(Value::as_str)
                    {
                        self.methods.push(method.to_string());
                    }
                }
                bytes
            }
            Piece::Through(bytes) => bytes,
        };
        self.bytes += bytes.len();
    }

    fn describe(&self) -> String {
        format!(
            "close-after-turn-start: after its cut the app-server wrote {} bytes ({} lines{}), delivered to no one and not kept",
            self.bytes,
            self.lines,
            if self.methods.is_empty() {
                String::new()
            } else {
                format!("; methods: {}", self.methods.join(", "))
            }
        )
    }
}

/// What the relay of a mutated launch's app-server works with: the operator's state, and what
/// ends the app-server's part at a cut (its stdin and its process).
pub(super) struct Mutated {
    mutation: Arc<Mutex<WireMutation>>,
    stdin: Arc<StdinSlot>,
    killer: Arc<Killer>,
}

impl Mutated {
    pub(super) fn new(
        mutation: &Arc<Mutex<WireMutation>>,
        stdin: &Arc<StdinSlot>,
        killer: &Arc<Killer>,
    ) -> Self {
        Self {
            mutation: mutation.clone(),
            stdin: stdin.clone(),
            killer: killer.clone(),
        }
    }
}

fn flush(held: &mut Vec<u8>, out: &mut dyn FnMut(&[u8])) {
    if !held.is_empty() {
        out(held);
        held.clear();
    }
}

#[cfg(test)]
mod tests;
