//! The transcript: one JSONL line per message in or out:
//! `{"direction":"in"|"out","time":<unix ms>,"message":<JSON>}`; a line that is not JSON is kept
//! as `"raw"` instead of `"message"`, and the fake's own remarks (a crash) as `"note"`.
//! This is the one writer of the format: the harness's client-side recorder
//! (`harness::rpc::transcript`) writes its transcript of the real Codex through it too.

use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;

/// Which way a line went, seen from the app-server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Sent by the client to the app-server.
    In,
    /// Written by the app-server.
    Out,
}

impl Direction {
    fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

pub struct Transcript {
    file: BufWriter<File>,
}

impl Transcript {
    /// Open `path` for appending (created if missing): a retry's fresh process, or a relaunch
    /// within the run, adds to the earlier attempts' lines instead of replacing them.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: BufWriter::new(file),
        })
    }

    fn write(&mut self, entry: &Value) {
        let _ = serde_json::to_writer(&mut self.file, entry);
        let _ = self.file.write_all(b"\n");
        // Flushed per message so a crash or a kill loses nothing.
        let _ = self.file.flush();
    }

    pub fn record_message(&mut self, direction: Direction, message: &Value) {
        self.record_message_buffered(direction, message);
        let _ = self.file.flush();
    }

    /// Record a message without flushing (a burst flushes once at its end).
    pub fn record_message_buffered(&mut self, direction: Direction, message: &Value) {
        let time = crate::protocol::shapes::now_ms();
        let entry = json!({"direction": direction.as_str(), "time": time, "message": message});
        let _ = serde_json::to_writer(&mut self.file, &entry);
        let _ = self.file.write_all(b"\n");
    }

    pub fn record_line(&mut self, direction: Direction, line: &str) {
        match serde_json::from_str::<Value>(line) {
            Ok(message) => self.record_message(direction, &message),
            Err(_) => self.record_raw(direction, line),
        }
    }

    pub fn record_raw(&mut self, direction: Direction, text: &str) {
        let time = crate::protocol::shapes::now_ms();
        self.write(&json!({"direction": direction.as_str(), "time": time, "raw": text}));
    }

    pub fn record_note(&mut self, note: &str) {
        let time = crate::protocol::shapes::now_ms();
        self.write(&json!({"direction": "out", "time": time, "note": note}));
    }

    pub fn flush(&mut self) {
        let _ = self.file.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_process_appends_to_the_first_ones_transcript() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transcript.jsonl");
        for id in [1, 2] {
            let mut transcript = Transcript::create(&path).unwrap();
            transcript.record_message(Direction::In, &json!({"id": id, "method": "initialize"}));
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let ids: Vec<i64> = text
            .lines()
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["message"]["id"]
                    .as_i64()
                    .unwrap()
            })
            .collect();
        assert_eq!(ids, [1, 2]);
    }
}
