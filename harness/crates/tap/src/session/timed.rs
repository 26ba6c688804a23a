//! The relays' side of a cell's transport timing ([`crate::timing`]): only a launch with one
//! cuts its streams into lines here; every other launch's relays never come here, so their
//! bytes and costs are unchanged. What the transcript records is what the driver got, in the
//! order it got it: a withheld request is recorded as the driver sent it, then its `timing`
//! record; a held answer is recorded when it is delivered, after its `timing` record.

use super::lines::{Lines, Piece};
use super::Shared;
use crate::record::LaunchLog;
use crate::timing::{DriverLine, Released, ServerLine, TimingState};
use crate::CHUNK;
use graders::wire::transcript::{Direction, MAX_TIMING_RECORDS};
use serde_json::{Map, Value};
use std::io::Read;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One launch's timing, shared by its two relays (the driver's requests tell which answers
/// are awaited).
pub(super) type SharedTiming = Arc<Mutex<TimingState>>;

/// How long the app-server's relay waits before it tries a due release again while a line too
/// long to parse is passing (nothing may land inside it).
const MID_LINE_RETRY: Duration = Duration::from_millis(20);

fn parse(line: &[u8]) -> Option<Value> {
    serde_json::from_slice(line.trim_ascii()).ok()
}

/// Say in the transcript that the timing applied: the first [`MAX_TIMING_RECORDS`] of a cell
/// each, then once that the rest is not recorded (a driver retrying a withheld request in a
/// loop must not grow the transcript past what its reader takes).
pub(super) fn record_timing(shared: &Shared, log: &LaunchLog, record: Map<String, Value>) {
    let recorded = shared.timings_recorded.fetch_add(1, Ordering::SeqCst) + 1;
    if recorded <= MAX_TIMING_RECORDS {
        log.record("timing", record);
    } else if recorded == MAX_TIMING_RECORDS + 1 {
        log.note(
            Direction::In,
            &format!("transport timing applied more than {MAX_TIMING_RECORDS} times: later applications are not recorded"),
            None,
        );
    }
}

/// What the driver's gate makes of its bytes.
pub(super) enum Gated<'a> {
    Deliver(&'a [u8]),
    /// A line not delivered, with its `timing` record.
    Withheld(&'a [u8], Map<String, Value>),
}

/// The driver's bytes, cut into lines on their way to the app-server.
pub(super) struct DriverGate {
    lines: Lines,
    state: SharedTiming,
}

impl DriverGate {
    pub(super) fn new(state: &SharedTiming) -> Self {
        Self {
            lines: Lines::default(),
            state: state.clone(),
        }
    }

    pub(super) fn feed(&mut self, bytes: &[u8], each: &mut dyn FnMut(Gated)) {
        let state = &self.state;
        self.lines.feed(bytes, &mut |piece| match piece {
            Piece::Through(bytes) => each(Gated::Deliver(bytes)),
            Piece::Line(line) => {
                let decided = parse(line).map(|message| {
                    state
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .driver_line(&message)
                });
                match decided {
                    Some(DriverLine::Withheld(record)) => each(Gated::Withheld(line, record)),
                    Some(DriverLine::Deliver) | None => each(Gated::Deliver(line)),
                }
            }
        });
    }

    /// The driver's input ended: a last line without its newline goes on as it is.
    pub(super) fn finish(&mut self, each: &mut dyn FnMut(Gated)) {
        self.lines.finish(&mut |piece| match piece {
            Piece::Line(bytes) | Piece::Through(bytes) => each(Gated::Deliver(bytes)),
        });
    }
}

/// The app-server's stdout under the launch's timing: `emit` records a piece and writes it to
/// the driver; held answers go through it when released, each after its `timing` record. Read
/// on a thread of its own, so a held answer's bound passes whether or not the app-server writes.
pub(super) fn pump_server<R: Read + Send + 'static>(
    stdout: R,
    state: &SharedTiming,
    log: &LaunchLog,
    shared: &Shared,
    emit: &mut dyn FnMut(&[u8]),
) {
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(4);
    let reader = std::thread::spawn(move || {
        let mut stdout = stdout;
        let mut buf = vec![0u8; CHUNK];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if tx.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    });
    let lock = || state.lock().unwrap_or_else(|p| p.into_inner());
    let release = |released: Vec<Released>, emit: &mut dyn FnMut(&[u8])| {
        for Released { line, record } in released {
            record_timing(shared, log, record);
            emit(&line);
        }
    };
    let mut lines = Lines::default();
    loop {
        let deadline = lock().next_deadline();
        let got = match deadline {
            Some(_) if lines.mid_line() => rx.recv_timeout(MID_LINE_RETRY),
            Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match got {
            Ok(chunk) => {
                shared
                    .activity
                    .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                lines.feed(&chunk, &mut |piece| match piece {
                    Piece::Through(bytes) => emit(bytes),
                    Piece::Line(line) => {
                        let Some(message) = parse(line) else {
                            return emit(line);
                        };
                        let step = lock().server_line(line, &message, Instant::now());
                        if let ServerLine::Pass(released) = step {
                            emit(line);
                            release(released, emit);
                        }
                    }
                });
            }
            Err(RecvTimeoutError::Timeout) if !lines.mid_line() => {
                let due = lock().due(Instant::now());
                release(due, emit);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    lines.finish(&mut |piece| match piece {
        Piece::Line(bytes) | Piece::Through(bytes) => emit(bytes),
    });
    let rest = lock().finish(Instant::now());
    release(rest, emit);
    let _ = reader.join();
}

#[cfg(test)]
mod tests;
