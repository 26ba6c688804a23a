//! The client-side transcript: every JSON-RPC line the client sends and receives, as JSONL in
//! the fake app-server's transcript shape, so a cell's `transcript.jsonl` reads the same
//! whichever side wrote it:
//! `{"direction":"in"|"out","time":<unix ms>,"message":<JSON>}`. Directions are the
//! app-server's: `in` is what the client sent to it, `out` what it wrote. A line that is not
//! JSON is kept as `"raw"`; the client's remarks (an oversized line, the end of the stream) as
//! `"note"`.
//!
//! The file is opened for appending: a retry's fresh app-server, or a relaunch within the run,
//! adds to the lines of the earlier processes.

use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Which way a line went, seen from the app-server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Sent by the client.
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

/// A shared handle: the client's writer and its reader task both record.
#[derive(Clone)]
pub struct ClientTranscript {
    file: Arc<Mutex<BufWriter<File>>>,
}

impl ClientTranscript {
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Arc::new(Mutex::new(BufWriter::new(file))),
        })
    }

    /// A message the client built (always JSON).
    pub fn message(&self, direction: Direction, message: &Value) {
        self.write(&json!({"direction": direction.as_str(), "time": now_ms(), "message": message}));
    }

    /// A line as it was read: JSON when it parses, else kept raw.
    pub fn line(&self, direction: Direction, line: &str) {
        let entry = match serde_json::from_str::<Value>(line) {
            Ok(message) => {
                json!({"direction": direction.as_str(), "time": now_ms(), "message": message})
            }
            Err(_) => json!({"direction": direction.as_str(), "time": now_ms(), "raw": line}),
        };
        self.write(&entry);
    }

    /// A remark about the stream from the app-server (what it sent could not be kept).
    pub fn note(&self, note: &str) {
        self.write(&json!({"direction": "out", "time": now_ms(), "note": note}));
    }

    fn write(&self, entry: &Value) {
        // Evidence only: a full disk must not break the run, so write errors are dropped.
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let _ = serde_json::to_writer(&mut *file, entry);
        let _ = file.write_all(b"\n");
        // Flushed per line so a killed run loses nothing.
        let _ = file.flush();
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_appended_in_the_fake_transcript_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transcript.jsonl");
        let first = ClientTranscript::open(&path).unwrap();
        first.message(Direction::In, &json!({"id": 1, "method": "initialize"}));
        first.line(Direction::Out, "not json");
        drop(first);
        let second = ClientTranscript::open(&path).unwrap();
        second.line(Direction::Out, r#"{"id":1,"result":{}}"#);
        second.note("end of stream");
        let entries: Vec<Value> = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(entries.len(), 4);
        assert_eq!(entries[0]["direction"], "in");
        assert_eq!(entries[0]["message"]["method"], "initialize");
        assert_eq!(entries[1]["raw"], "not json");
        assert_eq!(entries[2]["direction"], "out");
        assert_eq!(entries[2]["message"]["id"], 1);
        assert_eq!(entries[3]["note"], "end of stream");
        assert!(entries.iter().all(|e| e["time"].as_u64().unwrap() > 0));
    }
}
