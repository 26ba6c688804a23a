//! One launch, from the tap's hello to the app-server's exit: the app-server started through
//! the cell's [`Spawn`], its stdin fed from the driver's stdin (handed over with the hello), its
//! stdout recorded and written to the driver's stdout, its stderr recorded and relayed through
//! the tap, its exit recorded once its output drained.

use super::driver_io::DriverOut;
use super::killer::Killer;
use super::mutate::{Mutated, StdinSlot};
use super::relays::{
    relay_stderr, relay_stdin, relay_stdout, send, Control, SharedWriter, ToDriver,
};
use super::timed::SharedTiming;
use super::{LaunchRequest, Live, Shared, Spawned};
use crate::argv::{app_server_args, launches_server};
use crate::frame::{self, ExitFrame, Hello, Kind};
use crate::mutation::WireMutation;
use crate::record::LaunchLog;
use crate::timing::TimingState;
use crate::CHUNK;
use graders::events::now_ms;
use graders::wire::transcript::MAX_LAUNCHES;
use serde_json::{json, Map, Value};
use std::io::{BufReader, Cursor, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a tap has to say what it was run with.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// After the app-server exited, how long its stdout may still be drained (a helper it left
/// behind may hold the pipe open).
pub(super) const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Tells the tap no app-server runs for it, and why.
fn refuse(writer: &SharedWriter, error: String) {
    let exit = ExitFrame {
        status: None,
        signal: None,
        error: Some(error),
    };
    let _ = send(
        writer,
        Kind::Exit,
        &serde_json::to_vec(&exit).expect("JSON"),
    );
}

/// What a tap says when it connects: what it was run with, and the driver's stdin and stdout.
struct Greeting {
    hello: Hello,
    driver_in: OwnedFd,
    driver_out: DriverOut,
}

/// The tap's hello (within [`HELLO_TIMEOUT`]) with the reader of its later frames; `None` when
/// the connection cannot be read from a second handle.
fn receive_hello(stream: &UnixStream) -> Option<(Control, Result<Greeting, String>)> {
    let _ = stream.set_read_timeout(Some(HELLO_TIMEOUT));
    let (first, handed) = match frame::recv_first_byte_with_fds(stream) {
        Ok(Some((byte, fds))) => (Ok(vec![byte]), fds),
        Ok(None) => (
            Err("it closed before saying anything".to_string()),
            Vec::new(),
        ),
        Err(e) => (Err(e.to_string()), Vec::new()),
    };
    let control_stream = stream.try_clone().ok()?;
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
    let greeting = hello.and_then(|hello| match <[OwnedFd; 2]>::try_from(handed) {
        Ok([driver_in, driver_out]) => Ok(Greeting {
            hello,
            driver_in,
            driver_out: DriverOut::new(driver_out),
        }),
        Err(handed) => Err(format!(
            "its hello came with {} descriptors, not the tap's stdin and stdout",
            handed.len()
        )),
    });
    Some((reader, greeting))
}

/// Why this launch gets no app-server before one is started, if it gets none.
fn refusal(shared: &Shared, launch: u64) -> Option<String> {
    if launch as usize > MAX_LAUNCHES {
        Some(format!(
            "more than {MAX_LAUNCHES} launches in one cell: this one was refused"
        ))
    } else if shared.closed.load(Ordering::SeqCst) {
        Some("the cell's recording is over".to_string())
    } else {
        None
    }
}

/// The app-server for this launch, started through the cell's spawner (gone once the recording
/// is over).
fn start_app_server(shared: &Shared, args: &[String], hello: &Hello) -> Result<Spawned, String> {
    let spawner = shared
        .spawner
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    let env = app_server_env(&shared.setup, &hello.env_names);
    match spawner {
        Some(spawner) => spawner
            .spawn(&LaunchRequest {
                program: &shared.setup.program,
                args,
                env: &env,
                tap_cwd: Path::new(&hello.cwd),
            })
            .map_err(|e| format!("cannot start {}: {e:#}", shared.setup.program.display())),
        None => Err("the cell's recording is over".to_string()),
    }
}

/// Whatever connects is recorded: a connection that is not a tap's is the driver's own doing.
fn record_stranger(log: &LaunchLog, started: u64, why: &str) {
    log.record_at(
        "launch",
        started,
        fields(json!({"argv": [], "env_names": [], "error": format!("a connection to the tap's socket that did not introduce itself: {why}")})),
    );
    log.record(
        "exit",
        fields(json!({"status": null, "signal": null, "error": "no app-server was started"})),
    );
}

/// A launch whose app-server was not started: its record, and an exit saying why.
fn record_unstarted(log: &LaunchLog, started: u64, record: Map<String, Value>, why: &str) {
    log.record_at("launch", started, record);
    log.record(
        "exit",
        fields(json!({"status": null, "signal": null, "error": why})),
    );
}

/// The launch's app-server, started, with its launch recorded; `None` when the launch was
/// refused or the app-server could not start (recorded, and the tap told why).
fn start_recorded(
    shared: &Shared,
    launch: u64,
    hello: &Hello,
    started: u64,
    log: &LaunchLog,
    writer: &SharedWriter,
) -> Option<Spawned> {
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
    if let Some(why) = refusal(shared, launch) {
        if launch as usize <= MAX_LAUNCHES + 1 {
            record_unstarted(log, started, record, &why);
        }
        refuse(writer, why);
        return None;
    }
    let spawned = match start_app_server(shared, &args, hello) {
        Ok(spawned) => spawned,
        Err(message) => {
            record_unstarted(log, started, record, &message);
            refuse(writer, message);
            return None;
        }
    };
    record.insert("app_server_pid".into(), spawned.child.id().into());
    record.insert(
        "app_server_cwd".into(),
        spawned.cwd.display().to_string().into(),
    );
    log.record_at("launch", started, record);
    Some(spawned)
}

/// One launch, from the tap's hello to the app-server's exit.
pub(super) fn run_launch(shared: &Arc<Shared>, launch: u64, stream: UnixStream, live: &Live) {
    let log = Arc::new(shared.transcript.launch(launch));
    let Ok(writer_stream) = stream.try_clone() else {
        return;
    };
    let writer: SharedWriter = Arc::new(Mutex::new(frame::Writer::new(writer_stream)));
    let Some((mut reader, greeting)) = receive_hello(&stream) else {
        return;
    };
    let started = now_ms();
    let Greeting {
        hello,
        driver_in,
        driver_out,
    } = match greeting {
        Ok(greeting) => greeting,
        Err(why) => {
            record_stranger(&log, started, &why);
            return;
        }
    };
    let Some(Spawned {
        mut child,
        cwd: _,
        guard,
    }) = start_recorded(shared, launch, &hello, started, &log, &writer)
    else {
        return;
    };
    let killer = Arc::new(Killer::new(child.id() as i32));
    *live.killer.lock().unwrap_or_else(|p| p.into_inner()) = Some(killer.clone());

    let stdin = Arc::new(StdinSlot::new(child.stdin.take().expect("piped")));
    // Only a mutated cell's relays look into the lines.
    let mutation = shared
        .mutation
        .filter(|op| op.on_the_wire())
        .map(|op| Arc::new(Mutex::new(WireMutation::new(op))));
    // A cell's transport timing, mutated or not: the mutants of `harness mutate` meet the
    // app-server as the unmutated run did.
    let timed: Option<SharedTiming> = shared
        .timing
        .as_ref()
        .filter(|timing| !timing.is_empty())
        .map(|timing| Arc::new(Mutex::new(TimingState::new(timing.clone()))));
    let (drained_tx, drained_rx) = mpsc::channel::<()>();
    // Set when the tap's connection ended: the driver let go of its `codex`, so nothing more is
    // written to its stdout (the app-server's output is still recorded).
    let tap_gone = Arc::new(AtomicBool::new(false));
    let out = spawn_stdout_relay(
        child.stdout.take().expect("piped"),
        &log,
        &writer,
        shared,
        driver_out,
        &tap_gone,
        mutation.as_ref().map(|m| Mutated::new(m, &stdin, &killer)),
        timed.clone(),
        drained_tx.clone(),
    );
    let err = spawn_stderr_relay(
        child.stderr.take().expect("piped"),
        &log,
        &writer,
        drained_tx,
    );
    let waiter = spawn_waiter(
        child,
        killer.clone(),
        log.clone(),
        writer.clone(),
        drained_rx,
        guard,
    );
    relay_stdin(
        &mut reader,
        stream.as_fd(),
        driver_in,
        &stdin,
        mutation.as_deref(),
        timed.as_ref(),
        &log,
        &killer,
        shared,
    );
    tap_gone.store(true, Ordering::SeqCst);
    let _ = waiter.join();
    let _ = out.join();
    let _ = err.join();
}

/// The app-server's stdout to the driver, on its own thread, which says on `drained` when the
/// stream ended.
#[allow(clippy::too_many_arguments)]
fn spawn_stdout_relay(
    stdout: ChildStdout,
    log: &Arc<LaunchLog>,
    writer: &SharedWriter,
    shared: &Arc<Shared>,
    driver_out: DriverOut,
    tap_gone: &Arc<AtomicBool>,
    mutated: Option<Mutated>,
    timed: Option<SharedTiming>,
    drained: mpsc::Sender<()>,
) -> JoinHandle<()> {
    let (log, writer, shared, tap_gone) = (
        log.clone(),
        writer.clone(),
        shared.clone(),
        tap_gone.clone(),
    );
    std::thread::spawn(move || {
        let to_driver = ToDriver {
            out: driver_out,
            writer: &writer,
            tap_gone: &tap_gone,
        };
        relay_stdout(stdout, &log, to_driver, &shared, mutated, timed);
        let _ = drained.send(());
    })
}

/// The app-server's stderr to the tap, on its own thread, which says on `drained` when the
/// stream ended.
fn spawn_stderr_relay(
    stderr: ChildStderr,
    log: &Arc<LaunchLog>,
    writer: &SharedWriter,
    drained: mpsc::Sender<()>,
) -> JoinHandle<()> {
    let (log, writer) = (log.clone(), writer.clone());
    std::thread::spawn(move || {
        relay_stderr(stderr, &log, &writer);
        let _ = drained.send(());
    })
}

/// The waiter: the app-server's exit, recorded and told to the tap once both output streams
/// drained (or the drain bound passed); what had to live as long as the process goes after.
fn spawn_waiter(
    mut child: Child,
    killer: Arc<Killer>,
    log: Arc<LaunchLog>,
    writer: SharedWriter,
    drained: mpsc::Receiver<()>,
    guard: Box<dyn Send>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let (status, exited_at) = wait(&mut child, &killer);
        // Both output streams, each until its end or the drain bound.
        let deadline = Instant::now() + DRAIN_AFTER_EXIT;
        for _ in 0..2 {
            let left = deadline.saturating_duration_since(Instant::now());
            if drained.recv_timeout(left).is_err() {
                break;
            }
        }
        let exit = exit_frame(status);
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
}

fn exit_frame(status: std::io::Result<ExitStatus>) -> ExitFrame {
    match status {
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
    }
}

/// Wait for the app-server's end without reaping it first, so no kill can reach a reused pid;
/// its status, and when it ended (unix ms).
fn wait(child: &mut Child, killer: &Killer) -> (std::io::Result<ExitStatus>, u64) {
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
