//! Tolerant, bounded reading of one evidence file: every line comes back as JSON, as an
//! oversized line (only its length is kept), or as text that is not JSON; a missing file, an
//! unreadable one, or a last line cut mid-way is reported as such, never an error, because a
//! report must show what a broken run left behind. Files are opened as all evidence is
//! (`graders::evidence_file`): a FIFO, a link or an oversized file is shown as unreadable. Read by
//! the cell pages (`crate::html`) and for a red cell's cause (`crate::cause`: the stderr's tail).

use graders::evidence_file::{self, EvidenceFile, EvidenceFileError, MAX_STREAMED_BYTES};
use serde_json::Value;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// Longest line decoded; a longer one is skipped in bounded memory and shown by its length.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;
/// Most lines kept from one file (its head and its tail); the rest is counted, not kept.
pub(crate) const MAX_LINES: usize = 50_000;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Line {
    Json(Value),
    /// Not JSON (a truncated last line, a stray print); kept as (lossy) text.
    Text(String),
    /// Longer than [`MAX_LINE_BYTES`]: only its length is known.
    Oversized(usize),
}

/// What a file looked like, for the page's list of evidence files.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FileState {
    pub name: String,
    /// `ok`, `missing`, `unreadable`, `truncated` (last line without its newline and not JSON)
    /// or `cut` (more lines than the report keeps).
    pub state: &'static str,
    /// Its size, decompressed when it is compressed.
    pub bytes: u64,
    pub lines: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its name on disk when that is not `name` (`NAME.gz`, compressed once the cell ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stored: Option<String>,
}

impl FileState {
    fn ok(name: &str) -> Self {
        Self {
            name: name.to_string(),
            state: "ok",
            bytes: 0,
            lines: 0,
            note: None,
            stored: None,
        }
    }

    fn missing(&mut self) {
        self.state = "missing";
    }

    fn failed_to_open(&mut self, error: &EvidenceFileError) {
        self.state = match error {
            EvidenceFileError::TooLarge { .. } => "cut",
            _ => "unreadable",
        };
        self.note = Some(error.to_string());
    }
}

/// `dir/name` opened as evidence of at most `bound` bytes; `None` (and `state` says why) when
/// it is missing or refused.
fn open(dir: &Path, name: &str, bound: u64, state: &mut FileState) -> Option<EvidenceFile> {
    match evidence_file::open(&dir.join(name), bound) {
        Ok(Some(file)) => {
            if file.is_compressed() {
                state.stored = Some(format!("{name}{}", evidence_file::COMPRESSED_SUFFIX));
            }
            Some(file)
        }
        Ok(None) => {
            state.missing();
            None
        }
        Err(e) => {
            state.failed_to_open(&e);
            None
        }
    }
}

pub(crate) struct Read1 {
    /// `(1-based line number, line)`.
    pub lines: Vec<(usize, Line)>,
    pub state: FileState,
}

/// Read `dir/name` line by line within the bounds: past [`MAX_LINES`], its first and its last
/// `MAX_LINES / 2` lines (where a run starts and where it ended), the rest counted.
pub(crate) fn read(dir: &Path, name: &str) -> Read1 {
    let mut state = FileState::ok(name);
    let Some(file) = open(dir, name, MAX_STREAMED_BYTES, &mut state) else {
        return Read1 {
            lines: Vec::new(),
            state,
        };
    };
    state.bytes = file.len();
    let mut reader = BufReader::new(file);
    let mut lines = Vec::new();
    let mut tail: VecDeque<(usize, RawLine)> = VecDeque::new();
    let mut number = 0;
    loop {
        let raw = match read_bounded_line(&mut reader) {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => {
                state.state = "unreadable";
                state.note = Some(format!("after line {number}: {e}"));
                break;
            }
        };
        number += 1;
        if number <= MAX_LINES / 2 {
            lines.extend(decode(number, raw, &mut state));
            continue;
        }
        if tail.len() == MAX_LINES / 2 {
            tail.pop_front();
        }
        tail.push_back((number, raw));
    }
    if number > MAX_LINES {
        state.state = "cut";
        state.note = Some(format!(
            "the report reads its first and its last {} lines",
            MAX_LINES / 2
        ));
    }
    for (at, raw) in tail {
        lines.extend(decode(at, raw, &mut state));
    }
    state.lines = number;
    if reader.get_ref().is_compressed() {
        state.bytes = reader.get_ref().position();
    }
    Read1 { lines, state }
}

/// Line `number` as the report keeps it; `None` for a blank one.
fn decode(number: usize, raw: RawLine, state: &mut FileState) -> Option<(usize, Line)> {
    let line = match raw.bytes {
        None => Line::Oversized(raw.length),
        Some(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => return None,
        Some(bytes) => match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => Line::Json(value),
            Err(_) => {
                if !raw.ended {
                    state.state = "truncated";
                    state.note = Some(format!(
                        "line {number} ends without a newline and is not JSON (the writer was cut off)"
                    ));
                }
                Line::Text(String::from_utf8_lossy(&bytes).into_owned())
            }
        },
    };
    Some((number, line))
}

/// One line without its newline.
struct RawLine {
    /// `None` when longer than [`MAX_LINE_BYTES`].
    bytes: Option<Vec<u8>>,
    length: usize,
    /// It ended with `\n` (not at the end of the file).
    ended: bool,
}

fn read_bounded_line(reader: &mut impl BufRead) -> std::io::Result<Option<RawLine>> {
    let mut kept: Option<Vec<u8>> = Some(Vec::new());
    let mut length = 0;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok((length > 0).then_some(RawLine {
                bytes: kept,
                length,
                ended: false,
            }));
        }
        let (chunk, found) = match buffer.iter().position(|b| *b == b'\n') {
            Some(at) => (&buffer[..at], true),
            None => (buffer, false),
        };
        length += chunk.len();
        match &mut kept {
            Some(bytes) if bytes.len() + chunk.len() <= MAX_LINE_BYTES => {
                bytes.extend_from_slice(chunk)
            }
            _ => kept = None,
        }
        let used = chunk.len() + usize::from(found);
        reader.consume(used);
        if found {
            return Ok(Some(RawLine {
                bytes: kept,
                length,
                ended: true,
            }));
        }
    }
}

/// Longest whole-JSON file read (verdict.json, summary.json are a few KiB).
const MAX_WHOLE_BYTES: u64 = 16 << 20;

/// A file that is one JSON document (pretty-printed, not JSONL): its state and its value.
pub(crate) fn whole(dir: &Path, name: &str) -> (FileState, Option<Value>) {
    let mut state = FileState::ok(name);
    let Some(mut file) = open(dir, name, MAX_WHOLE_BYTES, &mut state) else {
        return (state, None);
    };
    let mut bytes = Vec::new();
    if let Err(e) = file.read_to_end(&mut bytes) {
        state.state = "unreadable";
        state.note = Some(e.to_string());
        return (state, None);
    }
    state.bytes = bytes.len() as u64;
    state.lines = bytes.iter().filter(|b| **b == b'\n').count();
    match serde_json::from_slice(&bytes) {
        Ok(value) => (state, Some(value)),
        Err(e) => {
            state.state = "truncated";
            state.note = Some(format!("not valid JSON ({e})"));
            (state, None)
        }
    }
}

/// The last `max` bytes of a text file (stderr), lossily decoded, and its size; `Ok(None)`
/// when absent, an error naming it when it is refused or unreadable.
pub(crate) fn tail(dir: &Path, name: &str, max: u64) -> Result<Option<(String, u64)>, String> {
    use std::io::{Seek, SeekFrom};
    let Some(mut file) =
        evidence_file::open(&dir.join(name), MAX_STREAMED_BYTES).map_err(|e| e.to_string())?
    else {
        return Ok(None);
    };
    let reading = |e: std::io::Error| format!("reading {}: {e}", dir.join(name).display());
    if file.is_compressed() {
        // Read from its start, keeping the last `max` bytes.
        let keep = usize::try_from(max).unwrap_or(usize::MAX);
        let mut bytes = VecDeque::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = file.read(&mut chunk).map_err(reading)?;
            if n == 0 {
                break;
            }
            bytes.extend(&chunk[..n]);
            let over = bytes.len().saturating_sub(keep);
            bytes.drain(..over);
        }
        let bytes: Vec<u8> = bytes.into();
        return Ok(Some((
            String::from_utf8_lossy(&bytes).into_owned(),
            file.position(),
        )));
    }
    let size = file.len();
    let mut bytes = Vec::new();
    file.seek(SeekFrom::Start(size.saturating_sub(max)))
        .and_then(|_| file.take(max).read_to_end(&mut bytes))
        .map_err(reading)?;
    Ok(Some((String::from_utf8_lossy(&bytes).into_owned(), size)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_tolerantly_and_within_bounds() {
        let dir = tempfile::tempdir().unwrap();
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        std::fs::write(
            dir.path().join("a.jsonl"),
            format!("{{\"a\":1}}\nnot json\n\n\"{long}\"\n{{\"cut\":"),
        )
        .unwrap();
        let read1 = read(dir.path(), "a.jsonl");
        assert_eq!(read1.state.state, "truncated", "{:?}", read1.state);
        assert_eq!(read1.state.lines, 5);
        let kinds: Vec<_> = read1
            .lines
            .iter()
            .map(|(n, l)| match l {
                Line::Json(_) => format!("{n}:json"),
                Line::Text(_) => format!("{n}:text"),
                Line::Oversized(len) => format!("{n}:oversized {len}"),
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                "1:json".to_string(),
                "2:text".into(),
                format!("4:oversized {}", MAX_LINE_BYTES + 12),
                "5:text".into()
            ]
        );
        assert_eq!(read(dir.path(), "absent.jsonl").state.state, "missing");
        std::fs::write(dir.path().join("err.log"), "abcdef").unwrap();
        assert_eq!(tail(dir.path(), "err.log", 3), Ok(Some(("def".into(), 6))));
    }

    #[test]
    fn a_compressed_file_is_read_through_its_name_and_linked_by_its_name_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let lines: String = (0..1000).map(|n| format!("{{\"n\":{n}}}\n")).collect();
        std::fs::write(dir.path().join("transcript.jsonl"), &lines).unwrap();
        let stderr: String = (0..5000).map(|n| format!("line {n}\n")).collect();
        std::fs::write(dir.path().join("stderr.log"), &stderr).unwrap();
        for name in ["transcript.jsonl", "stderr.log"] {
            evidence_file::compress(&dir.path().join(name), 0)
                .unwrap()
                .unwrap();
        }

        let read1 = read(dir.path(), "transcript.jsonl");
        assert_eq!(read1.state.state, "ok", "{:?}", read1.state);
        assert_eq!(read1.state.lines, 1000);
        assert_eq!(
            read1.state.bytes,
            lines.len() as u64,
            "its size decompressed"
        );
        assert_eq!(read1.state.stored.as_deref(), Some("transcript.jsonl.gz"));
        let (tail, bytes) = tail(dir.path(), "stderr.log", 10).unwrap().unwrap();
        assert_eq!((tail.as_str(), bytes), ("line 4999\n", stderr.len() as u64));
    }
}
