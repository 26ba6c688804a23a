//! The tap, the program a driver runs as `codex` (`harness tap --socket PATH -- ARGS…`, run by
//! the `codex` shim): a thin relay. It connects to its cell's recorder (the harness, listening
//! on `PATH`), says what it was run with (argv, the names of its environment, its working
//! folder, its pid) and hands it its stdin and stdout (SCM_RIGHTS): the harness reads what the
//! driver writes and writes what the app-server answers on the driver's own pipes, so a round
//! trip costs the same two wake-ups of the harness as without a relay process in between, not
//! four more (`harness bench tap`). The tap tells the harness when its stdin hangs up (every
//! writer let go of it): the harness reading the end of the pipe it shares is not enough, since
//! a driver that kills its `codex` and then exits also ends that pipe, and the app-server would
//! never have seen its stdin close. The tap then passes on the app-server's stderr from the
//! harness. The app-server closing its stdout closes the tap's (the driver sees end of input
//! when the app-server's output ends, as without the tap); the tap ends as the app-server ended
//! (same exit code; a signal is re-raised). SIGTERM, SIGINT and SIGHUP sent to the tap are
//! passed on to the app-server.
//!
//! It records nothing and starts nothing: the harness starts the app-server and writes the
//! transcript ([`crate::session`]), where the driver cannot reach either. A tap whose recorder
//! is gone says so and exits 1 at once.

use crate::frame::{self, ExitFrame, Hello, Kind};
use crate::{socket, CHUNK};
use std::ffi::OsString;
use std::io::{BufReader, Write};
use std::os::fd::{BorrowedFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

type SharedWriter = Arc<Mutex<frame::Writer<UnixStream>>>;

fn fail(message: &str) -> ExitCode {
    tracing::warn!(target: "notice", "codex (harness tap): {message}");
    ExitCode::from(1)
}

/// Entry point: `args` excludes the program name and the `tap` subcommand.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let mut args = args.into_iter();
    let mut socket_path = None;
    let mut driver_args = Vec::new();
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--socket") => socket_path = args.next().map(PathBuf::from),
            Some("--") => {
                driver_args.extend(args.by_ref());
                break;
            }
            _ => {
                return fail(&format!(
                    "unexpected argument {arg:?} (usage: tap --socket PATH -- ARGS…)"
                ))
            }
        }
    }
    let Some(socket_path) = socket_path else {
        return fail("missing --socket PATH");
    };
    let stream = match socket::connect(&socket_path) {
        Ok(stream) => stream,
        Err(e) => {
            return fail(&format!(
                "cannot reach the harness's recorder at {}: {e} (its cell is over, or this `codex` runs outside its cell)",
                socket_path.display()
            ))
        }
    };
    let mut env_names: Vec<String> = std::env::vars_os()
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    env_names.sort();
    let hello = Hello {
        argv: driver_args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        env_names,
        cwd: std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
        pid: std::process::id(),
    };
    let reader = match stream.try_clone() {
        Ok(reader) => reader,
        Err(e) => return fail(&format!("the recorder's socket: {e}")),
    };
    let hello = serde_json::to_vec(&hello).expect("JSON");
    // SAFETY: fds 0 and 1 are open for the process's life (Rust's start-up opens /dev/null on
    // any that were closed); they are only borrowed for the call.
    let (stdin, stdout) = unsafe { (BorrowedFd::borrow_raw(0), BorrowedFd::borrow_raw(1)) };
    if let Err(e) = frame::send_with_fds(&stream, Kind::Hello, &hello, &[stdin, stdout]) {
        return fail(&format!("telling the recorder about this launch: {e}"));
    }
    let writer: SharedWriter = Arc::new(Mutex::new(frame::Writer::new(stream)));
    forward_signals(writer.clone());
    report_stdin_hang_up(writer.clone());
    relay_from_harness(reader)
}

fn send(writer: &SharedWriter, kind: Kind, payload: &[u8]) -> std::io::Result<()> {
    writer
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .send(kind, payload)
}

/// Pass SIGTERM, SIGINT and SIGHUP on to the app-server (through the harness).
fn forward_signals(writer: SharedWriter) {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP]) else {
        return;
    };
    std::thread::spawn(move || {
        for signal in signals.forever() {
            let _ = send(&writer, Kind::Signal, &signal.to_be_bytes());
        }
    });
}

/// Send `stdin-eof` once the tap's stdin hangs up: every process holding a writing end of the
/// pipe (or the other end of the socket) let go of it. The poll asks for the hang-up alone, so
/// the driver's bytes, which the harness reads from the same pipe, never wake the tap. A stdin
/// that cannot hang up (a file, `/dev/null`, a terminal) ends wherever its reader reaches the
/// end, so it is reported at once.
fn report_stdin_hang_up(writer: SharedWriter) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    std::thread::spawn(move || {
        // SAFETY: fd 0 is open for the process's life; it is only borrowed.
        let stdin = unsafe { BorrowedFd::borrow_raw(0) };
        let can_hang_up = nix::sys::stat::fstat(stdin).is_ok_and(|stat| {
            let kind = stat.st_mode & libc::S_IFMT;
            kind == libc::S_IFIFO || kind == libc::S_IFSOCK
        });
        if can_hang_up {
            loop {
                // nix has no name for POLLRDHUP: a socket whose peer shut its writing side
                // reports it.
                let mut fds = [PollFd::new(
                    stdin,
                    PollFlags::from_bits_retain(libc::POLLRDHUP),
                )];
                // Unbounded on purpose: the thread ends with the tap, which ends with the
                // app-server's exit or its recorder's going.
                // The count, not `revents()`: nix reads revents as known flags only, and
                // POLLRDHUP is not one of them (a socket's hang-up read as nothing, the loop
                // spun).
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(ready) if ready > 0 => break,
                    Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => break,
                }
            }
        }
        let _ = send(&writer, Kind::StdinEof, b"");
    });
}

/// What the harness sends, to the tap's stderr, until the app-server's exit.
fn relay_from_harness(reader: UnixStream) -> ExitCode {
    let mut reader = BufReader::with_capacity(CHUNK + 5, reader);
    // SAFETY: fd 2 is open for the process's life; ManuallyDrop never closes it. Unbuffered so
    // every chunk reaches the driver when it arrives.
    let mut stderr = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(2) });
    let mut payload = Vec::with_capacity(CHUNK);
    loop {
        let kind = match frame::read(&mut reader, &mut payload) {
            Ok(Some(kind)) => kind,
            Ok(None) => {
                return fail("the harness's recorder closed the connection before the app-server's exit (its cell ended)")
            }
            Err(e) => return fail(&format!("reading from the harness's recorder: {e}")),
        };
        match kind {
            Kind::Stderr => {
                let _ = stderr.write_all(&payload);
            }
            Kind::StdoutEof => close_stdout(),
            Kind::Exit => {
                let exit: ExitFrame = match serde_json::from_slice(&payload) {
                    Ok(exit) => exit,
                    Err(e) => return fail(&format!("the recorder's exit frame: {e}")),
                };
                return end_as(&exit);
            }
            other => return fail(&format!("unexpected frame {other:?} from the recorder")),
        }
    }
}

/// The app-server closed its stdout: so does the tap (fd 1 now points at `/dev/null`), and the
/// driver reads end of input.
fn close_stdout() {
    // SAFETY: plain system calls on this process's own descriptors.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if null >= 0 {
            libc::dup2(null, 1);
            libc::close(null);
        } else {
            libc::close(1);
        }
    }
}

/// End the tap as the app-server ended, so the driver sees the same ending.
fn end_as(exit: &ExitFrame) -> ExitCode {
    if let Some(error) = &exit.error {
        return fail(error);
    }
    if let Some(signal) = exit.signal {
        // SAFETY: resetting a disposition and signalling ourselves have no preconditions.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
        }
        // A signal that does not end the process (e.g. SIGCHLD) falls through to the exit code.
        std::thread::sleep(Duration::from_millis(50));
    }
    ExitCode::from(exit.status.unwrap_or(1).clamp(0, 255) as u8)
}
