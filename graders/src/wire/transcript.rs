//! Reading a cell's transcript (`transcript.jsonl`, documented in `docs/events.md`, "The
//! transcript") into typed records. Lines without a `launch` belong to launch 1, so a transcript
//! written by the fake app-server or by an in-process client reads the same way.
//!
//! The bounds of a transcript are stated here, once: the harness's recorder (the `tap` crate)
//! applies them where the bytes arrive and notes every cut in the transcript, and this reader's
//! own limits are derived from them, so the reader never refuses what the recorder kept.
//!
//! This module owns the format: the reader here, the one encoder of its lines in [`write`].

use serde_json::Value;
use std::io::BufRead;

pub mod write;

/// The longest line of the wire (or of the app-server's stderr) the recorder keeps; a longer one
/// is relayed whole and recorded by its size only (a note).
pub const MAX_KEPT_LINE_BYTES: usize = 1024 * 1024;
/// The most bytes of lines the recorder keeps in one cell's transcript (every launch together);
/// past it the lines are relayed and not kept (a note says so).
pub const MAX_KEPT_BYTES: u64 = 64 * 1024 * 1024;
/// The most lines (wire lines, notes of oversized lines, stderr lines) the recorder keeps in one
/// cell's transcript; past it, as for bytes. Each record costs the translator memory whatever
/// its size, so this, not the byte bound, bounds a flood of tiny lines.
pub const MAX_KEPT_LINES: usize = 250_000;
/// The most launches one cell's transcript records; a further launch is refused (its tap exits
/// with a message) and noted.
pub const MAX_LAUNCHES: usize = 1_000;
/// The records of one launch besides its lines: the launch, stdin and stdout closed, the exit,
/// and the recorder's notes (cuts, a stopped reader, a refused launch).
pub const MAX_RECORDS_PER_LAUNCH: usize = 16;
/// The most bytes of the app-server's stderr kept per launch (a note when cut).
pub const MAX_STDERR_BYTES_PER_LAUNCH: usize = 256 * 1024;
/// The most `mutation` records of one cell (`harness mutate`): later applications of the
/// operator are counted by the recorder, and noted once, not recorded each.
pub const MAX_MUTATION_RECORDS: usize = 100;
/// The most `timing` records of one cell (a transport timing the tap applied); later
/// applications are noted once, not recorded each.
pub const MAX_TIMING_RECORDS: usize = 100;
/// Most records read from one transcript: everything the recorder may write.
pub const MAX_RECORDS: usize = MAX_KEPT_LINES
    + MAX_LAUNCHES * MAX_RECORDS_PER_LAUNCH
    + MAX_MUTATION_RECORDS
    + MAX_TIMING_RECORDS;
/// Longest transcript line accepted: a kept line of [`MAX_KEPT_LINE_BYTES`] as a record, where
/// text that is not JSON is escaped (a control byte takes six) and bytes that are not UTF-8 are
/// also kept in base64.
pub const MAX_TRANSCRIPT_LINE_BYTES: usize = 8 * MAX_KEPT_LINE_BYTES + 4096;

/// Which way a line went, seen from the app-server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From the driver to the app-server.
    In,
    /// From the app-server to the driver.
    Out,
}

impl Direction {
    /// The line's `direction`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::In => "in",
            Direction::Out => "out",
        }
    }
}

/// One launch of the app-server through the tap.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Launch {
    pub launch: u64,
    pub time: u64,
    /// The driver's arguments after the program name, verbatim.
    pub argv: Vec<String>,
    pub env_names: Vec<String>,
    pub cwd: Option<String>,
    /// What the cell added after the driver's arguments.
    pub added_args: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Launch(Launch),
    Message {
        launch: u64,
        direction: Direction,
        time: u64,
        message: Value,
    },
    /// A line that is not JSON (`text` is lossy where the bytes are not UTF-8; the recorder
    /// keeps those bytes in base64 too). `partial`: the stream ended (or the cell did) before the
    /// line's newline.
    Raw {
        launch: u64,
        direction: Direction,
        time: u64,
        text: String,
        partial: bool,
    },
    /// A line the app-server wrote on its stderr (lossy where not UTF-8).
    Stderr {
        launch: u64,
        time: u64,
        text: String,
    },
    /// A remark; `bytes` is the size of a line that was not kept (an oversized line).
    Note {
        launch: u64,
        direction: Direction,
        time: u64,
        note: String,
        bytes: Option<u64>,
        /// The driver stopped reading this many bytes into a line of the app-server's output.
        delivered: Option<u64>,
    },
    StdinClosed {
        launch: u64,
        time: u64,
    },
    /// The driver sent its `codex` (the tap) a signal, which the harness passed on to the
    /// app-server.
    DriverSignal {
        launch: u64,
        time: u64,
        signal: i64,
    },
    /// The app-server closed its stdout (the driver was given end of input).
    StdoutClosed {
        launch: u64,
        time: u64,
    },
    Exit {
        launch: u64,
        time: u64,
        status: Option<i64>,
        signal: Option<i64>,
        error: Option<String>,
        /// The harness killed it, and why (its tap's connection closed: the driver let go of its
        /// `codex`; the cell ended): it did not go away on its own.
        killed_by_harness: Option<String>,
    },
    /// The harness applied a mutation operator (`harness mutate`): what the driver sent
    /// (`original`, an excerpt) and what the app-server got instead (`became`). The lines
    /// around it are what the app-server received; the record only says they are a mutant's.
    Mutation {
        launch: u64,
        time: u64,
        operator: String,
        original: String,
        became: String,
    },
    /// The harness's tap applied the case's transport timing (`tap::timing`): it withheld the
    /// driver's request (`withhold`), or held the app-server's answer and delivered it later
    /// (`answer-after-events`). The lines around it are in the order the driver got them; the
    /// record says that order is the harness's, not the app-server's.
    Timing {
        launch: u64,
        time: u64,
        rule: String,
        method: String,
        did: String,
    },
}

impl Record {
    /// When the tap wrote it (unix ms).
    pub fn time(&self) -> u64 {
        match self {
            Record::Launch(l) => l.time,
            Record::Message { time, .. }
            | Record::Raw { time, .. }
            | Record::Note { time, .. }
            | Record::Stderr { time, .. }
            | Record::StdinClosed { time, .. }
            | Record::DriverSignal { time, .. }
            | Record::StdoutClosed { time, .. }
            | Record::Exit { time, .. }
            | Record::Mutation { time, .. }
            | Record::Timing { time, .. } => *time,
        }
    }

    pub fn launch(&self) -> u64 {
        match self {
            Record::Launch(l) => l.launch,
            Record::Message { launch, .. }
            | Record::Raw { launch, .. }
            | Record::Note { launch, .. }
            | Record::Stderr { launch, .. }
            | Record::StdinClosed { launch, .. }
            | Record::DriverSignal { launch, .. }
            | Record::StdoutClosed { launch, .. }
            | Record::Exit { launch, .. }
            | Record::Mutation { launch, .. }
            | Record::Timing { launch, .. } => *launch,
        }
    }
}

/// A transcript that cannot be read, naming the 1-based line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("transcript line {line}: {why}")]
pub struct TranscriptError {
    pub line: usize,
    pub why: String,
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|s| s.as_str().map_or_else(|| s.to_string(), str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn parse_line(entry: &Value) -> Result<Record, String> {
    let launch = entry.get("launch").and_then(Value::as_u64).unwrap_or(1);
    let time = entry
        .get("time")
        .and_then(Value::as_u64)
        .unwrap_or_default();
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_string);
    if let Some(kind) = entry.get("kind").and_then(Value::as_str) {
        return match kind {
            "launch" => Ok(Record::Launch(Launch {
                launch,
                time,
                argv: strings(entry.get("argv")),
                env_names: strings(entry.get("env_names")),
                cwd: text("cwd"),
                added_args: strings(entry.get("added_args")),
            })),
            "stdin-closed" => Ok(Record::StdinClosed { launch, time }),
            "driver-signal" => Ok(Record::DriverSignal {
                launch,
                time,
                signal: entry.get("signal").and_then(Value::as_i64).unwrap_or(0),
            }),
            "stdout-closed" => Ok(Record::StdoutClosed { launch, time }),
            "stderr" => Ok(Record::Stderr {
                launch,
                time,
                text: text("text").unwrap_or_default(),
            }),
            "exit" => Ok(Record::Exit {
                launch,
                time,
                status: entry.get("status").and_then(Value::as_i64),
                signal: entry.get("signal").and_then(Value::as_i64),
                error: text("error"),
                killed_by_harness: text("killed_by_harness"),
            }),
            "mutation" => Ok(Record::Mutation {
                launch,
                time,
                operator: text("operator")
                    .ok_or_else(|| "a mutation record without its operator".to_string())?,
                original: text("original").unwrap_or_default(),
                became: text("became").unwrap_or_default(),
            }),
            "timing" => Ok(Record::Timing {
                launch,
                time,
                rule: text("rule").ok_or_else(|| "a timing record without its rule".to_string())?,
                method: text("method").unwrap_or_default(),
                did: text("did").unwrap_or_default(),
            }),
            other => Err(format!("unknown record kind `{other}`")),
        };
    }
    let direction = match entry.get("direction").and_then(Value::as_str) {
        Some("in") => Direction::In,
        Some("out") => Direction::Out,
        other => {
            return Err(format!(
                "no record kind and no direction (direction {other:?})"
            ))
        }
    };
    if let Some(message) = entry.get("message") {
        return Ok(Record::Message {
            launch,
            direction,
            time,
            message: message.clone(),
        });
    }
    if let Some(raw) = text("raw") {
        return Ok(Record::Raw {
            launch,
            direction,
            time,
            text: raw,
            partial: entry.get("partial").and_then(Value::as_bool) == Some(true),
        });
    }
    if let Some(note) = text("note") {
        return Ok(Record::Note {
            launch,
            direction,
            time,
            note,
            bytes: entry.get("bytes").and_then(Value::as_u64),
            delivered: entry.get("delivered").and_then(Value::as_u64),
        });
    }
    Err("a direction but no `message`, `raw` or `note`".into())
}

/// Read every record; the first bad line is an error naming it.
pub fn read(reader: impl BufRead) -> Result<Vec<Record>, TranscriptError> {
    let mut records = Vec::new();
    let mut reader = reader;
    let mut buf = Vec::new();
    let mut line = 0;
    loop {
        buf.clear();
        let n = std::io::Read::take(&mut reader, MAX_TRANSCRIPT_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| TranscriptError {
                line: line + 1,
                why: e.to_string(),
            })?;
        if n == 0 {
            break;
        }
        line += 1;
        let bad = |why: String| TranscriptError { line, why };
        if buf.len() > MAX_TRANSCRIPT_LINE_BYTES {
            return Err(bad(format!(
                "longer than {MAX_TRANSCRIPT_LINE_BYTES} bytes"
            )));
        }
        if buf.trim_ascii().is_empty() {
            continue;
        }
        if records.len() >= MAX_RECORDS {
            return Err(bad(format!("more than {MAX_RECORDS} records")));
        }
        let entry: Value =
            serde_json::from_slice(&buf).map_err(|e| bad(format!("not JSON: {e}")))?;
        records.push(parse_line(&entry).map_err(bad)?);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_shape_reads_and_a_bad_line_is_named() {
        let text = concat!(
            "{\"kind\":\"launch\",\"launch\":2,\"time\":5,\"argv\":[\"app-server\"],\"env_names\":[\"PATH\"],\"cwd\":\"/w\",\"added_args\":[]}\n",
            "{\"direction\":\"in\",\"time\":6,\"launch\":2,\"message\":{\"id\":1}}\n",
            "{\"direction\":\"out\",\"time\":7,\"raw\":\"garbage\"}\n",
            "{\"direction\":\"out\",\"time\":8,\"launch\":2,\"note\":\"oversized line\",\"bytes\":9}\n",
            "\n",
            "{\"kind\":\"stdin-closed\",\"launch\":2,\"time\":9}\n",
            "{\"kind\":\"exit\",\"launch\":2,\"time\":10,\"status\":null,\"signal\":9,\"error\":null}\n",
        );
        let records = read(text.as_bytes()).unwrap();
        assert_eq!(records.len(), 6);
        assert!(
            matches!(&records[0], Record::Launch(l) if l.argv == ["app-server"] && l.launch == 2)
        );
        assert_eq!(records[2].launch(), 1, "no launch: launch 1");
        assert!(matches!(records[3], Record::Note { bytes: Some(9), .. }));
        assert!(matches!(
            records[5],
            Record::Exit {
                signal: Some(9),
                status: None,
                ..
            }
        ));
        let recorder_lines = concat!(
            "{\"direction\":\"out\",\"time\":1,\"launch\":1,\"raw\":\"{\\\"id\\\":\",\"partial\":true}\n",
            "{\"kind\":\"stderr\",\"launch\":1,\"time\":2,\"text\":\"error: no\"}\n",
            "{\"kind\":\"stdout-closed\",\"launch\":1,\"time\":3}\n",
            "{\"kind\":\"exit\",\"launch\":1,\"time\":4,\"status\":null,\"signal\":9,\"error\":null,\"killed_by_harness\":\"the cell ended\"}\n",
        );
        let records = read(recorder_lines.as_bytes()).unwrap();
        assert!(
            matches!(&records[0], Record::Raw { partial: true, text, .. } if text == "{\"id\":")
        );
        assert!(matches!(&records[1], Record::Stderr { text, .. } if text == "error: no"));
        assert!(matches!(
            records[2],
            Record::StdoutClosed { launch: 1, time: 3 }
        ));
        assert!(
            matches!(&records[3], Record::Exit { killed_by_harness: Some(why), .. } if why == "the cell ended")
        );
        let mutation = "{\"kind\":\"mutation\",\"launch\":1,\"time\":5,\"operator\":\"drop-initialized\",\"applied\":1,\"original\":\"{\\\"method\\\":\\\"initialized\\\"}\",\"became\":\"not forwarded\"}\n";
        let records = read(mutation.as_bytes()).unwrap();
        assert!(
            matches!(&records[0], Record::Mutation { operator, original, became, .. } if operator == "drop-initialized" && original == "{\"method\":\"initialized\"}" && became == "not forwarded")
        );
        assert!(read("{\"kind\":\"mutation\",\"time\":1}\n".as_bytes()).is_err());
        let timing = "{\"kind\":\"timing\",\"launch\":1,\"time\":6,\"rule\":\"withhold\",\"method\":\"thread/start\",\"id\":2,\"did\":\"not delivered\"}\n";
        let records = read(timing.as_bytes()).unwrap();
        assert!(
            matches!(&records[0], Record::Timing { rule, method, did, time: 6, .. } if rule == "withhold" && method == "thread/start" && did == "not delivered")
        );
        assert!(read("{\"kind\":\"timing\",\"time\":1}\n".as_bytes()).is_err());
        let err =
            read("{\"direction\":\"in\",\"message\":{}}\n{\"x\":1}\n".as_bytes()).unwrap_err();
        assert_eq!(err.line, 2);
        assert_eq!(read("nope\n".as_bytes()).unwrap_err().line, 1);
    }
}
