//! Everything the fake writes to stdout goes through here: one line per message, flushed per
//! message (or per burst), mirrored into the transcript, with the scenario's notification faults
//! applied. A notification must be one the played release sends: the deliberate unknowns of the
//! forward-compatibility steps go through [`Output::send_off_schema`], nothing else does.

use crate::scenario::NotificationFault;
use graders::wire::transcript::write::Appender;
use graders::wire::transcript::Direction;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufWriter, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

pub struct Output {
    inner: Mutex<Inner>,
    faults: BTreeMap<String, NotificationFault>,
    /// Add fields no release defines to every message (the scenario's `extra_fields`).
    extra_fields: bool,
    /// The client declared `capabilities.experimentalApi` at `initialize`.
    experimental_client: AtomicBool,
    /// The notification methods the client opted out of at `initialize`
    /// (`capabilities.optOutNotificationMethods`).
    opted_out: Mutex<BTreeSet<String>>,
    /// The threads the client unsubscribed from (`thread/unsubscribe`): of their notifications
    /// only `thread/status/changed` still comes (Codex 0.169, measured with `harness explore`:
    /// no `thread/settings/updated`, `turn/*` or `item/*` for the turns started after it).
    unsubscribed: Mutex<BTreeSet<String>>,
}

/// The extra field the scenario's `extra_fields` adds (its value an object, so a client that
/// only skips unknown scalars is caught too).
pub const EXTRA_FIELD: &str = "harnessExtraField";

struct Inner {
    stdout: BufWriter<Stdout>,
    transcript: Option<Appender>,
    /// Notifications held back by an `out_of_order` fault.
    held: Vec<(Vec<u8>, Value)>,
    /// Lines are written but not flushed until [`Output::release`] (see [`Output::hold`]).
    holding: bool,
}

impl Output {
    pub fn new(transcript: Option<Appender>, faults: BTreeMap<String, NotificationFault>) -> Self {
        Self {
            inner: Mutex::new(Inner {
                stdout: BufWriter::with_capacity(64 * 1024, std::io::stdout()),
                transcript,
                held: Vec::new(),
                holding: false,
            }),
            faults,
            extra_fields: false,
            experimental_client: AtomicBool::new(false),
            opted_out: Mutex::new(BTreeSet::new()),
            unsubscribed: Mutex::new(BTreeSet::new()),
        }
    }

    /// Add fields no release defines to every message from now on.
    pub fn with_extra_fields(mut self, extra: bool) -> Self {
        self.extra_fields = extra;
        self
    }

    /// What the client declared at `initialize`: without `capabilities.experimentalApi`, the
    /// notifications the release sends only to experimental clients are not sent
    /// ([`crate::persona::Persona::is_experimental_notification`]); the methods named in
    /// `capabilities.optOutNotificationMethods` are not sent at all, as the real Codex
    /// suppresses them for the connection (observed on 0.169 with `harness explore --replay`).
    pub fn declare_client(&self, experimental_api: bool, opted_out: &[String]) {
        self.experimental_client
            .store(experimental_api, Ordering::SeqCst);
        *self
            .opted_out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = opted_out.iter().cloned().collect();
    }

    /// Whether the client gets the notifications of thread `thread_id` (see
    /// [`Output::unsubscribed`]).
    pub fn set_subscribed(&self, thread_id: &str, subscribed: bool) {
        let mut unsubscribed = self
            .unsubscribed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if subscribed {
            unsubscribed.remove(thread_id);
        } else {
            unsubscribed.insert(thread_id.to_string());
        }
    }

    /// A message this client must not get: a notification it opted out of, a notification or
    /// server request of a thread it unsubscribed from, or a notification the release sends
    /// only to a client that declared the experimental API, to one that did not.
    fn withheld(&self, message: &Value) -> bool {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return false;
        };
        // A server request of a thread the client left is not sent either: the turn waits
        // for an answer that cannot come (Codex 0.169, measured with a dynamic tool call).
        let of_unsubscribed_thread = method != "thread/status/changed"
            && message["params"]["threadId"]
                .as_str()
                .is_some_and(|thread| {
                    self.unsubscribed
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .contains(thread)
                });
        if message.get("id").is_some() {
            return of_unsubscribed_thread;
        }
        let opted_out = self
            .opted_out
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .contains(method);
        opted_out
            || of_unsubscribed_thread
            || (crate::persona::current().is_experimental_notification(method)
                && !self.experimental_client.load(Ordering::SeqCst))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panicking writer thread must not silence the others.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Record an incoming line (parsed when it is JSON).
    pub fn record_incoming(&self, line: &str) {
        let mut inner = self.lock();
        if let Some(transcript) = inner.transcript.as_mut() {
            transcript.record_line(Direction::In, line);
        }
    }

    /// Send one message (response, notification or server request).
    pub fn send(&self, message: &Value) {
        let method = message.get("method").and_then(Value::as_str);
        let is_notification = method.is_some() && message.get("id").is_none();
        if let Some(method) = method.filter(|_| is_notification) {
            if !crate::protocol::is_server_notification(method) {
                // A fake bug: only the forward-compatibility steps may send unknown methods.
                debug_assert!(
                    false,
                    "the fake sent `{method}`, a notification Codex does not send"
                );
                eprintln!(
                    "fake-app-server BUG: `{method}` is not a notification Codex {} sends",
                    crate::persona::current().version
                );
            }
        }
        self.send_unchecked(message);
    }

    /// Send a message that deliberately breaks the release's schema (an unknown method, item
    /// type or enum value): the forward-compatibility steps' only way out.
    pub fn send_off_schema(&self, message: &Value) {
        self.send_unchecked(message);
    }

    fn send_unchecked(&self, message: &Value) {
        if self.withheld(message) {
            return;
        }
        let extended;
        let message = if self.extra_fields {
            extended = with_extra_fields(message);
            &extended
        } else {
            message
        };
        let method = message.get("method").and_then(Value::as_str);
        let is_notification = method.is_some() && message.get("id").is_none();
        let fault = if is_notification {
            method
                .and_then(|m| self.faults.get(m))
                .cloned()
                .unwrap_or_default()
        } else {
            NotificationFault::default()
        };
        if fault.drop {
            return;
        }
        let mut line = serde_json::to_vec(message).expect("serializing a JSON value cannot fail");
        line.push(b'\n');
        let mut inner = self.lock();
        if fault.out_of_order {
            inner.held.push((line, message.clone()));
            return;
        }
        inner.write_message(&line, message);
        if fault.duplicate {
            inner.write_message(&line, message);
        }
        let held = std::mem::take(&mut inner.held);
        for (line, message) in held {
            inner.write_message(&line, &message);
        }
    }

    /// Send many messages in one buffered write (a burst): the lines go out back to back and
    /// are flushed once. Notification faults and extra fields do not apply.
    pub fn send_burst(&self, messages: &[Value]) {
        let mut inner = self.lock();
        for message in messages {
            let mut line =
                serde_json::to_vec(message).expect("serializing a JSON value cannot fail");
            line.push(b'\n');
            if let Some(transcript) = inner.transcript.as_mut() {
                transcript.record_message_buffered(Direction::Out, message);
            }
            let _ = inner.stdout.write_all(&line);
        }
        let _ = inner.stdout.flush();
        if let Some(transcript) = inner.transcript.as_mut() {
            transcript.flush();
        }
    }

    /// Send `message` padded with JSON whitespace to at least `min_bytes`, in `chunks` writes.
    pub fn send_shaped(&self, message: &Value, min_bytes: Option<usize>, chunks: Option<usize>) {
        let mut line = serde_json::to_vec(message).expect("serializing a JSON value cannot fail");
        if let Some(min) = min_bytes {
            if line.len() < min {
                // Whitespace before the closing brace keeps the line valid JSON.
                let close = line.pop().expect("non-empty JSON object");
                line.resize(min - 1, b' ');
                line.push(close);
            }
        }
        line.push(b'\n');
        let chunks = chunks.unwrap_or(1).max(1);
        let mut inner = self.lock();
        if let Some(transcript) = inner.transcript.as_mut() {
            transcript.record_message(Direction::Out, message);
        }
        let size = line.len().div_ceil(chunks);
        for piece in line.chunks(size.max(1)) {
            let _ = inner.stdout.write_all(piece);
            let _ = inner.stdout.flush();
            if chunks > 1 {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }

    /// Write a line that is not JSON.
    pub fn send_garbage(&self, text: &str) {
        let mut inner = self.lock();
        if let Some(transcript) = inner.transcript.as_mut() {
            transcript.record_raw(Direction::Out, text);
        }
        let _ = inner.stdout.write_all(text.as_bytes());
        let _ = inner.stdout.write_all(b"\n");
        let _ = inner.stdout.flush();
    }

    /// Write the first `bytes` bytes of `message`'s line, then exit the process (code 101).
    pub fn crash_after(&self, message: &Value, bytes: usize) -> ! {
        let line = serde_json::to_vec(message).expect("serializing a JSON value cannot fail");
        let cut = &line[..bytes.min(line.len())];
        let mut inner = self.lock();
        if let Some(transcript) = inner.transcript.as_mut() {
            transcript.record_raw(Direction::Out, &String::from_utf8_lossy(cut));
            transcript.record_note("crash: fake-app-server exits with code 101");
            transcript.flush();
        }
        let _ = inner.stdout.write_all(cut);
        let _ = inner.stdout.flush();
        eprintln!("fake-app-server: crashing as the scenario asks (exit code 101)");
        std::process::exit(101);
    }

    /// Exit the process now (code 101), flushing the transcript.
    pub fn crash(&self, reason: &str) -> ! {
        let mut inner = self.lock();
        let _ = inner.stdout.flush();
        if let Some(transcript) = inner.transcript.as_mut() {
            transcript.record_note(&format!("crash: {reason}"));
            transcript.flush();
        }
        eprintln!("fake-app-server: crashing as the scenario asks: {reason} (exit code 101)");
        std::process::exit(101);
    }

    /// Write the next messages without flushing them, until [`Output::release`]: what the
    /// server sends right after a turn completes (a stale request of that turn, the turn it
    /// starts on its own) then reaches the client in the same write as the `turn/completed`.
    /// A client that ends as soon as its turn completes would otherwise end before it, or not,
    /// as the machine's timing falls, and the case would show nothing one run in two.
    pub fn hold(&self) {
        self.lock().holding = true;
    }

    /// Flush what [`Output::hold`] kept back, and flush every message again from now on. A
    /// no-op when nothing is held.
    pub fn release(&self) {
        let mut inner = self.lock();
        if std::mem::take(&mut inner.holding) {
            let _ = inner.stdout.flush();
        }
    }

    pub fn flush(&self) {
        let mut inner = self.lock();
        let _ = inner.stdout.flush();
        if let Some(transcript) = inner.transcript.as_mut() {
            transcript.flush();
        }
    }
}

impl Inner {
    fn write_message(&mut self, line: &[u8], message: &Value) {
        if let Some(transcript) = self.transcript.as_mut() {
            transcript.record_message(Direction::Out, message);
        }
        // A closed stdout (the client went away) is not an error worth dying for here: the
        // reader sees EOF and the server shuts down.
        let _ = self.stdout.write_all(line);
        if !self.holding {
            let _ = self.stdout.flush();
        }
    }
}

/// `message` with [`EXTRA_FIELD`] at its top level, in its `params` / `result`, and in the
/// `item`, `turn` and `thread` objects there (never inside tool arguments or other data a client
/// passes through).
fn with_extra_fields(message: &Value) -> Value {
    let extra = || serde_json::json!({"note": "a field no Codex release defines"});
    let mut message = message.clone();
    let Some(object) = message.as_object_mut() else {
        return message;
    };
    for body in ["params", "result"] {
        if let Some(Value::Object(body)) = object.get_mut(body) {
            for nested in ["item", "turn", "thread"] {
                if let Some(Value::Object(nested)) = body.get_mut(nested) {
                    nested.insert(EXTRA_FIELD.into(), extra());
                }
            }
            body.insert(EXTRA_FIELD.into(), extra());
        }
    }
    object.insert(EXTRA_FIELD.into(), extra());
    message
}
