//! The harness's end of the tap: the recorder of one cell. It listens on the cell's socket;
//! each connection of a tap is one **launch**: the recorder starts the app-server (through a
//! [`Spawn`], the cell's launcher: the host, or a container of the cell's environment) with
//! the driver's arguments and the cell's, relays every byte both ways between the tap and the
//! app-server, and records each at its own end — complete (a last line without its newline is
//! kept, marked partial), with the app-server's stderr (bounded), its stdout closing and its
//! exit. The transcript is written here and nowhere else.
//!
//! The tap hands over the driver's stdin and stdout with its hello, so the recorder reads and
//! writes the driver's own pipes (a round trip wakes no relay process). Threads, per launch: the
//! connection (the driver's stdin → the app-server's stdin, and the tap's frames: signals),
//! stdout (the app-server → the recorder → the driver), stderr (the app-server → the recorder →
//! the tap), and the waiter (the exit, recorded once stdout has drained). The app-server's output is read and recorded whether or
//! not the driver reads it on: a driver that stops reading stops the relay (as a pipe would),
//! and what the app-server had written by then is in the transcript when the cell ends.
//!
//! An app-server outlives its launch only while its tap is connected: when the tap's connection
//! closes (the driver killed its `codex`, or ended), the recorder kills it and says so in its
//! `exit` record (`killed_by_harness`), as a tap killed with its driver took its app-server
//! along before.

use crate::mutation::Operator;
use crate::record::{Seal, Transcript};
use crate::socket;
use crate::timing::Timing;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

mod driver_io;
mod killer;
mod launch;
mod lines;
mod mutate;
mod relays;
#[cfg(test)]
mod test_launch;
mod timed;

use killer::Killer;
use launch::{run_launch, DRAIN_AFTER_EXIT};

/// What every launch of a cell starts: the app-server's program, the arguments around the
/// driver's, and its complete environment (nothing of the driver's is passed on; its names are
/// recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppServerSetup {
    /// The real app-server program (the fake's binary, or the real Codex).
    pub program: PathBuf,
    /// Arguments before the driver's own (`["fake-app-server"]` for the embedded fake).
    pub prefix: Vec<String>,
    /// Arguments the cell adds after the driver's own when it launches the server
    /// (`app-server`, not `--version` or `app-server generate-json-schema`): the fake's
    /// scenario, or the real Codex's mock model provider.
    pub server_args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Variables the app-server gets when the driver's `codex` had them in its environment
    /// (by name): the canary secrets the harness planted in the driver's environment, so what a
    /// driver hands its app-server is what the model's commands see.
    pub inherit_env: Vec<(String, String)>,
}

/// One app-server to start.
#[derive(Debug)]
pub struct LaunchRequest<'a> {
    pub program: &'a Path,
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    /// The tap's working folder (the app-server's when it exists where the app-server runs).
    pub tap_cwd: &'a Path,
}

/// An app-server started with its stdin, stdout and stderr piped.
pub struct Spawned {
    pub child: Child,
    /// The folder it was started in.
    pub cwd: PathBuf,
    /// What must live as long as the process (a container), dropped after it ended.
    pub guard: Box<dyn Send>,
}

/// Where app-servers start: the cell's launcher.
pub trait Spawn: Send + Sync {
    fn spawn(&self, request: &LaunchRequest) -> anyhow::Result<Spawned>;
}

/// Starts the app-server on this host, in the tap's folder (tests, `harness bench tap`).
pub struct HostSpawn;

impl Spawn for HostSpawn {
    fn spawn(&self, request: &LaunchRequest) -> anyhow::Result<Spawned> {
        use std::os::unix::process::CommandExt;
        let cwd = if request.tap_cwd.is_dir() {
            request.tap_cwd.to_path_buf()
        } else {
            PathBuf::from("/")
        };
        let child = std::process::Command::new(request.program)
            .args(request.args)
            .env_clear()
            .envs(request.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&cwd)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .spawn()?;
        Ok(Spawned {
            child,
            cwd,
            guard: Box::new(()),
        })
    }
}

/// A launch still running, as [`Recording::finish`] sees it.
struct Live {
    killer: Mutex<Option<Arc<Killer>>>,
    stream: UnixStream,
    done: Mutex<bool>,
    ended: Condvar,
}

impl Live {
    fn mark_done(&self) {
        *self.done.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.ended.notify_all();
    }

    /// Wait until the launch is done or `deadline`; whether it is done.
    fn wait_until(&self, deadline: Instant) -> bool {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            done = self
                .ended
                .wait_timeout(done, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

struct Shared {
    transcript: Arc<Transcript>,
    setup: AppServerSetup,
    spawner: Mutex<Option<Arc<dyn Spawn>>>,
    next_launch: AtomicU64,
    closed: AtomicBool,
    launches: Mutex<Vec<Arc<Live>>>,
    /// Bytes recorded or relayed, both ways: the wire's activity.
    activity: AtomicU64,
    /// The cell's mutation operator (`harness mutate`), `None` for an ordinary cell.
    mutation: Option<Operator>,
    /// How many times it applied, every launch together.
    mutations_applied: AtomicU64,
    /// The cell's transport timing ([`crate::timing`]), `None` for most cells.
    timing: Option<Timing>,
    /// How many times it applied, every launch together.
    timings_recorded: AtomicUsize,
}

/// What a cell's recorder does beyond relaying and recording.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The mutation operator the driver's lines go through (`harness mutate`).
    pub mutation: Option<Operator>,
    /// The transport timing the case's scenario asks of a real app-server (a mutated cell's
    /// too: its operator sees the lines in the order the driver gets them).
    pub timing: Option<Timing>,
}

/// One cell's recorder, listening until [`Recording::finish`].
pub struct Recording {
    shared: Arc<Shared>,
    listener: UnixListener,
    socket: PathBuf,
    accept: Mutex<Option<std::thread::JoinHandle<()>>>,
    seal: Mutex<Option<Seal>>,
}

impl Recording {
    /// Listen on `socket` (created; connectable by any user, so a container's user can reach
    /// it) and record into a new transcript at `transcript`.
    pub fn start(
        socket_path: &Path,
        transcript: &Path,
        setup: AppServerSetup,
        spawner: Arc<dyn Spawn>,
    ) -> std::io::Result<Recording> {
        Self::start_with(socket_path, transcript, setup, spawner, Options::default())
    }

    /// [`Recording::start`] with `options`: a mutation operator applied to every line the driver
    /// sends (`harness mutate`, [`crate::mutation`]; when it is one the wire carries), a
    /// transport timing ([`crate::timing`]).
    pub fn start_with(
        socket_path: &Path,
        transcript: &Path,
        setup: AppServerSetup,
        spawner: Arc<dyn Spawn>,
        options: Options,
    ) -> std::io::Result<Recording> {
        let Options { mutation, timing } = options;
        let listener = socket::bind(socket_path)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(socket_path, std::fs::Permissions::from_mode(0o777))?;
        let shared = Arc::new(Shared {
            transcript: Transcript::create(transcript)?,
            setup,
            spawner: Mutex::new(Some(spawner)),
            next_launch: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            launches: Mutex::new(Vec::new()),
            activity: AtomicU64::new(0),
            mutation,
            mutations_applied: AtomicU64::new(0),
            timing,
            timings_recorded: AtomicUsize::new(0),
        });
        let accepting = listener.try_clone()?;
        let accept_shared = shared.clone();
        let accept = std::thread::Builder::new()
            .name("tap-accept".into())
            .spawn(move || accept_loop(accepting, accept_shared))?;
        Ok(Recording {
            shared,
            listener,
            socket: socket_path.to_path_buf(),
            accept: Mutex::new(Some(accept)),
            seal: Mutex::new(None),
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Bytes that crossed the wire so far (a driver idle on the wire shows none).
    pub fn activity(&self) -> u64 {
        self.shared.activity.load(Ordering::Relaxed)
    }

    /// How many times the cell's mutation operator applied so far.
    pub fn mutations_applied(&self) -> u64 {
        self.shared.mutations_applied.load(Ordering::SeqCst)
    }

    /// Record (and count) an application of `operator` the harness made off the wire
    /// (`exit-zero`), in the last launch's name; before [`Recording::finish`], as the
    /// transcript is sealed then.
    pub fn record_mutation(&self, operator: Operator, original: &str, became: &str) {
        let launch = self.launches().max(1);
        let log = self.shared.transcript.launch(launch);
        mutate::record_mutation(&self.shared, &log, operator, original, became);
    }

    /// Launches so far.
    pub fn launches(&self) -> u64 {
        self.shared.next_launch.load(Ordering::Relaxed)
    }

    /// End the recording: no further launch is accepted; running launches get `grace` to end
    /// on their own (their taps are gone once the driver's process group is), then their
    /// app-servers are killed (`killed_by_harness`: the cell ended); the transcript is sealed.
    /// Idempotent: later calls return the same seal.
    pub fn finish(&self, grace: Duration) -> Seal {
        let mut sealed = self.seal.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(seal) = sealed.as_ref() {
            return seal.clone();
        }
        self.shared.closed.store(true, Ordering::SeqCst);
        // Wakes the accept loop (Linux: a blocked accept returns EINVAL).
        // SAFETY: shutdown on a descriptor this value owns.
        unsafe {
            libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RDWR);
        }
        if let Some(accept) = self.accept.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = accept.join();
        }
        let launches: Vec<Arc<Live>> = self
            .shared
            .launches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let deadline = Instant::now() + grace;
        for live in &launches {
            if live.wait_until(deadline) {
                continue;
            }
            if let Some(killer) = live
                .killer
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
            {
                killer.kill("the cell ended while the app-server was still running");
            }
            let _ = live.stream.shutdown(std::net::Shutdown::Both);
        }
        // Bounded: a relay thread stuck on a pipe a leftover process holds does not hold the
        // cell; whatever it would still write is dropped by the seal.
        let deadline = Instant::now() + DRAIN_AFTER_EXIT + Duration::from_secs(3);
        for live in &launches {
            live.wait_until(deadline);
        }
        self.shared
            .spawner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        let seal = self.shared.transcript.seal();
        let _ = std::fs::remove_file(&self.socket);
        *sealed = Some(seal.clone());
        seal
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.finish(Duration::ZERO);
    }
}

fn accept_loop(listener: UnixListener, shared: Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.closed.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else {
            // EINVAL after the shutdown of `finish`; anything else is retried.
            if shared.closed.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let live = Arc::new(Live {
            killer: Mutex::new(None),
            stream: handle,
            done: Mutex::new(false),
            ended: Condvar::new(),
        });
        shared
            .launches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(live.clone());
        let launch = shared.next_launch.fetch_add(1, Ordering::SeqCst) + 1;
        let shared = shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("tap-launch-{launch}"))
            .spawn({
                let live = live.clone();
                move || {
                    run_launch(&shared, launch, stream, &live);
                    live.mark_done();
                }
            });
        if spawned.is_err() {
            live.mark_done();
        }
    }
}
