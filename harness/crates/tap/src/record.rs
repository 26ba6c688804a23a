//! The tap's side of the transcript. Message lines keep the shape every transcript writer uses
//! (`{"direction":"in"|"out","time":<unix ms>,"message":<JSON>}`, `raw` for a line that is not
//! JSON, `note` for a remark), plus the `launch` they belong to; launch records are lines of
//! their own (`"kind":"launch"|"stdin-closed"|"exit"`), documented in `docs/events.md`.
//!
//! Why not `fake_app_server::transcript::Transcript`: the tap must not re-serialise what it
//! relays (a JSON line is embedded as it was sent, after one validating parse that builds
//! nothing), it tags every line with its launch, and it caps what it keeps per launch.

use serde_json::{json, Value};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// Which way a line went, seen from the app-server (`in`: from the driver).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    In,
    Out,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

/// One launch's writer. Every line is one `write` on an append-only file, so the launches of a
/// run (and both directions of one launch) interleave whole lines only.
pub struct Recorder {
    file: Mutex<File>,
    launch: u64,
    written: AtomicU64,
    cap: u64,
    cut: AtomicBool,
}

impl Recorder {
    pub fn open(path: &Path, launch: u64, cap: u64) -> std::io::Result<Self> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Self {
            file: Mutex::new(file),
            launch,
            written: AtomicU64::new(0),
            cap,
            cut: AtomicBool::new(false),
        })
    }

    pub fn launch(&self) -> u64 {
        self.launch
    }

    fn write(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        // Evidence only: a full disk must not break the relay.
        let _ = file.write_all(bytes);
    }

    /// A launch record (`kind`, this launch and the time are added); never cut.
    pub fn record(&self, kind: &str, mut fields: serde_json::Map<String, Value>) {
        fields.insert("kind".into(), kind.into());
        fields.insert("launch".into(), self.launch.into());
        fields.insert("time".into(), now_ms().into());
        let mut line = serde_json::to_vec(&Value::Object(fields)).expect("JSON");
        line.push(b'\n');
        self.write(&line);
    }

    /// Whether a message line of `len` bytes may still be kept; the first refusal writes the
    /// note that the transcript was cut.
    fn admit(&self, len: usize) -> bool {
        if self.cut.load(Ordering::Relaxed) {
            return false;
        }
        let total = self.written.fetch_add(len as u64, Ordering::Relaxed) + len as u64;
        if total <= self.cap {
            return true;
        }
        if !self.cut.swap(true, Ordering::Relaxed) {
            self.note(
                Direction::Out,
                &format!(
                    "transcript cut: this launch's lines passed the tap's cap of {} bytes; later lines were relayed but not kept",
                    self.cap
                ),
                None,
            );
        }
        false
    }

    /// A complete line (without its newline) as it went through.
    pub fn line(&self, direction: Direction, line: &[u8]) {
        let mut out = Vec::new();
        self.line_into(direction, line, &mut out);
        self.write(&out);
    }

    /// [`Recorder::line`], appended to `out` for one write of a whole chunk's lines.
    fn line_into(&self, direction: Direction, line: &[u8], out: &mut Vec<u8>) {
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        if !self.admit(trimmed.len()) {
            return;
        }
        out.reserve(trimmed.len() + 64);
        // Written by hand: the line goes in as it was sent, so nothing is re-serialised.
        let _ = write!(
            out,
            "{{\"direction\":\"{}\",\"time\":{},\"launch\":{},",
            direction.as_str(),
            now_ms(),
            self.launch
        );
        if serde_json::from_slice::<serde::de::IgnoredAny>(trimmed).is_ok() {
            out.extend_from_slice(b"\"message\":");
            out.extend_from_slice(trimmed);
        } else {
            out.extend_from_slice(b"\"raw\":");
            let text = String::from_utf8_lossy(trimmed);
            out.extend_from_slice(&serde_json::to_vec(&Value::String(text.into())).expect("JSON"));
        }
        out.extend_from_slice(b"}\n");
    }

    /// A remark about the stream; `bytes` is the size of a line that was not kept.
    pub fn note(&self, direction: Direction, note: &str, bytes: Option<usize>) {
        let mut entry = json!({
            "direction": direction.as_str(),
            "time": now_ms(),
            "launch": self.launch,
            "note": note,
        });
        if let Some(bytes) = bytes {
            entry["bytes"] = bytes.into();
        }
        let mut line = serde_json::to_vec(&entry).expect("JSON");
        line.push(b'\n');
        self.write(&line);
    }
}

/// Splits a relayed byte stream into lines for the recorder, keeping at most `max` bytes of a
/// line; a longer one is reported by its size only.
pub struct LineSplitter {
    direction: Direction,
    buf: Vec<u8>,
    /// Bytes of the current line beyond what `buf` keeps.
    dropped: usize,
    max: usize,
    /// The formatted lines of the chunk being fed (kept for its allocation).
    batch: Vec<u8>,
}

impl LineSplitter {
    pub fn new(direction: Direction, max: usize) -> Self {
        Self {
            direction,
            buf: Vec::new(),
            dropped: 0,
            max,
            batch: Vec::new(),
        }
    }

    /// Record the lines `chunk` completes. The whole lines of one chunk go to the file in one
    /// write (a streamed turn's chunk holds many), notes at once.
    pub fn feed(&mut self, mut chunk: &[u8], recorder: &Recorder) {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        while !chunk.is_empty() {
            let (part, newline) = match chunk.iter().position(|&b| b == b'\n') {
                Some(at) => (&chunk[..at], true),
                None => (chunk, false),
            };
            chunk = &chunk[part.len() + usize::from(newline)..];
            if newline && self.buf.is_empty() && self.dropped == 0 && part.len() <= self.max {
                // The common case: a whole line inside one chunk, recorded without a copy.
                recorder.line_into(self.direction, part, &mut batch);
                continue;
            }
            let room = self.max.saturating_sub(self.buf.len());
            let keep = part.len().min(room);
            self.buf.extend_from_slice(&part[..keep]);
            let crossing = self.dropped == 0 && keep < part.len();
            self.dropped += part.len() - keep;
            if crossing {
                recorder.write(&batch);
                batch.clear();
                // Said at once: a driver that gives up on the line may kill the tap before
                // its end arrives.
                recorder.note(
                    self.direction,
                    &format!(
                        "oversized line: over the tap's cap of {} bytes; relayed whole, not kept",
                        self.max
                    ),
                    Some(self.buf.len() + self.dropped),
                );
            }
            if newline {
                recorder.write(&batch);
                batch.clear();
                self.emit(recorder);
            }
        }
        recorder.write(&batch);
        self.batch = batch;
    }

    fn emit(&mut self, recorder: &Recorder) {
        if self.dropped > 0 {
            let total = self.buf.len() + self.dropped;
            recorder.note(
                self.direction,
                &format!("the oversized line ended after {total} bytes"),
                Some(total),
            );
        } else {
            recorder.line(self.direction, &self.buf);
        }
        self.buf.clear();
        self.dropped = 0;
    }

    /// The end of the stream: a last line without its newline is still recorded.
    pub fn finish(&mut self, recorder: &Recorder) {
        if !self.buf.is_empty() || self.dropped > 0 {
            self.emit(recorder);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn lines_are_split_across_chunks_kept_verbatim_and_capped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let recorder = Recorder::open(&path, 3, 1 << 20).unwrap();
        let mut split = LineSplitter::new(Direction::Out, 24);
        split.feed(b"{\"id\":1,\"res", &recorder);
        split.feed(b"ult\":{}}\nnot json\n{\"id\":2}\n", &recorder);
        split.feed(&[b'x'; 40], &recorder);
        split.feed(b"\n{\"id\":3}", &recorder);
        split.finish(&recorder);
        let got = lines(&path);
        assert_eq!(got.len(), 6, "{got:?}");
        assert_eq!(got[0]["message"], json!({"id": 1, "result": {}}));
        assert_eq!(got[0]["launch"], 3);
        assert_eq!(got[0]["direction"], "out");
        assert_eq!(got[1]["raw"], "not json");
        assert_eq!(got[2]["message"]["id"], 2);
        assert_eq!(got[3]["bytes"], 40, "said as soon as the cap is passed");
        assert!(got[3]["note"]
            .as_str()
            .unwrap()
            .starts_with("oversized line"));
        assert_eq!(got[4]["bytes"], 40, "and its size at its end");
        assert_eq!(got[5]["message"]["id"], 3);
    }

    #[test]
    fn the_transcript_is_cut_once_with_a_note_and_launch_records_still_land() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let recorder = Recorder::open(&path, 1, 20).unwrap();
        for id in 0..5 {
            recorder.line(Direction::In, format!("{{\"id\":{id}}}").as_bytes());
        }
        recorder.record("exit", serde_json::Map::new());
        let got = lines(&path);
        let kept = got.iter().filter(|l| l.get("message").is_some()).count();
        assert_eq!(kept, 2, "{got:?}");
        let notes: Vec<&Value> = got.iter().filter(|l| l.get("note").is_some()).collect();
        assert_eq!(notes.len(), 1);
        assert!(notes[0]["note"]
            .as_str()
            .unwrap()
            .starts_with("transcript cut"));
        assert_eq!(got.last().unwrap()["kind"], "exit");
    }
}
