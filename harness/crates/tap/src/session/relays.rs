//! A launch's three relays: the driver's stdin (and the tap's frames) to the app-server, the
//! app-server's stdout to the driver, its stderr to the tap; each records what passes at its
//! own end.

use super::driver_io::{self, DriverOut};
use super::killer::Killer;
use super::mutate::{Mutated, Side, StdinSlot};
use super::timed::{self, DriverGate, Gated, SharedTiming};
use super::Shared;
use crate::frame::{self, Kind};
use crate::mutation::WireMutation;
use crate::record::{LaunchLog, LineSplitter, StderrSplitter};
use crate::CHUNK;
use graders::wire::transcript::Direction;
use serde_json::Map;
use std::io::{BufReader, Chain, Cursor, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

pub(super) type SharedWriter = Arc<Mutex<frame::Writer<UnixStream>>>;
/// The tap's frames: the first byte (read with the descriptors it carried), then the socket.
pub(super) type Control = BufReader<Chain<Cursor<Vec<u8>>, UnixStream>>;

pub(super) fn send(writer: &SharedWriter, kind: Kind, payload: &[u8]) -> std::io::Result<()> {
    writer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send(kind, payload)
}

/// The driver's bytes on their way into the app-server's stdin: recorded first, so an answer is
/// never recorded before what it answers.
/// Through the launch's transport timing when it has one (a withheld request is recorded as
/// the driver sent it, then the `timing` record that says it went no further).
struct Delivery<'a> {
    stdin: &'a StdinSlot,
    log: &'a LaunchLog,
    split: LineSplitter,
    refused_noted: bool,
    gate: Option<DriverGate>,
    shared: &'a Shared,
}

impl Delivery<'_> {
    fn deliver(&mut self, bytes: &[u8]) {
        match self.gate.take() {
            None => self.pass(bytes),
            Some(mut gate) => {
                gate.feed(bytes, &mut |gated| self.gated(gated));
                self.gate = Some(gate);
            }
        }
    }

    /// The driver's input ended: what the gate still holds goes on.
    fn finish(&mut self) {
        if let Some(mut gate) = self.gate.take() {
            gate.finish(&mut |gated| self.gated(gated));
        }
        self.split.finish(self.log);
    }

    fn gated(&mut self, gated: Gated) {
        match gated {
            Gated::Deliver(bytes) => self.pass(bytes),
            Gated::Withheld(line, record) => {
                self.split.feed(line, self.log);
                timed::record_timing(self.shared, self.log, record);
            }
        }
    }

    fn pass(&mut self, bytes: &[u8]) {
        self.split.feed(bytes, self.log);
        if !self.stdin.write(bytes, self.log) && !self.refused_noted {
            self.refused_noted = true;
            self.log.note(
                Direction::In,
                "the app-server's stdin is closed; the driver's further input was not delivered",
                None,
            );
        }
    }
}

/// What the stdin relay holds from one wake-up to the next.
struct StdinRelay<'a> {
    delivery: Delivery<'a>,
    mutated: Option<(&'a Mutex<WireMutation>, Side)>,
    driver_in: Option<OwnedFd>,
    // The driver closed its `codex`'s stdin when both ends agree: this end read the pipe to its
    // end, and the tap saw it hang up. The pipe alone would also end when a driver that killed
    // its `codex` exits, which no app-server would see as its stdin closing.
    tap_saw_hang_up: bool,
    log: &'a LaunchLog,
    killer: &'a Killer,
    shared: &'a Shared,
}

/// What woke the stdin relay.
struct Ready {
    control: bool,
    input: bool,
}

/// Why the stdin relay stops.
struct Stop;

impl StdinRelay<'_> {
    /// Frames the reader already holds are handled before waiting again.
    fn wait(&self, reader: &Control, control: BorrowedFd) -> Result<Option<Ready>, Stop> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        if !reader.buffer().is_empty() {
            return Ok(Some(Ready {
                control: true,
                input: false,
            }));
        }
        let mut fds = vec![PollFd::new(control, PollFlags::POLLIN)];
        if let Some(fd) = &self.driver_in {
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
        }
        // Unbounded on purpose: the connection ends with the tap, and `Recording::finish`
        // shuts it down when the cell ends.
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => return Ok(None),
            Err(_) => return Err(Stop),
        }
        fn ready(f: &PollFd) -> bool {
            f.revents().is_some_and(|r| !r.is_empty())
        }
        Ok(Some(Ready {
            control: ready(&fds[0]),
            input: fds.get(1).is_some_and(ready),
        }))
    }

    /// The driver's stdin is readable: its bytes go on, or its end is recorded.
    fn driver_input(&mut self, buf: &mut [u8]) {
        let fd = self.driver_in.as_ref().expect("polled only while open");
        match driver_io::read_ready(fd, buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok(n) if n > 0 => {
                let bytes = &buf[..n];
                self.shared.activity.fetch_add(n as u64, Ordering::Relaxed);
                let delivery = &mut self.delivery;
                match &mut self.mutated {
                    None => delivery.deliver(bytes),
                    Some((mutation, side)) => {
                        side.driver_sent(bytes, mutation, self.shared, self.log, &mut |b| {
                            delivery.deliver(b)
                        })
                    }
                }
            }
            // Its end (or a descriptor that cannot be read: the same to the app-server).
            _ => {
                self.driver_in = None;
                self.finish_input();
                if self.tap_saw_hang_up {
                    self.delivery.stdin.close_recorded(self.log);
                }
            }
        }
    }

    /// What the operator still holds goes on, and a last line without its newline is recorded.
    fn finish_input(&mut self) {
        let delivery = &mut self.delivery;
        if let Some((_, side)) = &mut self.mutated {
            side.finish(&mut |b| delivery.deliver(b));
        }
        delivery.finish();
    }

    /// One frame of the tap's.
    fn control_frame(&mut self, reader: &mut Control, payload: &mut Vec<u8>) -> Result<(), Stop> {
        match frame::read(reader, payload) {
            Ok(Some(Kind::StdinEof)) => {
                self.tap_saw_hang_up = true;
                if self.driver_in.is_none() {
                    self.delivery.stdin.close_recorded(self.log);
                }
            }
            Ok(Some(Kind::Signal)) => {
                let signal = payload
                    .get(..4)
                    .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                // Only what the tap passes on; anything else is not the tap's to ask for.
                if let Some(signal @ (libc::SIGTERM | libc::SIGINT | libc::SIGHUP)) = signal {
                    // Recorded before it is passed on: the app-server's exit that follows
                    // is the driver's doing, not a crash (graders::wire reads it).
                    let mut fields = serde_json::Map::new();
                    fields.insert("signal".into(), signal.into());
                    self.log.record("driver-signal", fields);
                    self.killer.signal(signal);
                }
            }
            Ok(Some(other)) => self.log.note(
                Direction::In,
                &format!("the tap sent an unexpected frame ({other:?}); ignored"),
                None,
            ),
            Ok(None) | Err(_) => return Err(Stop),
        }
        Ok(())
    }
}

/// The driver's stdin to the app-server (recorded first, so an answer is never recorded before
/// what it answers; through the cell's operator when it is mutated), its end (once the tap saw
/// it hang up too), and the tap's frames (signals). The connection's end before the app-server's exit means the driver let go
/// of its `codex`: the app-server is killed.
#[allow(clippy::too_many_arguments)]
pub(super) fn relay_stdin(
    reader: &mut Control,
    control: BorrowedFd,
    driver_in: OwnedFd,
    stdin: &StdinSlot,
    mutation: Option<&Mutex<WireMutation>>,
    timed: Option<&SharedTiming>,
    log: &LaunchLog,
    killer: &Killer,
    shared: &Shared,
) {
    let mut relay = StdinRelay {
        delivery: Delivery {
            stdin,
            log,
            split: LineSplitter::new(Direction::In),
            refused_noted: false,
            gate: timed.map(DriverGate::new),
            shared,
        },
        mutated: mutation.map(|m| (m, Side::new())),
        driver_in: Some(driver_in),
        tap_saw_hang_up: false,
        log,
        killer,
        shared,
    };
    let mut payload = Vec::with_capacity(CHUNK);
    let mut buf = vec![0u8; CHUNK];
    loop {
        let ready = match relay.wait(reader, control) {
            Ok(Some(ready)) => ready,
            Ok(None) => continue,
            Err(Stop) => break,
        };
        if ready.input {
            relay.driver_input(&mut buf);
        }
        if ready.control && relay.control_frame(reader, &mut payload).is_err() {
            break;
        }
    }
    if relay.driver_in.is_some() {
        relay.finish_input();
    }
    killer.kill("the tap's connection closed before the app-server's exit: the driver let go of its `codex`");
    // The driver's end of the pipe goes with its connection, as when it let go of a `codex` of
    // its own.
    stdin.close();
}

/// Read `from` to its end in chunks, handing each to `each`.
fn pump(mut from: impl Read, mut each: impl FnMut(&[u8])) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => each(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// Where the app-server's stdout goes: the driver's own stdout, handed over by its tap, until
/// the tap's connection ends; then the tap is told the output ended.
pub(super) struct ToDriver<'a> {
    pub(super) out: DriverOut,
    pub(super) writer: &'a SharedWriter,
    pub(super) tap_gone: &'a AtomicBool,
}

/// The app-server's stdout: recorded, then written to the driver (through the cell's operator
/// when it is mutated; `close-after-turn-start` ends both at its cut; through the launch's
/// transport timing when it has one). Recording goes on after the driver stopped reading, until
/// the stream ends.
pub(super) fn relay_stdout<R: Read + Send + 'static>(
    stdout: R,
    log: &LaunchLog,
    to_driver: ToDriver,
    shared: &Shared,
    mutated: Option<Mutated>,
    timed: Option<SharedTiming>,
) {
    let mut split = LineSplitter::new(Direction::Out);
    let mut driver_gone = false;
    // Bytes of the line in flight the driver has taken: when it stops reading with part of a
    // line taken, its end never reached the driver, even if the app-server finishes writing it
    // before it is stopped (and the line is then recorded whole).
    let mut taken_of_line: u64 = 0;
    let mut relay = |bytes: &[u8]| {
        if bytes.is_empty() || driver_gone {
            return;
        }
        match to_driver.out.write_all(bytes, to_driver.tap_gone) {
            Ok(()) => match bytes.iter().rposition(|b| *b == b'\n') {
                Some(end) => taken_of_line = (bytes.len() - end - 1) as u64,
                None => taken_of_line += bytes.len() as u64,
            },
            // The driver's end of the pipe closed, or its tap (its `codex`) went away.
            Err(e) => {
                driver_gone = true;
                if taken_of_line > 0 {
                    log.note_let_go_mid_line(taken_of_line);
                } else if e.kind() != std::io::ErrorKind::Interrupted {
                    log.note(
                        Direction::Out,
                        "the driver stopped reading the tap's stdout",
                        None,
                    );
                }
            }
        }
    };
    let mut side = mutated.as_ref().map(|_| Side::new());
    let mut each = |chunk: &[u8]| match (&mutated, &mut side) {
        // The operator decides what is recorded too: nothing after a cut.
        (Some(mutated), Some(side)) => side.server_sent(
            chunk,
            mutated,
            shared,
            log,
            &mut |bytes| split.feed(bytes, log),
            &mut relay,
        ),
        _ => {
            split.feed(chunk, log);
            relay(chunk);
        }
    };
    // A timing comes first: an operator sees the app-server's lines in the order the driver
    // gets them, as a driver with the operator's bug would.
    match &timed {
        Some(state) => timed::pump_server(stdout, state, log, shared, &mut each),
        None => pump(stdout, |chunk| {
            shared
                .activity
                .fetch_add(chunk.len() as u64, Ordering::Relaxed);
            each(chunk)
        }),
    }
    if let Some(side) = &mut side {
        side.finish_server(log, &mut |bytes| split.feed(bytes, log), &mut relay);
    }
    end_stdout(split, log, to_driver);
}

/// The app-server's stdout ended: recorded, and the driver told.
fn end_stdout(mut split: LineSplitter, log: &LaunchLog, to_driver: ToDriver) {
    split.finish(log);
    log.record("stdout-closed", Map::new());
    // The harness's copy of the driver's stdout closes before the tap closes its own, so the
    // driver reads the end of input once the tap has.
    let ToDriver { out, writer, .. } = to_driver;
    drop(out);
    let _ = send(writer, Kind::StdoutEof, b"");
}

/// The app-server's stderr: recorded (bounded) and relayed to the tap's stderr.
pub(super) fn relay_stderr(stderr: impl Read, log: &LaunchLog, writer: &SharedWriter) {
    let mut split = StderrSplitter::default();
    let mut tap_gone = false;
    pump(stderr, |chunk| {
        split.feed(chunk, log);
        if !tap_gone && send(writer, Kind::Stderr, chunk).is_err() {
            tap_gone = true;
        }
    });
    split.finish(log);
}
