//! Writing the transcript's lines: the one encoder of the shapes [`super::read`] reads
//! (`docs/events.md`, "The transcript"). Two sinks write through it: the harness's recorder
//! (`tap::record`: every line tagged with its launch, bounded, sealed) and [`Appender`] (the
//! fake app-server's `--transcript` and the reference driver's client-side transcript, which
//! name no launch: a reader takes their lines as launch 1's).
//!
//! A message line embeds the line's JSON as it was sent: the recorder relays bytes and must not
//! re-serialise them, so the fields around the message are written by hand here.

use super::Direction;
use crate::events::now_ms;
use base64::Engine as _;
use serde_json::{json, Map, Value};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write as _};
use std::path::Path;

/// A message line: `message` is the line's JSON (without its newline), embedded as it is.
/// `partial`: the stream ended before the line's newline.
pub fn message_line(
    out: &mut Vec<u8>,
    direction: Direction,
    time: u64,
    launch: Option<u64>,
    partial: bool,
    message: &[u8],
) {
    out.reserve(message.len() + 64);
    let _ = write!(
        out,
        "{{\"direction\":\"{}\",\"time\":{time},",
        direction.as_str()
    );
    if let Some(launch) = launch {
        let _ = write!(out, "\"launch\":{launch},");
    }
    if partial {
        out.extend_from_slice(b"\"partial\":true,");
    }
    out.extend_from_slice(b"\"message\":");
    out.extend_from_slice(message);
    out.extend_from_slice(b"}\n");
}

/// A line that is not JSON, kept as the string `raw` (see [`text_fields`]).
pub fn raw_line(
    out: &mut Vec<u8>,
    direction: Direction,
    time: u64,
    launch: Option<u64>,
    partial: bool,
    bytes: &[u8],
) {
    let mut entry = Map::new();
    entry.insert("direction".into(), direction.as_str().into());
    entry.insert("time".into(), time.into());
    if let Some(launch) = launch {
        entry.insert("launch".into(), launch.into());
    }
    text_fields(bytes, "raw", &mut entry);
    if partial {
        entry.insert("partial".into(), true.into());
    }
    object_line(out, &Value::Object(entry));
}

/// A remark about the stream; `count` is a byte count under its key (`bytes`, `delivered`).
pub fn note_line(
    out: &mut Vec<u8>,
    direction: Direction,
    time: u64,
    launch: Option<u64>,
    note: &str,
    count: Option<(&str, u64)>,
) {
    let mut entry = json!({"direction": direction.as_str(), "time": time, "note": note});
    if let Some(launch) = launch {
        entry["launch"] = launch.into();
    }
    if let Some((key, bytes)) = count {
        entry[key] = bytes.into();
    }
    object_line(out, &entry);
}

/// A launch record (`kind`: `launch`, `stderr`, `exit`, …) with its other `fields`.
pub fn launch_record(
    out: &mut Vec<u8>,
    kind: &str,
    launch: u64,
    time: u64,
    mut fields: Map<String, Value>,
) {
    fields.insert("kind".into(), kind.into());
    fields.insert("launch".into(), launch.into());
    fields.insert("time".into(), time.into());
    object_line(out, &Value::Object(fields));
}

/// `bytes` as the JSON string under `key`, plus `raw_b64` when they are not UTF-8 (the string is
/// then lossy, the base64 exact).
pub fn text_fields(bytes: &[u8], key: &str, entry: &mut Map<String, Value>) {
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            entry.insert(key.into(), text.into());
        }
        Err(_) => {
            entry.insert(key.into(), String::from_utf8_lossy(bytes).into());
            entry.insert(
                "raw_b64".into(),
                base64::engine::general_purpose::STANDARD
                    .encode(bytes)
                    .into(),
            );
        }
    }
}

fn object_line(out: &mut Vec<u8>, entry: &Value) {
    serde_json::to_writer(&mut *out, entry).expect("a JSON value serialises");
    out.push(b'\n');
}

/// A transcript file appended to, one line per call, flushed per line (or per burst) so a crash
/// or a kill loses nothing. Its lines name no launch.
pub struct Appender {
    file: BufWriter<File>,
    line: Vec<u8>,
}

impl Appender {
    /// Open `path` for appending (created, with its folder, if missing): a retry's fresh
    /// process, or a relaunch within the run, adds to the earlier processes' lines instead of
    /// replacing them.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: BufWriter::new(file),
            line: Vec::new(),
        })
    }

    /// Write the line [`Appender::encode`] builds, without flushing.
    fn put(&mut self, encode: impl FnOnce(&mut Vec<u8>)) {
        self.line.clear();
        encode(&mut self.line);
        // Evidence only: a full disk must not stop the process that records.
        let _ = self.file.write_all(&self.line);
    }

    pub fn record_message(&mut self, direction: Direction, message: &Value) {
        self.record_message_buffered(direction, message);
        self.flush();
    }

    /// Record a message without flushing (a burst flushes once at its end).
    pub fn record_message_buffered(&mut self, direction: Direction, message: &Value) {
        let json = serde_json::to_vec(message).expect("a JSON value serialises");
        self.put(|out| message_line(out, direction, now_ms(), None, false, &json));
    }

    /// A line as it was read: a message when it is JSON, else kept raw.
    pub fn record_line(&mut self, direction: Direction, line: &str) {
        match serde_json::from_str::<Value>(line) {
            Ok(message) => self.record_message(direction, &message),
            Err(_) => self.record_raw(direction, line),
        }
    }

    pub fn record_raw(&mut self, direction: Direction, text: &str) {
        self.put(|out| raw_line(out, direction, now_ms(), None, false, text.as_bytes()));
        self.flush();
    }

    /// A remark of the app-server's side (a crash, an oversized line).
    pub fn record_note(&mut self, note: &str) {
        self.put(|out| note_line(out, Direction::Out, now_ms(), None, note, None));
        self.flush();
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
            let mut transcript = Appender::create(&path).unwrap();
            transcript.record_message(Direction::In, &json!({"id": id, "method": "initialize"}));
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let records = super::super::read(text.as_bytes()).unwrap();
        let ids: Vec<i64> = records
            .iter()
            .map(|record| match record {
                super::super::Record::Message { message, .. } => message["id"].as_i64().unwrap(),
                other => panic!("not a message: {other:?}"),
            })
            .collect();
        assert_eq!(ids, [1, 2]);
    }

    #[test]
    fn every_line_shape_reads_back_as_written() {
        let mut out = Vec::new();
        message_line(&mut out, Direction::In, 5, Some(2), true, b"{\"id\":1}");
        raw_line(&mut out, Direction::Out, 6, None, false, b"not json \xff");
        note_line(
            &mut out,
            Direction::Out,
            7,
            Some(2),
            "oversized",
            Some(("bytes", 9)),
        );
        launch_record(&mut out, "stdin-closed", 2, 8, Map::new());
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                r#"{"direction":"in","time":5,"launch":2,"partial":true,"message":{"id":1}}"#,
                r#"{"direction":"out","raw":"not json �","raw_b64":"bm90IGpzb24g/w==","time":6}"#,
                r#"{"bytes":9,"direction":"out","launch":2,"note":"oversized","time":7}"#,
                r#"{"kind":"stdin-closed","launch":2,"time":8}"#,
            ]
        );
        let records = super::super::read(text.as_bytes()).unwrap();
        assert_eq!(records.len(), 4);
        assert!(matches!(
            records[1],
            super::super::Record::Raw { launch: 1, .. }
        ));
    }
}
