//! One launch, from the tap's hello to the app-server's exit: the app-server started through
//! the cell's [`Spawn`], its stdin fed from the driver's stdin (handed over with the hello), its
//! stdout recorded and written to the driver's stdout, its stderr recorded and relayed through
//! the tap, its exit recorded once its output drained.

use super::driver_io::{self, DriverOut};
use super::mutate::{Mutated, Side, StdinSlot};
use super::{LaunchRequest, Live, Shared, Spawned};
use crate::argv::{app_server_args, launches_server};
use crate::frame::{self, ExitFrame, Hello, Kind};
use crate::mutation::WireMutation;
use crate::record::{now_ms, Direction, LaunchLog, LineSplitter, StderrSplitter};
use crate::CHUNK;
use graders::wire::transcript::MAX_LAUNCHES;
use serde_json::{json, Map, Value};
use std::io::{BufReader, Chain, Cursor, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a tap has to say what it was run with.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// After the app-server exited, how long its stdout may still be drained (a helper it left
/// behind may hold the pipe open).
pub(super) const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// Kills or signals one app-server, never after it was reaped (its pid could be another
/// process's by then): the waiter marks it exited, under the same lock, before reaping it.
pub(super) struct Killer {
    pid: i32,
    state: Mutex<KillState>,
}

#[derive(Default)]
struct KillState {
    exited: bool,
    killed_by: Option<String>,
}

impl Killer {
    pub(super) fn kill(&self, why: &str) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.exited {
            return;
        }
        state.killed_by.get_or_insert_with(|| why.to_string());
        // The app-server leads its own process group: what it started goes with it.
        // SAFETY: kill has no memory-safety preconditions.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL);
        }
    }

    fn signal(&self, signal: i32) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if !state.exited {
            // SAFETY: as above.
            unsafe {
                libc::kill(self.pid, signal);
            }
        }
    }

    fn exited(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).exited = true;
    }

    fn killed_by(&self) -> Option<String> {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .killed_by
            .clone()
    }
}

type SharedWriter = Arc<Mutex<frame::Writer<UnixStream>>>;
/// The tap's frames: the first byte (read with the descriptors it carried), then the socket.
type Control = BufReader<Chain<Cursor<Vec<u8>>, UnixStream>>;

fn send(writer: &SharedWriter, kind: Kind, payload: &[u8]) -> std::io::Result<()> {
    writer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send(kind, payload)
}

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// One launch, from the tap's hello to the app-server's exit.
pub(super) fn run_launch(shared: &Arc<Shared>, launch: u64, stream: UnixStream, live: &Live) {
    let log = Arc::new(shared.transcript.launch(launch));
    let Ok(writer_stream) = stream.try_clone() else {
        return;
    };
    let writer: SharedWriter = Arc::new(Mutex::new(frame::Writer::new(writer_stream)));
    let refuse = |error: String| {
        let exit = ExitFrame {
            status: None,
            signal: None,
            error: Some(error),
        };
        let _ = send(
            &writer,
            Kind::Exit,
            &serde_json::to_vec(&exit).expect("JSON"),
        );
    };
    let _ = stream.set_read_timeout(Some(HELLO_TIMEOUT));
    let (first, handed) = match frame::recv_first_byte_with_fds(&stream) {
        Ok(Some((byte, fds))) => (Ok(vec![byte]), fds),
        Ok(None) => (
            Err("it closed before saying anything".to_string()),
            Vec::new(),
        ),
        Err(e) => (Err(e.to_string()), Vec::new()),
    };
    let Ok(control_stream) = stream.try_clone() else {
        return;
    };
    let mut reader: Control = BufReader::with_capacity(
        CHUNK + 5,
        Cursor::new(first.clone().unwrap_or_default()).chain(control_stream),
    );
    let mut payload = Vec::with_capacity(CHUNK);
    let hello = first.and_then(|_| match frame::read(&mut reader, &mut payload) {
        Ok(Some(Kind::Hello)) => {
            serde_json::from_slice::<Hello>(&payload).map_err(|e| e.to_string())
        }
        Ok(other) => Err(format!(
            "its first frame was {other:?}, not the tap's hello"
        )),
        Err(e) => Err(e.to_string()),
    });
    let _ = stream.set_read_timeout(None);
    let hello = hello.and_then(|hello| match <[OwnedFd; 2]>::try_from(handed) {
        Ok([driver_in, driver_out]) => Ok((hello, driver_in, DriverOut::new(driver_out))),
        Err(handed) => Err(format!(
            "its hello came with {} descriptors, not the tap's stdin and stdout",
            handed.len()
        )),
    });
    let started = now_ms();
    let (hello, driver_in, driver_out) = match hello {
        Ok(hello) => hello,
        Err(why) => {
            // Whatever connects is recorded: a connection that is not a tap's is the driver's
            // own doing.
            log.record_at(
                "launch",
                started,
                fields(json!({"argv": [], "env_names": [], "error": format!("a connection to the tap's socket that did not introduce itself: {why}")})),
            );
            log.record(
                "exit",
                fields(
                    json!({"status": null, "signal": null, "error": "no app-server was started"}),
                ),
            );
            return;
        }
    };
    let args = app_server_args(&shared.setup.prefix, &hello.argv, &shared.setup.server_args);
    let added: Vec<&String> = if launches_server(&hello.argv) {
        shared.setup.server_args.iter().collect()
    } else {
        Vec::new()
    };
    let mut record = fields(json!({
        "argv": hello.argv,
        "env_names": hello.env_names,
        "cwd": hello.cwd,
        "program": shared.setup.program,
        "app_server_args": args,
        "added_args": added,
        "pid": hello.pid,
    }));
    let refused = if launch as usize > MAX_LAUNCHES {
        Some(format!(
            "more than {MAX_LAUNCHES} launches in one cell: this one was refused"
        ))
    } else if shared.closed.load(Ordering::SeqCst) {
        Some("the cell's recording is over".to_string())
    } else {
        None
    };
    if let Some(why) = refused {
        if launch as usize <= MAX_LAUNCHES + 1 {
            log.record_at("launch", started, record);
            log.record(
                "exit",
                fields(json!({"status": null, "signal": null, "error": why})),
            );
        }
        refuse(why);
        return;
    }
    let spawner = shared
        .spawner
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let env = app_server_env(&shared.setup, &hello.env_names);
    let spawned = match spawner {
        Some(spawner) => spawner
            .spawn(&LaunchRequest {
                program: &shared.setup.program,
                args: &args,
                env: &env,
                tap_cwd: Path::new(&hello.cwd),
            })
            .map_err(|e| format!("cannot start {}: {e:#}", shared.setup.program.display())),
        None => Err("the cell's recording is over".to_string()),
    };
    let Spawned {
        mut child,
        cwd,
        guard,
    } = match spawned {
        Ok(spawned) => spawned,
        Err(message) => {
            log.record_at("launch", started, record);
            log.record(
                "exit",
                fields(json!({"status": null, "signal": null, "error": message})),
            );
            refuse(message);
            return;
        }
    };
    record.insert("app_server_pid".into(), child.id().into());
    record.insert("app_server_cwd".into(), cwd.display().to_string().into());
    log.record_at("launch", started, record);
    let killer = Arc::new(Killer {
        pid: child.id() as i32,
        state: Mutex::new(KillState::default()),
    });
    *live.killer.lock().unwrap_or_else(|p| p.into_inner()) = Some(killer.clone());

    let stdin = Arc::new(StdinSlot::new(child.stdin.take().expect("piped")));
    // Only a mutated cell's relays look into the lines.
    let mutation = shared
        .mutation
        .filter(|op| op.on_the_wire())
        .map(|op| Arc::new(Mutex::new(WireMutation::new(op))));
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let (drained_tx, drained_rx) = mpsc::channel::<()>();
    // Set when the tap's connection ended: the driver let go of its `codex`, so nothing more is
    // written to its stdout (the app-server's output is still recorded).
    let tap_gone = Arc::new(AtomicBool::new(false));
    let out = {
        let (log, writer, shared, drained, tap_gone) = (
            log.clone(),
            writer.clone(),
            shared.clone(),
            drained_tx.clone(),
            tap_gone.clone(),
        );
        let mutated = mutation.as_ref().map(|m| Mutated::new(m, &stdin, &killer));
        std::thread::spawn(move || {
            let to_driver = ToDriver {
                out: driver_out,
                writer: &writer,
                tap_gone: &tap_gone,
            };
            relay_stdout(stdout, &log, to_driver, &shared, mutated);
            let _ = drained.send(());
        })
    };
    let err = {
        let (log, writer) = (log.clone(), writer.clone());
        std::thread::spawn(move || {
            relay_stderr(stderr, &log, &writer);
            let _ = drained_tx.send(());
        })
    };
    let waiter = {
        let (log, writer, killer) = (log.clone(), writer.clone(), killer.clone());
        std::thread::spawn(move || {
            let (status, exited_at) = wait(&mut child, &killer);
            // Both output streams, each until its end or the drain bound.
            let deadline = Instant::now() + DRAIN_AFTER_EXIT;
            for _ in 0..2 {
                let left = deadline.saturating_duration_since(Instant::now());
                if drained_rx.recv_timeout(left).is_err() {
                    break;
                }
            }
            let exit = match status {
                Ok(status) => ExitFrame {
                    status: status.code(),
                    signal: status.signal(),
                    error: None,
                },
                Err(e) => ExitFrame {
                    status: None,
                    signal: None,
                    error: Some(format!("waiting for the app-server: {e}")),
                },
            };
            let mut fields =
                fields(json!({"status": exit.status, "signal": exit.signal, "error": exit.error}));
            if let Some(why) = killer.killed_by() {
                fields.insert("killed_by_harness".into(), why.into());
            }
            // Timed when it exited, not when its output had drained.
            log.record_at("exit", exited_at, fields);
            let _ = send(
                &writer,
                Kind::Exit,
                &serde_json::to_vec(&exit).expect("JSON"),
            );
            drop(guard);
        })
    };
    relay_stdin(
        &mut reader,
        stream.as_fd(),
        driver_in,
        &stdin,
        mutation.as_deref(),
        &log,
        &killer,
        shared,
    );
    tap_gone.store(true, Ordering::SeqCst);
    let _ = waiter.join();
    let _ = out.join();
    let _ = err.join();
}

/// Wait for the app-server's end without reaping it first, so no kill can reach a reused pid;
/// its status, and when it ended (unix ms).
fn wait(child: &mut Child, killer: &Killer) -> (std::io::Result<std::process::ExitStatus>, u64) {
    use nix::sys::wait::{waitid, Id, WaitPidFlag};
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    loop {
        match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => break,
        }
    }
    let exited_at = now_ms();
    killer.exited();
    (child.wait(), exited_at)
}

/// The driver's stdin to the app-server (recorded first, so an answer is never recorded before
/// what it answers; through the cell's operator when it is mutated), its end (once the tap saw
/// it hang up too), and the tap's frames (signals). The connection's end before the app-server's exit means the driver let go
/// of its `codex`: the app-server is killed.
#[allow(clippy::too_many_arguments)]
fn relay_stdin(
    reader: &mut Control,
    control: BorrowedFd,
    driver_in: OwnedFd,
    stdin: &StdinSlot,
    mutation: Option<&Mutex<WireMutation>>,
    log: &LaunchLog,
    killer: &Killer,
    shared: &Shared,
) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut split = LineSplitter::new(Direction::In);
    let mut payload = Vec::with_capacity(CHUNK);
    let mut buf = vec![0u8; CHUNK];
    let mut refused_noted = false;
    let mut deliver = |bytes: &[u8], split: &mut LineSplitter| {
        split.feed(bytes, log);
        if !stdin.write(bytes, log) && !refused_noted {
            refused_noted = true;
            log.note(
                Direction::In,
                "the app-server's stdin is closed; the driver's further input was not delivered",
                None,
            );
        }
    };
    let mut mutated = mutation.map(|m| (m, Side::new()));
    let mut driver_in = Some(driver_in);
    // The driver closed its `codex`'s stdin when both ends agree: this end read the pipe to its
    // end, and the tap saw it hang up. The pipe alone would also end when a driver that killed
    // its `codex` exits, which no app-server would see as its stdin closing.
    let mut tap_saw_hang_up = false;
    let close_input = || stdin.close_recorded(log);
    loop {
        // Frames the reader already holds are handled before waiting again.
        let mut control_ready = !reader.buffer().is_empty();
        let mut input_ready = false;
        if !control_ready {
            let mut fds = vec![PollFd::new(control, PollFlags::POLLIN)];
            if let Some(fd) = &driver_in {
                fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
            }
            // Unbounded on purpose: the connection ends with the tap, and `Recording::finish`
            // shuts it down when the cell ends.
            match poll(&mut fds, PollTimeout::NONE) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => continue,
                Err(_) => break,
            }
            fn ready(f: &PollFd) -> bool {
                f.revents().is_some_and(|r| !r.is_empty())
            }
            control_ready = ready(&fds[0]);
            input_ready = fds.get(1).is_some_and(ready);
        }
        if input_ready {
            let fd = driver_in.as_ref().expect("polled only while open");
            match driver_io::read_ready(fd, &mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Ok(n) if n > 0 => {
                    let bytes = &buf[..n];
                    shared.activity.fetch_add(n as u64, Ordering::Relaxed);
                    match &mut mutated {
                        None => deliver(bytes, &mut split),
                        Some((mutation, side)) => {
                            side.driver_sent(bytes, mutation, shared, log, &mut |b| {
                                deliver(b, &mut split)
                            })
                        }
                    }
                }
                // Its end (or a descriptor that cannot be read: the same to the app-server).
                _ => {
                    driver_in = None;
                    if let Some((_, side)) = &mut mutated {
                        side.finish(&mut |b| deliver(b, &mut split));
                    }
                    split.finish(log);
                    if tap_saw_hang_up {
                        close_input();
                    }
                }
            }
        }
        if control_ready {
            match frame::read(reader, &mut payload) {
                Ok(Some(Kind::StdinEof)) => {
                    tap_saw_hang_up = true;
                    if driver_in.is_none() {
                        close_input();
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
                        log.record("driver-signal", fields);
                        killer.signal(signal);
                    }
                }
                Ok(Some(other)) => log.note(
                    Direction::In,
                    &format!("the tap sent an unexpected frame ({other:?}); ignored"),
                    None,
                ),
                Ok(None) | Err(_) => break,
            }
        }
    }
    if driver_in.is_some() {
        if let Some((_, side)) = &mut mutated {
            side.finish(&mut |b| deliver(b, &mut split));
        }
        split.finish(log);
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
struct ToDriver<'a> {
    out: DriverOut,
    writer: &'a SharedWriter,
    tap_gone: &'a AtomicBool,
}

/// The app-server's stdout: recorded, then written to the driver (through the cell's operator
/// when it is mutated; `close-after-turn-start` ends both at its cut). Recording goes on after
/// the driver stopped reading, until the stream ends.
fn relay_stdout(
    stdout: impl Read,
    log: &LaunchLog,
    to_driver: ToDriver,
    shared: &Shared,
    mutated: Option<Mutated>,
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
    pump(stdout, |chunk| {
        shared
            .activity
            .fetch_add(chunk.len() as u64, Ordering::Relaxed);
        match (&mutated, &mut side) {
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
        }
    });
    if let Some(side) = &mut side {
        side.finish_server(log, &mut |bytes| split.feed(bytes, log), &mut relay);
    }
    split.finish(log);
    log.record("stdout-closed", Map::new());
    // The harness's copy of the driver's stdout closes before the tap closes its own, so the
    // driver reads the end of input once the tap has.
    let ToDriver { out, writer, .. } = to_driver;
    drop(out);
    let _ = send(writer, Kind::StdoutEof, b"");
}

/// The app-server's stderr: recorded (bounded) and relayed to the tap's stderr.
fn relay_stderr(stderr: impl Read, log: &LaunchLog, writer: &SharedWriter) {
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

/// The app-server's environment: the cell's, plus each variable of `setup.inherit_env` whose
/// name the driver's `codex` had in its environment, as the real `codex` would inherit it. The
/// tap sends names only, so the value is the harness's own (the canary it planted): whatever
/// the driver put there, what reaches the app-server is what the driver was given.
fn app_server_env(
    setup: &super::AppServerSetup,
    driver_env_names: &[String],
) -> Vec<(String, String)> {
    let mut env = setup.env.clone();
    env.extend(
        setup
            .inherit_env
            .iter()
            .filter(|(name, _)| driver_env_names.contains(name))
            .cloned(),
    );
    env
}
