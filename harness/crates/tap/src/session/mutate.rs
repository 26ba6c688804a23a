//! The recorder's side of `harness mutate`: a launch's two relays when the cell carries a
//! mutation operator ([`crate::mutation`]). Only then are the driver's bytes cut into lines and
//! parsed; an unmutated cell's relay never comes here, so its bytes and costs are unchanged.
//!
//! What the app-server received is what the transcript records (the mutated line), preceded by
//! a `mutation` record: the operator, an excerpt of what the driver sent, what it became. What
//! the app-server sent is recorded whole, whatever of it reaches the driver.

use super::Shared;
use crate::mutation::{Operator, Received, Sent, WireMutation};
use crate::record::{Direction, LaunchLog};
use graders::wire::transcript::{MAX_KEPT_LINE_BYTES, MAX_MUTATION_RECORDS};
use serde_json::{json, Map, Value};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

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
        if let Ok(mut stdin) = self.stdin.try_lock() {
            if stdin.take().is_some() {
                log.record("stdin-closed", Map::new());
            }
        }
    }
}

/// A piece of a relayed stream: a whole line (with its newline), or bytes passed on as they
/// are (a line past the bound, the end of a stream without its newline).
enum Piece<'a> {
    Line(&'a [u8]),
    Through(&'a [u8]),
}

/// Cuts a relayed stream into lines for the operator. A line longer than the recorder keeps is
/// passed on unparsed (no operator rewrites what the transcript could not show).
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    /// Passing the rest of an over-long line through, until its newline.
    passing: bool,
}

impl Lines {
    fn feed(&mut self, mut chunk: &[u8], each: &mut dyn FnMut(Piece)) {
        while !chunk.is_empty() {
            let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (&chunk[..=at], true),
                None => (chunk, false),
            };
            chunk = &chunk[part.len()..];
            if self.passing {
                each(Piece::Through(part));
                self.passing = !newline;
                continue;
            }
            if newline && self.buf.is_empty() {
                each(Piece::Line(part));
                continue;
            }
            self.buf.extend_from_slice(part);
            if newline {
                let line = std::mem::take(&mut self.buf);
                each(Piece::Line(&line));
            } else if self.buf.len() > MAX_KEPT_LINE_BYTES {
                let line = std::mem::take(&mut self.buf);
                each(Piece::Through(&line));
                self.passing = true;
            }
        }
    }

    fn finish(&mut self, each: &mut dyn FnMut(Piece)) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            each(Piece::Through(&rest));
        }
        self.passing = false;
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
}

/// What the operator does with a JSON line: `line`, the parsed `message`, the bytes held so
/// far, and where bytes go on.
type OnLine<'a> = dyn FnMut(&[u8], Value, &mut Vec<u8>, &mut dyn FnMut(&[u8])) + 'a;

impl Side {
    pub(super) fn new() -> Self {
        Self {
            lines: Lines::default(),
            held: Vec::new(),
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
                    forward(line);
                    forward(&copy);
                }
            }
        });
    }

    /// The app-server's `chunk` (recorded whole already), of which `send` gets what reaches
    /// the driver; the operator sees each line before the driver can.
    pub(super) fn server_sent(
        &mut self,
        chunk: &[u8],
        mutation: &Mutex<WireMutation>,
        stdin: &StdinSlot,
        shared: &Shared,
        log: &LaunchLog,
        send: &mut dyn FnMut(&[u8]),
    ) {
        self.pass(chunk, send, &mut |line, message, held, send| {
            let mut mutation = mutation.lock().unwrap_or_else(|p| p.into_inner());
            let operator = mutation.operator();
            let received = mutation.server_sent(&message);
            drop(mutation);
            match received {
                Received::Forward => held.extend_from_slice(line),
                Received::Swallow => {}
                Received::ForwardThenCloseStdin => {
                    held.extend_from_slice(line);
                    flush(held, send);
                    if stdin.is_open() {
                        let became =
                            "forwarded to the driver, then the app-server's stdin was closed";
                        record_mutation(shared, log, operator, &text(line), became);
                        stdin.close_soon(log);
                    }
                }
            }
        });
    }
}

fn flush(held: &mut Vec<u8>, out: &mut dyn FnMut(&[u8])) {
    if !held.is_empty() {
        out(held);
        held.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{self, Hello, Kind};
    use crate::session::{AppServerSetup, HostSpawn, Recording};
    use std::sync::Arc;
    use std::time::Duration;

    /// A launch through a mutated recorder whose app-server is `cat`: what the driver's
    /// lines became comes back, and the transcript says what was rewritten.
    fn through_cat(operator: Operator, sent: &[u8]) -> (Vec<u8>, Vec<Value>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("s.sock");
        let transcript = dir.path().join("t.jsonl");
        let setup = AppServerSetup {
            program: "/bin/sh".into(),
            prefix: vec!["-c".into(), "exec cat".into()],
            server_args: Vec::new(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            inherit_env: Vec::new(),
        };
        let recording = Recording::start_mutated(
            &socket,
            &transcript,
            setup,
            Arc::new(HostSpawn),
            Some(operator),
        )
        .unwrap();
        let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let hello = Hello {
            argv: vec!["app-server".into()],
            env_names: Vec::new(),
            cwd: "/".into(),
            pid: std::process::id(),
        };
        // The driver's pipes, handed over as the tap hands over its stdin and stdout.
        let (stdin_read, stdin_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (stdout_read, stdout_write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        {
            use std::os::fd::AsFd;
            frame::send_with_fds(
                &stream,
                Kind::Hello,
                &serde_json::to_vec(&hello).unwrap(),
                &[stdin_read.as_fd(), stdout_write.as_fd()],
            )
            .unwrap();
        }
        drop((stdin_read, stdout_write));
        // In two chunks, cutting a line: the operator sees whole lines.
        let (a, b) = sent.split_at(sent.len() / 2);
        let mut driver_stdin = std::fs::File::from(stdin_write);
        use std::io::{Read, Write};
        driver_stdin.write_all(a).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        driver_stdin.write_all(b).unwrap();
        drop(driver_stdin);
        // As the tap says once its stdin hangs up.
        frame::Writer::new(&stream)
            .send(Kind::StdinEof, b"")
            .unwrap();
        let mut echoed = Vec::new();
        std::fs::File::from(stdout_read)
            .read_to_end(&mut echoed)
            .unwrap();
        let mut reader = std::io::BufReader::new(stream);
        let mut payload = Vec::new();
        while let Some(kind) = frame::read(&mut reader, &mut payload).unwrap() {
            if kind == Kind::Exit {
                break;
            }
        }
        // The tap's end goes, so the launch is over before the recording's grace.
        drop(reader);
        recording.finish(Duration::from_secs(5));
        let records = std::fs::read_to_string(&transcript)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (echoed, records, recording.mutations_applied())
    }

    #[test]
    fn a_mutated_launch_delivers_the_rewrite_and_records_it() {
        let sent = b"{\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"method\":\"initialized\"}\n{\"id\":1,\"method\":\"thread/start\",\"params\":{}}\n";
        let (echoed, records, applied) = through_cat(Operator::DropInitialized, sent);
        assert_eq!(
            String::from_utf8(echoed).unwrap(),
            "{\"id\":0,\"method\":\"initialize\",\"params\":{}}\n{\"id\":1,\"method\":\"thread/start\",\"params\":{}}\n"
        );
        assert_eq!(applied, 1);
        let mutation = records
            .iter()
            .position(|r| r["kind"] == "mutation")
            .expect("a mutation record");
        assert_eq!(records[mutation]["operator"], "drop-initialized");
        assert_eq!(
            records[mutation]["original"],
            "{\"method\":\"initialized\"}"
        );
        assert_eq!(records[mutation]["became"], "not forwarded");
        let delivered: Vec<&Value> = records
            .iter()
            .filter(|r| r["direction"] == "in")
            .map(|r| &r["message"])
            .collect();
        assert_eq!(
            delivered.len(),
            2,
            "the transcript holds what the app-server got"
        );
        assert!(
            records[..mutation]
                .iter()
                .any(|r| r["message"]["method"] == "initialize")
                && records[mutation..]
                    .iter()
                    .any(|r| r["direction"] == "in" && r["message"]["method"] == "thread/start"),
            "in order: {records:?}"
        );
        graders::wire::transcript::read(
            records
                .iter()
                .map(|r| r.to_string() + "\n")
                .collect::<String>()
                .as_bytes(),
        )
        .expect("the reader takes the mutation record");

        let (echoed, _, applied) = through_cat(Operator::ApprovalNever, sent);
        let echoed = String::from_utf8(echoed).unwrap();
        assert!(echoed.contains("\"approvalPolicy\":\"never\""), "{echoed}");
        assert_eq!(applied, 1);
        let (echoed, _, applied) =
            through_cat(Operator::WidenSandbox, b"{\"method\":\"initialized\"}\n");
        assert_eq!(
            echoed, b"{\"method\":\"initialized\"}\n",
            "nothing to rewrite"
        );
        assert_eq!(applied, 0);
    }

    fn pieces(chunks: &[&[u8]]) -> Vec<(bool, Vec<u8>)> {
        let mut lines = Lines::default();
        let mut got = Vec::new();
        for chunk in chunks {
            lines.feed(chunk, &mut |piece| match piece {
                Piece::Line(b) => got.push((true, b.to_vec())),
                Piece::Through(b) => got.push((false, b.to_vec())),
            });
        }
        lines.finish(&mut |piece| match piece {
            Piece::Line(b) | Piece::Through(b) => got.push((false, b.to_vec())),
        });
        got
    }

    #[test]
    fn lines_are_cut_across_chunks_and_the_rest_passes_through() {
        let got = pieces(&[b"{\"a\":1}\n{\"b\"", b":2}\n{\"c\""]);
        assert_eq!(
            got,
            vec![
                (true, b"{\"a\":1}\n".to_vec()),
                (true, b"{\"b\":2}\n".to_vec()),
                (false, b"{\"c\"".to_vec()),
            ]
        );
        let long = vec![b'x'; MAX_KEPT_LINE_BYTES + 10];
        let got = pieces(&[&long[..100], &long[100..], b"yy\n{}\n"]);
        let through: usize = got.iter().filter(|p| !p.0).map(|p| p.1.len()).sum();
        assert_eq!(through, long.len() + 3, "an over-long line passes whole");
        assert_eq!(got.last().unwrap(), &(true, b"{}\n".to_vec()));
    }
}
