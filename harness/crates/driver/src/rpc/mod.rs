//! A JSON-RPC 2.0 client over a child process's stdin/stdout (newline-delimited JSON), as
//! `codex app-server` speaks it.
//!
//! Every wait is bounded; lines are bounded in size (the codec refuses longer ones) and the
//! buffer of messages read while waiting for something else is bounded in length. The first
//! transport fault (end of stream, a malformed or oversized line, an I/O error, an overflowing
//! buffer) closes the transport for good: the child is killed and every later call returns the
//! same error. The child's stderr is copied to a file for evidence, and optionally every line
//! sent and received to a transcript ([`transcript`]). Dropping the client kills the child's
//! whole process group.

pub(crate) mod message;
pub(crate) mod transcript;

use futures_util::StreamExt;
use graders::wire::transcript::Direction;
pub use message::{Incoming, MalformedMessage, RpcError};
use sandbox::launcher::{Launcher, ProcessSpec};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::codec::{FramedRead, LinesCodec, LinesCodecError};
use transcript::ClientTranscript;

/// Bounds of one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest accepted line, in bytes (without the newline).
    pub max_line_bytes: usize,
    /// Most messages held while waiting for another one.
    pub max_buffered: usize,
    /// Most stderr bytes kept in the evidence file (the rest is read and dropped).
    pub max_stderr_bytes: u64,
    /// Bound on writing one line to the child's stdin.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_line_bytes: suites::spec::HARNESS_OWN_MAX_LINE_BYTES as usize,
            max_buffered: 10_000,
            max_stderr_bytes: 16 * 1024 * 1024,
            write_timeout: crate::bounds::RPC_WRITE_LINE,
        }
    }
}

/// Why the transport is unusable.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TransportError {
    #[error("the app-server closed its output ({0})")]
    Closed(String),
    #[error("the app-server sent a line longer than {limit} bytes")]
    Oversized { limit: usize },
    #[error("the app-server sent a malformed line ({error}): {excerpt}")]
    Malformed {
        error: MalformedMessage,
        excerpt: String,
    },
    #[error("more than {limit} messages arrived while waiting for another")]
    Overflow { limit: usize },
    #[error("I/O error on the app-server's pipes: {0}")]
    Io(String),
    #[error("timed out after {after:?} waiting for {waiting_for}")]
    TimedOut {
        waiting_for: String,
        after: Duration,
    },
}

impl TransportError {
    pub fn is_timeout(&self) -> bool {
        matches!(self, TransportError::TimedOut { .. })
    }
}

type InboxItem = Result<Incoming, TransportError>;

/// Capacity of the channel between the reader task and the client; when full the reader stops
/// reading, so the child blocks on its pipe instead of memory growing.
const CHANNEL_CAPACITY: usize = 256;

pub struct RpcClient {
    child: Child,
    pid: Option<u32>,
    stdin: Option<ChildStdin>,
    inbox: mpsc::Receiver<InboxItem>,
    buffered: VecDeque<Incoming>,
    next_id: i64,
    closed: Option<TransportError>,
    limits: Limits,
    stderr_log: PathBuf,
    transcript: Option<ClientTranscript>,
    reader: JoinHandle<()>,
    /// When bytes last came from the app-server (see [`Arrivals`]).
    arrivals: Arrivals,
    stderr_copier: JoinHandle<()>,
    _guard: Box<dyn Send + Sync>,
}

/// When bytes last arrived on the app-server's stdout, shared with the reader. A long line still
/// streaming in is not silence: the idle wait for the next message counts from the last bytes,
/// not from the last whole message (the line's length is bounded by `Limits::max_line_bytes`, so
/// this cannot stretch a wait without bound).
#[derive(Clone)]
struct Arrivals {
    epoch: std::time::Instant,
    last_ms: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Arrivals {
    fn new() -> Self {
        Self {
            epoch: std::time::Instant::now(),
            last_ms: std::sync::Arc::default(),
        }
    }

    fn mark(&self) {
        let ms = u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    fn last(&self) -> tokio::time::Instant {
        let ms = self.last_ms.load(std::sync::atomic::Ordering::Relaxed);
        tokio::time::Instant::from_std(self.epoch + Duration::from_millis(ms))
    }
}

/// The app-server's stdout, marking every read that brings bytes.
struct MarkedReader<R> {
    inner: R,
    arrivals: Arrivals,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for MarkedReader<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.arrivals.mark();
        }
        polled
    }
}

impl RpcClient {
    /// Start `spec` through `launcher`, appending the child's stderr to `stderr_log`.
    pub fn spawn(
        launcher: &dyn Launcher,
        spec: &ProcessSpec,
        stderr_log: &Path,
        limits: Limits,
    ) -> anyhow::Result<Self> {
        Self::spawn_recorded(launcher, spec, stderr_log, None, limits)
    }

    /// Like [`RpcClient::spawn`], also appending every line sent and received to `transcript`.
    pub(crate) fn spawn_recorded(
        launcher: &dyn Launcher,
        spec: &ProcessSpec,
        stderr_log: &Path,
        transcript: Option<&Path>,
        limits: Limits,
    ) -> anyhow::Result<Self> {
        use anyhow::Context;
        let transcript = transcript
            .map(|path| {
                ClientTranscript::open(path)
                    .with_context(|| format!("opening the transcript {}", path.display()))
            })
            .transpose()?;
        let prepared = launcher
            .prepare(spec)
            .with_context(|| format!("preparing {} to run", spec.program.display()))?;
        let mut command = prepared.command;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own process group, so that dropping the client also kills what it started.
            .process_group(0);
        if let Some(parent) = stderr_log.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let stderr_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(stderr_log)
            .with_context(|| format!("opening the stderr log {}", stderr_log.display()))?;
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {}", spec.program.display()))?;
        let stdout = child.stdout.take().context("child stdout is piped")?;
        let stderr = child.stderr.take().context("child stderr is piped")?;
        let stdin = child.stdin.take();
        let (tx, inbox) = mpsc::channel(CHANNEL_CAPACITY);
        let arrivals = Arrivals::new();
        let stdout = MarkedReader {
            inner: stdout,
            arrivals: arrivals.clone(),
        };
        let reader = tokio::spawn(read_messages(
            stdout,
            tx,
            limits.max_line_bytes,
            transcript.clone(),
        ));
        let stderr_copier = tokio::spawn(copy_stderr(
            stderr,
            tokio::fs::File::from_std(stderr_file),
            limits.max_stderr_bytes,
        ));
        Ok(Self {
            pid: child.id(),
            child,
            stdin,
            inbox,
            buffered: VecDeque::new(),
            next_id: 1,
            closed: None,
            limits,
            stderr_log: stderr_log.to_path_buf(),
            transcript,
            reader,
            arrivals,
            stderr_copier,
            _guard: prepared.guard,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The error that closed the transport, if any.
    pub(crate) fn closed(&self) -> Option<&TransportError> {
        self.closed.as_ref()
    }

    /// Send a notification.
    pub async fn notify(
        &mut self,
        method: &str,
        params: Option<Value>,
    ) -> Result<(), TransportError> {
        let mut msg = json!({"method": method});
        if let Some(p) = params {
            msg["params"] = p;
        }
        self.send(&msg).await
    }

    /// Send a request and wait for its response; everything else that arrives meanwhile is
    /// kept, in order, for [`RpcClient::next`].
    pub async fn request(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Result<Value, RpcError>, TransportError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}))
            .await?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let msg = self
                .receive_until(
                    deadline,
                    || format!("the response to `{method}` (id {id})"),
                    timeout,
                )
                .await?;
            match msg {
                Incoming::Response { id: got, result } if got == json!(id) => return Ok(result),
                other => self.keep(other)?,
            }
        }
    }

    /// Answer a server request.
    pub async fn respond(&mut self, id: &Value, result: Value) -> Result<(), TransportError> {
        self.send(&json!({"id": id, "result": result})).await
    }

    /// Answer a server request with an error.
    pub(crate) async fn respond_error(
        &mut self,
        id: &Value,
        code: i64,
        message: &str,
    ) -> Result<(), TransportError> {
        self.send(&json!({"id": id, "error": {"code": code, "message": message}}))
            .await
    }

    /// The next message: a kept one first, else the next one read (within `timeout`).
    pub async fn next(&mut self, timeout: Duration) -> Result<Incoming, TransportError> {
        if let Some(msg) = self.buffered.pop_front() {
            return Ok(msg);
        }
        let mut deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self
                .receive_until(deadline, || "the next message".to_string(), timeout)
                .await
            {
                // Silence is no bytes at all: a line still arriving renews the wait.
                Err(TransportError::TimedOut { .. })
                    if self.arrivals.last() + timeout > deadline =>
                {
                    deadline = self.arrivals.last() + timeout;
                }
                other => return other,
            }
        }
    }

    /// Close stdin and wait (bounded) for the child to exit; kill it if it does not.
    pub async fn shutdown(mut self, timeout: Duration) -> Option<ExitStatus> {
        self.stdin.take();
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(Ok(status)) => Some(status),
            _ => {
                self.kill_group();
                tokio::time::timeout(crate::bounds::RPC_EXIT_AFTER_KILL, self.child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok)
            }
        }
    }

    async fn send(&mut self, msg: &Value) -> Result<(), TransportError> {
        if let Some(err) = &self.closed {
            return Err(err.clone());
        }
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(TransportError::Io("stdin is already closed".into()));
        };
        if let Some(transcript) = &self.transcript {
            // Before the write, so the answer never precedes its request in the transcript.
            transcript.message(Direction::In, msg);
        }
        let mut line = serde_json::to_vec(msg).expect("JSON values always serialize");
        line.push(b'\n');
        let write = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(self.limits.write_timeout, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                let detail = format!("writing to stdin failed: {e}");
                let err = TransportError::Closed(self.exit_detail(&detail).await);
                Err(self.close_with(err))
            }
            Err(_) => Err(TransportError::TimedOut {
                waiting_for: "the app-server to read its stdin".into(),
                after: self.limits.write_timeout,
            }),
        }
    }

    async fn receive_until(
        &mut self,
        deadline: tokio::time::Instant,
        what: impl Fn() -> String,
        timeout: Duration,
    ) -> Result<Incoming, TransportError> {
        if let Some(err) = &self.closed {
            return Err(err.clone());
        }
        match tokio::time::timeout_at(deadline, self.inbox.recv()).await {
            Err(_) => Err(TransportError::TimedOut {
                waiting_for: what(),
                after: timeout,
            }),
            Ok(Some(Ok(msg))) => Ok(msg),
            Ok(Some(Err(TransportError::Closed(detail)))) => {
                let err = TransportError::Closed(self.exit_detail(&detail).await);
                Err(self.close_with(err))
            }
            Ok(Some(Err(err))) => Err(self.close_with(err)),
            Ok(None) => {
                let err = TransportError::Closed(self.exit_detail("reader stopped").await);
                Err(self.close_with(err))
            }
        }
    }

    fn keep(&mut self, msg: Incoming) -> Result<(), TransportError> {
        if self.buffered.len() >= self.limits.max_buffered {
            let err = TransportError::Overflow {
                limit: self.limits.max_buffered,
            };
            return Err(self.close_with(err));
        }
        self.buffered.push_back(msg);
        Ok(())
    }

    fn close_with(&mut self, err: TransportError) -> TransportError {
        self.closed = Some(err.clone());
        self.stdin.take();
        self.kill_group();
        err
    }

    /// Describe how the child ended (bounded wait), with the tail of its stderr.
    async fn exit_detail(&mut self, what: &str) -> String {
        let status = tokio::time::timeout(crate::bounds::RPC_EXIT_STATUS, self.child.wait()).await;
        // Give the stderr copier a moment to write what the child said last.
        let _ = tokio::time::timeout(crate::bounds::RPC_STDERR_TAIL, &mut self.stderr_copier).await;
        let mut detail = match status {
            Ok(Ok(status)) => format!("{what}; {status}"),
            _ => format!("{what}; still running"),
        };
        if let Some(tail) = stderr_tail(&self.stderr_log, 400) {
            detail.push_str(&format!("; stderr ends with: {tail}"));
        }
        detail
    }

    fn kill_group(&mut self) {
        if let Some(pid) = self.pid {
            if let Ok(pid) = i32::try_from(pid) {
                // The child leads its own group (see `spawn`); ESRCH just means it is gone.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for RpcClient {
    fn drop(&mut self) {
        // Only signal a group we know is still ours: once reaped, the pid may be reused.
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_group();
        }
        self.reader.abort();
    }
}

async fn read_messages(
    stdout: impl tokio::io::AsyncRead + Unpin,
    tx: mpsc::Sender<InboxItem>,
    max_line_bytes: usize,
    transcript: Option<ClientTranscript>,
) {
    let mut lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(max_line_bytes));
    let note = |text: &str| {
        if let Some(t) = &transcript {
            t.note(text);
        }
    };
    loop {
        let item = match lines.next().await {
            None => {
                note("end of stream");
                Err(TransportError::Closed("end of stream".into()))
            }
            Some(Err(LinesCodecError::MaxLineLengthExceeded)) => {
                note(&format!(
                    "a line longer than {max_line_bytes} bytes was refused unread"
                ));
                Err(TransportError::Oversized {
                    limit: max_line_bytes,
                })
            }
            Some(Err(LinesCodecError::Io(e))) => {
                note(&format!("I/O error: {e}"));
                Err(TransportError::Io(e.to_string()))
            }
            Some(Ok(line)) if line.trim().is_empty() => continue,
            Some(Ok(line)) => {
                if let Some(t) = &transcript {
                    t.line(Direction::Out, &line);
                }
                message::parse_line(&line).map_err(|error| TransportError::Malformed {
                    error,
                    excerpt: excerpt(&line, 200),
                })
            }
        };
        let fatal = item.is_err();
        if tx.send(item).await.is_err() || fatal {
            return;
        }
    }
}

async fn copy_stderr(mut stderr: tokio::process::ChildStderr, mut file: tokio::fs::File, cap: u64) {
    let mut kept = 0u64;
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let room = cap.saturating_sub(kept) as usize;
        let take = n.min(room);
        if take > 0 && file.write_all(&buf[..take]).await.is_ok() {
            kept += take as u64;
            let _ = file.flush().await;
        }
        // Past the cap the rest is read and dropped so the child never blocks on stderr.
    }
    let _ = file.flush().await;
}

fn stderr_tail(path: &Path, max_chars: usize) -> Option<String> {
    let text = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&text);
    let trimmed = text.trim_end();
    if trimmed.is_empty() {
        return None;
    }
    let start = trimmed
        .char_indices()
        .rev()
        .nth(max_chars)
        .map_or(0, |(i, _)| i);
    Some(trimmed[start..].to_string())
}

/// At most `max` characters of `text`, marked when cut.
pub fn excerpt(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}
