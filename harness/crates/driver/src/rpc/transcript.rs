//! The client-side transcript: every JSON-RPC line the client sends and receives, written
//! through the format's one encoder ([`graders::wire::transcript::write`]), so a cell's
//! `transcript.jsonl` reads the same whichever side wrote it:
//! `{"direction":"in"|"out","time":<unix ms>,"message":<JSON>}`. Directions are the
//! app-server's: `in` is what the client sent to it, `out` what it wrote. A line that is not
//! JSON is kept as `"raw"`; the client's remarks (an oversized line, the end of the stream) as
//! `"note"`.
//!
//! The file is opened for appending and flushed per line: a retry's fresh app-server, or a
//! relaunch within the run, adds to the lines of the earlier processes, and a killed run loses
//! nothing.

use graders::wire::transcript::write::Appender;
use graders::wire::transcript::Direction;
use serde_json::Value;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// A shared handle: the client's writer and its reader task both record.
#[derive(Clone)]
pub(crate) struct ClientTranscript {
    file: Arc<Mutex<Appender>>,
}

impl ClientTranscript {
    pub(crate) fn open(path: &Path) -> std::io::Result<Self> {
        Ok(Self {
            file: Arc::new(Mutex::new(Appender::create(path)?)),
        })
    }

    /// A message the client built (always JSON).
    pub(crate) fn message(&self, direction: Direction, message: &Value) {
        self.lock().record_message(direction, message);
    }

    /// A line as it was read: JSON when it parses, else kept raw.
    pub(crate) fn line(&self, direction: Direction, line: &str) {
        self.lock().record_line(direction, line);
    }

    /// A remark about the stream from the app-server (what it sent could not be kept).
    pub(crate) fn note(&self, note: &str) {
        self.lock().record_note(note);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Appender> {
        // Evidence only: a writer that panicked mid-line must not stop the run's recording.
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
