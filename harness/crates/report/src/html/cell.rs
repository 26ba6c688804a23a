//! One cell's page data: its verdict and the baseline's expectation, its launch, and a timeline
//! built from the evidence folder (events.jsonl, transcript.jsonl, model-log.jsonl), with the
//! events the verdict cites marked. Every file is read tolerantly (see [`super::jsonl`]).

use super::about::{self, CaseAbout};
use super::timeline::{
    body_of, compact, event_text, model_log_entries, not_json, one_line, str_of, time_of,
    wire_entry, Entry, Timeline,
};
use crate::evidence_lines::{self, FileState, Line};
use crate::layout;
use crate::verdict_file::VerdictFile;
use crate::CellSummary;
use graders::verdict::EvidenceRef;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use suites::spec::Profile;

/// How much of stderr.log the page shows (its end: where failures are).
const STDERR_TAIL_BYTES: u64 = 8 * 1024;

#[derive(Debug, Clone, Serialize)]
pub struct CellPage {
    pub cell: String,
    pub status: String,
    pub verdict: Option<String>,
    pub reason: String,
    pub expected: String,
    pub expected_reason: Option<String>,
    /// What the driver's declarations make of the cell, when they change what passes.
    pub expected_declarations: Option<String>,
    pub agreement: Option<String>,
    pub duration_ms: u64,
    pub evidence_dir: String,
    /// What the verdict cites, as verdict.json records it (`seq`, or `line` of an unreadable
    /// stream, and an excerpt).
    pub evidence: Vec<EvidenceRef>,
    /// `run.started`'s `launch` (argv, profiles, identity, …) plus its `driver`.
    pub launch: Option<Value>,
    /// Each `session.relaunched` payload, with its `seq`.
    pub relaunches: Vec<Value>,
    /// Launch records the tap wrote into transcript.jsonl (lines of their own kind).
    pub tap_launches: Vec<Value>,
    pub files: Vec<FileState>,
    /// Entries are in time order when the events carry times (`ts_ms`); otherwise the events
    /// come first in sequence order, then the wire in time order.
    pub timed: bool,
    /// Every entry when loaded; in report.html, what the report's budget keeps
    /// (`super::budget`).
    pub timeline: Vec<Entry>,
    pub stderr_tail: Option<String>,
    pub stderr_bytes: u64,
    /// A red cell's cause, as verdict.json keeps it (`crate::cause`): shown first, then the
    /// check that failed (`check_reason`).
    pub cause: Option<String>,
    /// The reason without the cause that leads it: the grader's own words.
    pub check_reason: String,
    /// What the case checks and where its profile's page lists it.
    pub about: Option<CaseAbout>,
    pub notes: Vec<String>,
    /// For a protocol cell whose verdict is not `pass`: the finding about the driver, shown
    /// first on its page.
    pub finding: Option<Finding>,
}

/// A protocol cell's finding in plain words: the grader's reason says what the driver did on
/// the wire, what the protocol asks and the schema type or observed behaviour that says so;
/// the lines are the events it cites.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// The failing check, when the grader names one (`check `NAME` failed: …`).
    pub check: Option<String>,
    /// The reason without the check's prefix.
    pub what: String,
    pub lines: Vec<FindingLine>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FindingLine {
    pub seq: Option<u64>,
    pub title: String,
    pub text: String,
}

impl Finding {
    /// `reason`: the grader's, without the cause that leads it.
    fn of(cell: &CellSummary, reason: &str, entries: &[Entry]) -> Option<Self> {
        let verdict = cell.verdict.as_deref()?;
        if cell.profile != Some(Profile::Protocol) || verdict == "pass" {
            return None;
        }
        let (check, what) = match reason
            .strip_prefix("check `")
            .and_then(|rest| rest.split_once("` failed: "))
        {
            Some((check, what)) => (Some(check.to_string()), what.to_string()),
            None => (None, reason.to_string()),
        };
        let lines = entries
            .iter()
            .filter(|e| e.cited)
            .map(|e| FindingLine {
                seq: e.seq,
                title: e.title.clone(),
                text: e.text.clone(),
            })
            .collect();
        Some(Finding { check, what, lines })
    }
}

fn events_entries(lines: &[(usize, Line)], page: &mut CellPage) -> Vec<Entry> {
    let mut entries = Vec::new();
    for (number, line) in lines {
        let Line::Json(value @ Value::Object(_)) = line else {
            entries.push(not_json(layout::EVENTS, *number, line));
            continue;
        };
        let kind = str_of(value, "kind");
        let payload = value.get("payload").unwrap_or(&Value::Null);
        let seq = value.get("seq").and_then(Value::as_u64);
        match kind {
            "run.started" if page.launch.is_none() => {
                let mut launch = payload.get("launch").cloned().unwrap_or(Value::Null);
                if let (Some(map), Some(driver)) = (launch.as_object_mut(), payload.get("driver")) {
                    map.insert("driver".into(), driver.clone());
                }
                page.launch = Some(launch);
            }
            "session.relaunched" => {
                let mut relaunch = payload.clone();
                if let (Some(map), Some(seq)) = (relaunch.as_object_mut(), seq) {
                    map.insert("seq".into(), seq.into());
                }
                page.relaunches.push(relaunch);
            }
            _ => {}
        }
        let src = match str_of(value, "source") {
            "driver" => "driver",
            "harness" => "harness",
            "model" => "model",
            _ => "record",
        };
        entries.push(Entry {
            t: time_of(value),
            src,
            seq,
            file: layout::EVENTS,
            line: *number,
            title: if kind.is_empty() {
                "event".into()
            } else {
                kind.to_string()
            },
            text: event_text(kind, payload),
            body: body_of(value, layout::EVENTS, *number),
            cited: false,
        });
    }
    entries
}

fn transcript_entries(lines: &[(usize, Line)], page: &mut CellPage) -> Vec<Entry> {
    let mut requests = HashMap::new();
    let mut entries = Vec::new();
    for (number, line) in lines {
        let Line::Json(value @ Value::Object(map)) = line else {
            entries.push(not_json(layout::TRANSCRIPT, *number, line));
            continue;
        };
        let direction = match str_of(value, "direction") {
            "in" => Some("in"),
            "out" => Some("out"),
            _ => None,
        };
        let (src, title, text) = if let (Some(dir), Some(message)) = (direction, map.get("message"))
        {
            let (title, text) = wire_entry(message, &mut requests);
            (dir, title, text)
        } else if let Some(raw) = map.get("raw") {
            let raw = raw.as_str().map_or_else(|| raw.to_string(), str::to_string);
            (
                "raw",
                format!("not JSON ({})", direction.unwrap_or("?")),
                one_line(&raw),
            )
        } else if let Some(note) = map.get("note") {
            ("note", "note".to_string(), one_line(&note.to_string()))
        } else {
            // A line of another kind (the tap's launch records): shown as it is.
            let kind = ["kind", "type", "record", "event"]
                .iter()
                .map(|key| str_of(value, key))
                .find(|s| !s.is_empty())
                .unwrap_or("record")
                .to_string();
            let launch_number = value.get("launch").and_then(Value::as_u64);
            let title = match launch_number {
                Some(n) => format!("{kind} #{n}"),
                None => kind.clone(),
            };
            if kind == "launch" || map.contains_key("argv") {
                let mut launch = value.clone();
                if let Some(launch) = launch.as_object_mut() {
                    launch.insert("line".into(), (*number).into());
                }
                page.tap_launches.push(launch);
            } else if let Some(n) = launch_number {
                // `exit`, `stdin-closed`: shown with the launch they end.
                let of_launch = page
                    .tap_launches
                    .iter_mut()
                    .rev()
                    .find(|l| l.get("launch").and_then(Value::as_u64) == Some(n));
                if let Some(Value::Object(launch)) = of_launch {
                    launch.insert(kind.replace('-', "_"), value.clone());
                }
            }
            let text = match kind.as_str() {
                "launch" => one_line(&format!(
                    "{} {}",
                    str_of(value, "program"),
                    value
                        .get("argv")
                        .and_then(Value::as_array)
                        .map(|a| a
                            .iter()
                            .map(|v| v.as_str().unwrap_or("?"))
                            .collect::<Vec<_>>()
                            .join(" "))
                        .unwrap_or_default()
                )),
                "exit" => one_line(&format!(
                    "status {} signal {} {}",
                    value.get("status").unwrap_or(&Value::Null),
                    value.get("signal").unwrap_or(&Value::Null),
                    str_of(value, "error")
                )),
                _ => compact(value),
            };
            ("record", title, text)
        };
        entries.push(Entry {
            t: time_of(value),
            src,
            seq: None,
            file: layout::TRANSCRIPT,
            line: *number,
            title,
            text,
            body: body_of(value, layout::TRANSCRIPT, *number),
            cited: false,
        });
    }
    entries
}

impl CellPage {
    /// The page of `cell`, from its evidence folder (`cell.evidence_dir`).
    pub fn load(cell: &CellSummary) -> Self {
        let dir = Path::new(&cell.evidence_dir);
        let mut page = CellPage {
            cell: cell.cell.clone(),
            status: super::grid::status_name(cell.status),
            verdict: cell.verdict.clone(),
            reason: cell.reason.clone(),
            expected: cell.expected.clone(),
            expected_reason: cell.expected_reason.clone(),
            expected_declarations: cell.expected_declarations.clone(),
            agreement: None,
            duration_ms: cell.duration_ms,
            evidence_dir: cell.evidence_dir.clone(),
            evidence: Vec::new(),
            launch: None,
            relaunches: Vec::new(),
            tap_launches: Vec::new(),
            files: Vec::new(),
            timed: false,
            timeline: Vec::new(),
            stderr_tail: None,
            stderr_bytes: 0,
            cause: None,
            check_reason: cell.reason.clone(),
            about: about::of(&cell.suite, &cell.case),
            notes: Vec::new(),
            finding: None,
        };
        if !dir.is_dir() {
            page.notes.push(format!(
                "the evidence folder {} is not here: only the summary is shown",
                dir.display()
            ));
            return page;
        }
        let (verdict_state, verdict) = evidence_lines::whole(dir, layout::VERDICT);
        page.read_verdict(&verdict_state, verdict, dir);
        let events = evidence_lines::read(dir, layout::EVENTS);
        let transcript = evidence_lines::read(dir, layout::TRANSCRIPT);
        let model_log = evidence_lines::read(dir, layout::MODEL_LOG);
        let events_entries = events_entries(&events.lines, &mut page);
        let has_model_events = events_entries.iter().any(|e| e.src == "model");
        let timeline = Timeline {
            wire: transcript_entries(&transcript.lines, &mut page),
            // The model log is already in events.jsonl as model.* events when the harness got
            // that far; shown on its own only when it did not.
            model_log: if has_model_events {
                Vec::new()
            } else {
                model_log_entries(&model_log.lines)
            },
            events: events_entries,
        };
        let (timed, mut entries) = timeline.merge();
        page.mark_cited(&mut entries);
        let graders_reason = page
            .cause
            .as_ref()
            .and_then(|cause| {
                cell.reason
                    .strip_prefix(cause.as_str())?
                    .strip_prefix(crate::cause::SEPARATOR)
            })
            .unwrap_or(&cell.reason);
        page.check_reason = graders_reason.to_string();
        page.finding = Finding::of(cell, graders_reason, &entries);
        page.timed = timed;
        page.timeline = entries;
        page.files = vec![
            verdict_state,
            events.state,
            transcript.state,
            model_log.state,
        ];
        match evidence_lines::tail(dir, layout::STDERR, STDERR_TAIL_BYTES) {
            Ok(Some((tail, bytes))) => {
                page.stderr_tail = Some(tail);
                page.stderr_bytes = bytes;
            }
            Ok(None) => {}
            Err(why) => page.notes.push(format!("stderr.log is not shown: {why}")),
        }
        page
    }

    fn read_verdict(&mut self, state: &FileState, doc: Option<Value>, dir: &Path) {
        let file =
            doc.map(|doc| serde_json::from_value::<VerdictFile>(doc).map_err(|e| e.to_string()));
        let file = match file {
            Some(Ok(file)) => file,
            Some(Err(why)) => {
                self.notes.push(format!(
                    "verdict.json is not a verdict file ({why}): the evidence the verdict cites is not known"
                ));
                return;
            }
            None => {
                self.notes.push(if state.state == "missing" {
                    "verdict.json is missing: the cell did not finish".to_string()
                } else {
                    format!(
                        "verdict.json is {}: the evidence the verdict cites is not known",
                        state.state
                    )
                });
                return;
            }
        };
        // A verdict not bound to this folder (another cell's, or graded on other evidence)
        // cites nothing here.
        let bound = self
            .cell
            .parse()
            .map_err(|e| format!("{e}"))
            .and_then(|id| file.check_binding(&id, &layout::CellEvidence::new(dir), None));
        if let Err(why) = bound {
            self.notes.push(format!(
                "{why}: the evidence its verdict cites is not shown"
            ));
            return;
        }
        self.agreement = file.agreement;
        self.cause = file.cause;
        if let Some(verdict) = file.verdict {
            self.evidence = verdict.evidence;
        }
    }

    fn mark_cited(&mut self, entries: &mut [Entry]) {
        let seqs: BTreeSet<u64> = self.evidence.iter().filter_map(|e| e.seq).collect();
        let lines: BTreeSet<u64> = self
            .evidence
            .iter()
            .filter(|e| e.seq.is_none())
            .filter_map(|e| e.line)
            .collect();
        let mut found = BTreeSet::new();
        for entry in entries.iter_mut().filter(|e| e.file == layout::EVENTS) {
            let by_seq = entry.seq.is_some_and(|s| seqs.contains(&s));
            let by_line = lines.contains(&(entry.line as u64));
            if by_seq || by_line {
                entry.cited = true;
                if let Some(seq) = entry.seq.filter(|_| by_seq) {
                    found.insert(seq);
                }
            }
        }
        for missing in seqs.difference(&found) {
            self.notes.push(format!(
                "the verdict cites event #{missing}, which events.jsonl does not hold"
            ));
        }
    }
}
