//! The timeline's entries: one per line of events.jsonl, transcript.jsonl and model-log.jsonl,
//! each with a one-line gist and its (bounded) body, and their merge into one order.

use crate::evidence_lines::Line;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;

/// Longest body (pretty JSON) kept per timeline entry; the rest is in the evidence file.
const MAX_BODY_CHARS: usize = 8 * 1024;
/// Longest one-line summary of an entry.
const MAX_TEXT_CHARS: usize = 200;

/// One row of a cell's timeline. In report.html each is a JSON array, `[t, src, seq, file,
/// line, title, text, body, cited]` (report.js names the fields again): a report holds tens of
/// thousands of rows, and their keys were a fifth of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Unix milliseconds, when the line carries a time.
    pub t: Option<u64>,
    /// `in` (driver → app-server), `out` (app-server → driver), `driver`, `harness`, `model`
    /// (events by source), `model-log`, `note`, `raw` (a line that is not JSON), `record` (a
    /// transcript line of another kind, e.g. the tap's launch records).
    pub src: &'static str,
    pub seq: Option<u64>,
    pub file: &'static str,
    pub line: usize,
    pub title: String,
    pub text: String,
    /// The whole line, bounded; empty when the report's budget left it out (`super::budget`).
    pub body: String,
    pub cited: bool,
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (
            self.t,
            self.src,
            self.seq,
            self.file,
            self.line,
            &self.title,
            &self.text,
            &self.body,
            u8::from(self.cited),
        )
            .serialize(serializer)
    }
}

pub(super) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{}…", &text[..at]),
    }
}

pub(super) fn one_line(text: &str) -> String {
    cut(
        &text.split_whitespace().collect::<Vec<_>>().join(" "),
        MAX_TEXT_CHARS,
    )
}

pub(super) fn compact(value: &Value) -> String {
    one_line(&value.to_string())
}

/// Multi-line strings in a value (tool outputs, plans, stderr), with their JSON paths: shown
/// below the JSON as they read, since `\n` escapes hide their shape.
fn texts_in<'a>(value: &'a Value, path: &str, found: &mut Vec<(String, &'a str)>) {
    match value {
        Value::String(text) if text.contains('\n') && found.len() < 4 => {
            found.push((path.to_string(), text));
        }
        Value::Object(map) => {
            for (key, inner) in map {
                texts_in(inner, &format!("{path}.{key}"), found);
            }
        }
        Value::Array(items) => {
            for (index, inner) in items.iter().enumerate() {
                texts_in(inner, &format!("{path}[{index}]"), found);
            }
        }
        _ => {}
    }
}

pub(super) fn body_of(value: &Value, file: &str, line: usize) -> String {
    let mut pretty = serde_json::to_string_pretty(value).unwrap_or_default();
    let mut texts = Vec::new();
    texts_in(value, "", &mut texts);
    for (path, text) in texts {
        pretty.push_str(&format!(
            "\n\n── {} ──\n{text}",
            path.trim_start_matches('.')
        ));
    }
    if pretty.chars().count() <= MAX_BODY_CHARS {
        pretty
    } else {
        format!(
            "{}\n… cut here: the whole line is {} bytes, see {file} line {line}",
            cut(&pretty, MAX_BODY_CHARS),
            value.to_string().len()
        )
    }
}

pub(super) fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A line's time: `ts_ms` (events v2) or `time` (transcript), unix milliseconds.
pub(super) fn time_of(value: &Value) -> Option<u64> {
    value
        .get("ts_ms")
        .or_else(|| value.get("time"))
        .and_then(Value::as_u64)
}

pub(super) fn not_json(src_file: &'static str, line: usize, kept: &Line) -> Entry {
    let (title, text) = match kept {
        Line::Oversized(len) => (
            "oversized line".to_string(),
            format!("{len} bytes, longer than the report reads; see {src_file}"),
        ),
        Line::Text(text) => ("not JSON".to_string(), one_line(text)),
        Line::Json(value) => ("not an object".to_string(), compact(value)),
    };
    let body = match kept {
        Line::Text(text) => cut(text, MAX_BODY_CHARS),
        _ => text.clone(),
    };
    Entry {
        t: None,
        src: "raw",
        seq: None,
        file: src_file,
        line,
        title,
        text,
        body,
        cited: false,
    }
}

/// The one-line gist of an event payload.
pub(super) fn event_text(kind: &str, payload: &Value) -> String {
    let item = payload.get("item").unwrap_or(&Value::Null);
    let text = match kind {
        "diagnostic" => format!(
            "{}: {}",
            str_of(payload, "level"),
            str_of(payload, "message")
        ),
        "turn.submitted" => str_of(payload, "input_excerpt").to_string(),
        "session.rejected" => format!(
            "code {} — {}",
            payload.get("code").unwrap_or(&Value::Null),
            str_of(payload, "message")
        ),
        "model.tool-call" => format!(
            "{} {}",
            str_of(payload, "name"),
            str_of(payload, "arguments")
        ),
        "model.tool-output" => str_of(payload, "output").to_string(),
        "run.ended" => format!(
            "{} {} {}",
            str_of(payload, "ending"),
            str_of(payload, "error_code"),
            str_of(payload, "reason")
        ),
        "workspace.evidence" => match payload.get("probes").and_then(Value::as_array) {
            Some(probes) if probes.is_empty() => "no probe file exists".to_string(),
            Some(probes) => format!(
                "probe files: {}",
                probes
                    .iter()
                    .map(|p| str_of(p, "path"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => compact(payload),
        },
        _ if kind.starts_with("item.") => {
            let detail = ["command", "text", "tool", "item_type"]
                .iter()
                .map(|key| str_of(item, key))
                .find(|s| !s.is_empty())
                .unwrap_or("");
            format!(
                "{} {} {detail}",
                str_of(item, "type"),
                str_of(item, "status")
            )
        }
        _ => compact(payload),
    };
    one_line(&text)
}

/// A wire message's title (method, or the method a response answers) and gist.
pub(super) fn wire_entry(
    message: &Value,
    requests: &mut HashMap<String, String>,
) -> (String, String) {
    let id = message.get("id").map(Value::to_string);
    let method = message.get("method").and_then(Value::as_str);
    match (method, id) {
        (Some(method), id) => {
            if let Some(id) = &id {
                requests.insert(id.clone(), method.to_string());
            }
            let params = message.get("params").unwrap_or(&Value::Null);
            let prefix = id.map(|id| format!("#{id} ")).unwrap_or_default();
            (method.to_string(), format!("{prefix}{}", compact(params)))
        }
        (None, Some(id)) => {
            let answers = requests.get(&id).cloned().unwrap_or_else(|| "?".into());
            match message.get("error") {
                Some(error) => (
                    format!("error ← {answers}"),
                    format!(
                        "#{id} {}",
                        one_line(&error.get("message").map_or_else(
                            || error.to_string(),
                            |m| m.as_str().unwrap_or_default().to_string()
                        ))
                    ),
                ),
                None => (
                    format!("result ← {answers}"),
                    format!(
                        "#{id} {}",
                        compact(message.get("result").unwrap_or(&Value::Null))
                    ),
                ),
            }
        }
        (None, None) => ("message".into(), compact(message)),
    }
}

pub(super) struct Timeline {
    pub events: Vec<Entry>,
    pub wire: Vec<Entry>,
    pub model_log: Vec<Entry>,
}

pub(super) fn model_log_entries(lines: &[(usize, Line)]) -> Vec<Entry> {
    lines
        .iter()
        .map(|(number, line)| match line {
            Line::Json(value @ Value::Object(_)) => {
                let kind = str_of(value, "type");
                Entry {
                    t: time_of(value),
                    src: "model-log",
                    seq: None,
                    file: crate::layout::MODEL_LOG,
                    line: *number,
                    title: kind.to_string(),
                    text: event_text(&format!("model.{kind}"), value),
                    body: body_of(value, crate::layout::MODEL_LOG, *number),
                    cited: false,
                }
            }
            other => not_json(crate::layout::MODEL_LOG, *number, other),
        })
        .collect()
}

/// Give every untimed entry the time of the entry before it in its own file.
pub(super) fn carry_times(entries: &mut [Entry]) {
    let mut last = entries.iter().find_map(|e| e.t).unwrap_or(0);
    for entry in entries {
        match entry.t {
            Some(t) => last = t,
            None => entry.t = Some(last),
        }
    }
}

impl Timeline {
    pub(super) fn merge(mut self) -> (bool, Vec<Entry>) {
        let timed = !self.events.is_empty() && self.events.iter().all(|e| e.t.is_some());
        let mut all = Vec::new();
        if timed {
            for part in [&mut self.events, &mut self.wire, &mut self.model_log] {
                let original: Vec<Option<u64>> = part.iter().map(|e| e.t).collect();
                carry_times(part);
                // Sorting keys only; an entry without a time is still shown without one.
                all.extend(
                    part.drain(..)
                        .zip(original)
                        .map(|(e, t)| (e.t, Entry { t, ..e })),
                );
            }
            // Stable: at the same millisecond the wire line precedes what the driver made of it.
            let mut keyed: Vec<(Option<u64>, usize, Entry)> = all
                .into_iter()
                .map(|(key, e)| {
                    let rank = usize::from(e.file == crate::layout::EVENTS);
                    (key, rank, e)
                })
                .collect();
            keyed.sort_by_key(|(key, rank, _)| (*key, *rank));
            (true, keyed.into_iter().map(|(_, _, e)| e).collect())
        } else {
            let mut all = self.events;
            all.append(&mut self.wire);
            all.append(&mut self.model_log);
            (false, all)
        }
    }
}
