//! The transcript as the harness writes it (`transcript.jsonl`, `docs/events.md`, "The
//! transcript"): one file per cell, written only by the harness's recorder
//! ([`crate::session`]). Its lines are encoded by the format's owner
//! (`graders::wire::transcript::write`), tagged here with their launch.
//!
//! The bounds are the transcript format's own (`graders::wire::transcript`: a kept line, the
//! cell's kept bytes and kept lines, the launches, a launch's stderr), applied here where the
//! bytes arrive, each cut noted once. Everything the recorder writes goes through one digest
//! ([`Seal`]), so the harness can tell its transcript from one rewritten behind its back.

use graders::events::now_ms;
use graders::wire::transcript::Direction;
use graders::wire::transcript::{
    write, MAX_KEPT_BYTES, MAX_KEPT_LINES, MAX_KEPT_LINE_BYTES, MAX_STDERR_BYTES_PER_LAUNCH,
};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// What the harness wrote into a transcript: its size and SHA-256. A transcript whose bytes on
/// disk differ was written by someone else too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    pub bytes: u64,
    pub sha256: String,
}

impl Seal {
    /// `Ok` when `path` holds exactly what was sealed; else why not, in words.
    pub fn check(&self, path: &Path) -> Result<(), String> {
        // Opened as evidence is (a FIFO in its place must not block the cell); the bound is the
        // seal's, below.
        let file = graders::evidence_file::open(path, u64::MAX)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("reading {}: there is none", path.display()))?;
        let mut hasher = Sha256::new();
        let mut bytes = 0u64;
        // One byte more than sealed is enough to tell a longer file.
        let mut limited = file.take(self.bytes + 1);
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = limited
                .read(&mut buf)
                .map_err(|e| format!("reading {}: {e}", path.display()))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            bytes += n as u64;
        }
        let sha256 = hex::encode(hasher.finalize());
        if bytes == self.bytes && sha256 == self.sha256 {
            return Ok(());
        }
        Err(format!(
            "{} is not what the harness recorded ({} bytes on disk{}, {} recorded): something else wrote to the cell's evidence",
            path.display(),
            bytes,
            if bytes > self.bytes { " or more" } else { "" },
            self.bytes
        ))
    }
}

struct File_ {
    file: File,
    hasher: Sha256,
    bytes: u64,
    sealed: bool,
}

/// One cell's transcript: every launch writes through it. Each write is one whole record (or a
/// chunk's whole records), so launches and directions interleave whole lines only.
pub struct Transcript {
    out: Mutex<File_>,
    kept_bytes: AtomicU64,
    kept_lines: AtomicUsize,
    cut: AtomicBool,
}

impl Transcript {
    /// Create the transcript at `path` (replacing a file there).
    pub fn create(path: &Path) -> std::io::Result<Arc<Self>> {
        let file = File::create(path)?;
        Ok(Arc::new(Self {
            out: Mutex::new(File_ {
                file,
                hasher: Sha256::new(),
                bytes: 0,
                sealed: false,
            }),
            kept_bytes: AtomicU64::new(0),
            kept_lines: AtomicUsize::new(0),
            cut: AtomicBool::new(false),
        }))
    }

    /// The writer of launch `launch`.
    pub fn launch(self: &Arc<Self>, launch: u64) -> LaunchLog {
        LaunchLog {
            transcript: self.clone(),
            launch,
            stderr_kept: AtomicUsize::new(0),
            stderr_cut: AtomicBool::new(false),
        }
    }

    /// Stop writing and say what was written. Later writes (a relay thread still draining a
    /// pipe a leftover process holds) are dropped, so the file stays what the seal says.
    pub fn seal(&self) -> Seal {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        out.sealed = true;
        let _ = out.file.flush();
        Seal {
            bytes: out.bytes,
            sha256: hex::encode(out.hasher.clone().finalize()),
        }
    }

    fn write(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if out.sealed {
            return;
        }
        // Evidence only: a full disk must not break the relay. What did land is what the seal
        // covers.
        if out.file.write_all(bytes).is_ok() {
            out.hasher.update(bytes);
            out.bytes += bytes.len() as u64;
        }
    }

    /// Whether one more line of `len` bytes may be kept; the first refusal says which bound cut
    /// the transcript (returned, for the caller to write as a note).
    fn admit(&self, len: usize) -> Result<(), Option<String>> {
        if self.cut.load(Ordering::Relaxed) {
            return Err(None);
        }
        let lines = self.kept_lines.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = self.kept_bytes.fetch_add(len as u64, Ordering::Relaxed) + len as u64;
        let why = if lines > MAX_KEPT_LINES {
            format!("{MAX_KEPT_LINES} lines")
        } else if bytes > MAX_KEPT_BYTES {
            format!("{MAX_KEPT_BYTES} bytes")
        } else {
            return Ok(());
        };
        if self.cut.swap(true, Ordering::Relaxed) {
            return Err(None);
        }
        Err(Some(format!(
            "transcript cut: the cell's lines passed the recorder's bound of {why}; later lines were relayed but not kept"
        )))
    }
}

/// One launch's writer.
pub struct LaunchLog {
    transcript: Arc<Transcript>,
    launch: u64,
    stderr_kept: AtomicUsize,
    stderr_cut: AtomicBool,
}

impl LaunchLog {
    pub fn launch(&self) -> u64 {
        self.launch
    }

    /// A launch record (`kind`, this launch and `time` are added); never cut.
    pub fn record_at(&self, kind: &str, time: u64, fields: Map<String, Value>) {
        let mut line = Vec::new();
        write::launch_record(&mut line, kind, self.launch, time, fields);
        self.transcript.write(&line);
    }

    /// [`LaunchLog::record_at`] now.
    pub fn record(&self, kind: &str, fields: Map<String, Value>) {
        self.record_at(kind, now_ms(), fields)
    }

    /// A remark about the stream; `bytes` is the size of a line that was not kept.
    pub fn note(&self, direction: Direction, note: &str, bytes: Option<usize>) {
        self.note_counting(direction, note, bytes.map(|bytes| ("bytes", bytes as u64)));
    }

    /// The driver stopped taking the app-server's output `delivered` bytes into a line (the
    /// line's end was never delivered to it, whatever the app-server went on to write).
    pub fn note_let_go_mid_line(&self, delivered: u64) {
        self.note_counting(
            Direction::Out,
            "the driver stopped reading the tap's stdout in the middle of a line",
            Some(("delivered", delivered)),
        );
    }

    /// A note, with a byte count under its key when there is one.
    fn note_counting(&self, direction: Direction, note: &str, count: Option<(&str, u64)>) {
        let mut line = Vec::new();
        write::note_line(
            &mut line,
            direction,
            now_ms(),
            Some(self.launch),
            note,
            count,
        );
        self.transcript.write(&line);
    }

    /// Whether a line of `len` bytes is kept; a cut is noted at once.
    fn admit(&self, direction: Direction, len: usize) -> bool {
        match self.transcript.admit(len) {
            Ok(()) => true,
            Err(Some(note)) => {
                self.note(direction, &note, None);
                false
            }
            Err(None) => false,
        }
    }

    /// A complete line (without its newline) as it went through.
    pub fn line(&self, direction: Direction, line: &[u8], partial: bool) {
        let mut out = Vec::new();
        self.line_into(direction, line, partial, &mut out);
        self.transcript.write(&out);
    }

    /// [`LaunchLog::line`], appended to `out` for one write of a whole chunk's lines.
    fn line_into(&self, direction: Direction, line: &[u8], partial: bool, out: &mut Vec<u8>) {
        let trimmed = line.trim_ascii();
        if trimmed.is_empty() {
            return;
        }
        if !self.admit(direction, trimmed.len()) {
            return;
        }
        let json = std::str::from_utf8(trimmed)
            .is_ok_and(|text| serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok());
        let (time, launch) = (now_ms(), Some(self.launch));
        if json {
            write::message_line(out, direction, time, launch, partial, trimmed);
        } else {
            write::raw_line(out, direction, time, launch, partial, trimmed);
        }
    }

    /// A line of the app-server's stderr; past the launch's stderr bound, a note and nothing
    /// more.
    pub fn stderr_line(&self, line: &[u8], partial: bool) {
        if line.is_empty() || self.stderr_cut.load(Ordering::Relaxed) {
            return;
        }
        let kept = self.stderr_kept.fetch_add(line.len(), Ordering::Relaxed) + line.len();
        if kept > MAX_STDERR_BYTES_PER_LAUNCH {
            if !self.stderr_cut.swap(true, Ordering::Relaxed) {
                self.note(
                    Direction::Out,
                    &format!(
                        "stderr cut: the app-server's stderr passed the recorder's bound of {MAX_STDERR_BYTES_PER_LAUNCH} bytes for a launch; the rest was relayed but not kept"
                    ),
                    None,
                );
            }
            return;
        }
        if !self.admit(Direction::Out, line.len()) {
            return;
        }
        let mut entry = Map::new();
        write::text_fields(line, "text", &mut entry);
        if partial {
            entry.insert("partial".into(), true.into());
        }
        self.record("stderr", entry);
    }
}

/// Splits a relayed byte stream into lines for the recorder, keeping at most
/// [`MAX_KEPT_LINE_BYTES`] of a line; a longer one is reported by its size only.
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
    pub fn new(direction: Direction) -> Self {
        Self::with_max(direction, MAX_KEPT_LINE_BYTES)
    }

    /// A splitter keeping lines of at most `max` bytes (tests use small ones).
    pub fn with_max(direction: Direction, max: usize) -> Self {
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
    pub fn feed(&mut self, mut chunk: &[u8], log: &LaunchLog) {
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
                log.line_into(self.direction, part, false, &mut batch);
                continue;
            }
            let room = self.max.saturating_sub(self.buf.len());
            let keep = part.len().min(room);
            self.buf.extend_from_slice(&part[..keep]);
            let crossing = self.dropped == 0 && keep < part.len();
            self.dropped += part.len() - keep;
            if crossing {
                log.transcript.write(&batch);
                batch.clear();
                // Said at once: a driver that gives up on the line may let go of its `codex`
                // before the line's end arrives.
                log.note(
                    self.direction,
                    &format!(
                        "oversized line: over the recorder's bound of {} bytes; relayed whole, not kept",
                        self.max
                    ),
                    Some(self.buf.len() + self.dropped),
                );
            }
            if newline {
                log.transcript.write(&batch);
                batch.clear();
                self.emit(log, false);
            }
        }
        log.transcript.write(&batch);
        self.batch = batch;
    }

    fn emit(&mut self, log: &LaunchLog, partial: bool) {
        if self.dropped > 0 {
            let total = self.buf.len() + self.dropped;
            let note = if partial {
                format!("the oversized line was cut off after {total} bytes: the stream ended before its newline")
            } else {
                format!("the oversized line ended after {total} bytes")
            };
            log.note(self.direction, &note, Some(total));
        } else {
            log.line(self.direction, &self.buf, partial);
        }
        self.buf.clear();
        self.dropped = 0;
    }

    /// The end of the stream: a last line without its newline is still recorded, marked
    /// partial.
    pub fn finish(&mut self, log: &LaunchLog) {
        if !self.buf.is_empty() || self.dropped > 0 {
            self.emit(log, true);
        }
    }
}

/// Splits the app-server's stderr into lines for [`LaunchLog::stderr_line`].
#[derive(Default)]
pub struct StderrSplitter {
    buf: Vec<u8>,
}

impl StderrSplitter {
    pub fn feed(&mut self, mut chunk: &[u8], log: &LaunchLog) {
        while let Some(at) = chunk.iter().position(|&b| b == b'\n') {
            if self.buf.is_empty() {
                log.stderr_line(&chunk[..at], false);
            } else {
                self.take(&chunk[..at]);
                log.stderr_line(&self.buf, false);
                self.buf.clear();
            }
            chunk = &chunk[at + 1..];
        }
        self.take(chunk);
    }

    /// Keep at most a launch's stderr bound of one line: the rest could never be kept anyway.
    fn take(&mut self, part: &[u8]) {
        let room = (MAX_STDERR_BYTES_PER_LAUNCH + 1).saturating_sub(self.buf.len());
        self.buf.extend_from_slice(&part[..part.len().min(room)]);
    }

    pub fn finish(&mut self, log: &LaunchLog) {
        if !self.buf.is_empty() {
            log.stderr_line(&self.buf, true);
            self.buf.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use serde_json::json;

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
        let transcript = Transcript::create(&path).unwrap();
        let log = transcript.launch(3);
        let mut split = LineSplitter::with_max(Direction::Out, 24);
        split.feed(b"{\"id\":1,\"res", &log);
        split.feed(b"ult\":{}}\nnot json\n{\"id\":2}\n", &log);
        split.feed(&[b'x'; 40], &log);
        split.feed(b"\n{\"id\":3}", &log);
        split.finish(&log);
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
        assert_eq!(got[5]["partial"], true, "a last line without its newline");
        assert!(got[2].get("partial").is_none());
    }

    #[test]
    fn bytes_that_are_not_utf8_are_kept_escaped_and_the_line_still_reads() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let transcript = Transcript::create(&path).unwrap();
        let log = transcript.launch(1);
        let mut split = LineSplitter::new(Direction::Out);
        split.feed(b"{\"text\":\"caf\xe9\"}\n{\"id\":1}\n", &log);
        let mut stderr = StderrSplitter::default();
        stderr.feed(b"bad \xff byte\npartial", &log);
        stderr.finish(&log);
        let got = lines(&path);
        assert_eq!(got[0]["raw"], "{\"text\":\"caf\u{fffd}\"}");
        let exact = base64::engine::general_purpose::STANDARD
            .decode(got[0]["raw_b64"].as_str().unwrap())
            .unwrap();
        assert_eq!(exact, b"{\"text\":\"caf\xe9\"}");
        assert_eq!(got[1]["message"]["id"], 1, "the rest of the stream is kept");
        assert_eq!(got[2]["kind"], "stderr");
        assert_eq!(got[2]["text"], "bad \u{fffd} byte");
        assert!(got[2]["raw_b64"].is_string());
        assert_eq!(got[3]["text"], "partial");
        assert_eq!(got[3]["partial"], true);
        let records =
            graders::wire::transcript::read(std::io::BufReader::new(File::open(&path).unwrap()))
                .unwrap();
        assert_eq!(records.len(), 4);
    }

    #[test]
    fn the_seal_tells_the_recorded_transcript_from_a_rewritten_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let transcript = Transcript::create(&path).unwrap();
        let log = transcript.launch(1);
        log.line(Direction::In, b"{\"id\":1}", false);
        log.record("exit", Map::new());
        let seal = transcript.seal();
        log.line(Direction::In, b"{\"id\":2}", false);
        assert_eq!(
            seal.check(&path),
            Ok(()),
            "nothing is written after the seal"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"id\":1", "\"id\":7")).unwrap();
        let err = seal.check(&path).unwrap_err();
        assert!(err.contains("not what the harness recorded"), "{err}");
        std::fs::write(&path, text.clone() + "{}\n").unwrap();
        assert!(seal.check(&path).is_err(), "a longer file");
    }
}
