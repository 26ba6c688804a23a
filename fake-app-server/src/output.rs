//! Everything the fake writes to stdout goes through here: one line per message, flushed per
//! message, mirrored into the transcript, with the scenario's notification faults applied.

use crate::scenario::NotificationFault;
use crate::transcript::{Direction, Transcript};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufWriter, Stdout, Write};
use std::sync::Mutex;
use std::time::Duration;

pub struct Output {
    inner: Mutex<Inner>,
    faults: BTreeMap<String, NotificationFault>,
}

struct Inner {
    stdout: BufWriter<Stdout>,
    transcript: Option<Transcript>,
    /// Notifications held back by an `out_of_order` fault.
    held: Vec<(Vec<u8>, Value)>,
}

impl Output {
    pub fn new(
        transcript: Option<Transcript>,
        faults: BTreeMap<String, NotificationFault>,
    ) -> Self {
        Self {
            inner: Mutex::new(Inner {
                stdout: BufWriter::with_capacity(64 * 1024, std::io::stdout()),
                transcript,
                held: Vec::new(),
            }),
            faults,
        }
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
        let _ = self.stdout.flush();
    }
}
