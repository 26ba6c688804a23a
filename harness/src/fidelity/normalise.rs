//! The driver's events, normalised for the comparison (see the parent module): ids as `<id-N>`,
//! the cell's and the app-server's folders as placeholders, probe ids as `<probe>`, the runner
//! as `<runner>`, and a command's output lines in a canonical order.

use codex::mock_api::probe_id_for;
use graders::events::{Body, Event, Source};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Driver event kinds left out of the comparison (see the module docs).
pub const NOT_COMPARED: &[&str] = &["diagnostic"];
/// Keys whose values are ids (normalised to `<id-N>` in order of first appearance).
const ID_KEYS: &[&str] = &[
    "thread_id",
    "turn_id",
    "id",
    "item_id",
    "request_id",
    "call_id",
    "resume_thread",
    // An automatic review's own id (a fresh UUID on both sides) and the item it reviews.
    "review_id",
    "target_item_id",
];
const PROBE_PREFIX: &str = "plan-write-probe-";

/// The driver-visible sequence of a run, normalised: one JSON value per driver event, `{kind,
/// payload}`, with ids as `<id-N>`, the cell folder as `<cell>` (and the app-server's own
/// folders as in [`side_aliases`]), the runner as `<runner>` and probe ids as `<probe>`.
pub fn normalise(events: &[Event], cell_root: &str) -> Vec<Value> {
    normalise_with(events, &[(cell_root.to_string(), "<cell>".to_string())])
}

/// [`normalise`] with explicit path aliases, applied in order.
pub fn normalise_with(events: &[Event], aliases: &[(String, String)]) -> Vec<Value> {
    let mut ids = IdMap::default();
    let mut out = Vec::new();
    for event in events.iter().filter(|e| e.source == Source::Driver) {
        let mut value = serde_json::to_value(&event.body).expect("events serialize");
        if NOT_COMPARED.contains(&value["kind"].as_str().unwrap_or_default()) {
            continue;
        }
        if let Body::RunStarted(_) = event.body {
            // A declared driver is named after its runner (`NAME-fake`, `NAME-codex`).
            if value["payload"]["driver"] == value["payload"]["cell"]["runner"] {
                value["payload"]["driver"] = Value::String("<runner>".into());
            }
            value["payload"]["cell"]["runner"] = Value::String("<runner>".into());
            // A digest over the launch, paths included: it differs per cell folder. Its
            // stability is the launch-identity suite's business, not this comparison's.
            value["payload"]["launch"]["identity"] = Value::String("<identity>".into());
        }
        if let Body::SessionRelaunched(_) = event.body {
            // The relaunch's digest, computed like run.started's (paths included).
            value["payload"]["identity"] = Value::String("<identity>".into());
        }
        // Probe ids are derived from the thread id: learn them before ids are replaced.
        if let Body::SessionStarted(started) = &event.body {
            ids.probes.push(probe_id_for(&started.thread_id));
        }
        normalise_value(&mut value, None, &mut ids, aliases);
        if let Some(output) = value
            .get_mut("payload")
            .and_then(|p| p.get_mut("item"))
            .and_then(|i| i.get_mut("aggregated_output"))
        {
            order_output_lines(output);
        }
        out.push(value);
    }
    out
}

/// A command's `aggregatedOutput` with its lines in a canonical (sorted) order. Codex 0.169
/// reads a command's stdout and stderr from separate pipes and appends whichever arrives first,
/// so for a command writing to both (the write probe: bash's `Read-only file system` on stderr,
/// `WRITE_REFUSED` on stdout) the order differs from run to run of the *real* Codex itself
/// (measured: both orders seen; see the offline-turns facts doc). Only the line order is
/// normalised: every line, its text and its count still have to match.
pub(super) fn order_output_lines(output: &mut Value) {
    if let Value::String(text) = output {
        let mut lines: Vec<&str> = text.lines().collect();
        lines.sort_unstable();
        let mut ordered = lines.join("\n");
        if text.ends_with('\n') {
            ordered.push('\n');
        }
        *text = ordered;
    }
}

#[derive(Default)]
struct IdMap {
    seen: HashMap<String, String>,
    probes: Vec<String>,
}

impl IdMap {
    fn placeholder(&mut self, id: &str) -> String {
        let next = self.seen.len() + 1;
        self.seen
            .entry(id.to_string())
            .or_insert_with(|| format!("<id-{next}>"))
            .clone()
    }
}

fn normalise_value(
    value: &mut Value,
    key: Option<&str>,
    ids: &mut IdMap,
    aliases: &[(String, String)],
) {
    match value {
        Value::String(text) => {
            if key.is_some_and(|k| ID_KEYS.contains(&k)) {
                *text = ids.placeholder(text);
            } else {
                *text = normalise_text(text, ids, aliases);
            }
        }
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| normalise_value(v, None, ids, aliases)),
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                normalise_value(v, Some(k), ids, aliases);
            }
        }
        _ => {}
    }
}

/// `text` with each alias's path written as its placeholder, in order.
pub(super) fn apply_aliases(text: &str, aliases: &[(String, String)]) -> String {
    let mut out = text.to_string();
    for (path, placeholder) in aliases.iter().filter(|(path, _)| !path.is_empty()) {
        out = out.replace(path.as_str(), placeholder);
    }
    out
}

fn normalise_text(text: &str, ids: &IdMap, aliases: &[(String, String)]) -> String {
    let mut out = normalise_arg0_alias(&apply_aliases(text, aliases));
    out = normalise_panic_thread_id(&out);
    for probe in &ids.probes {
        out = out.replace(
            &format!("{PROBE_PREFIX}{probe}"),
            &format!("{PROBE_PREFIX}<probe>"),
        );
    }
    out
}

/// A Rust panic names the thread's OS id (`thread 'main' (92) panicked`): a pid, not behaviour.
pub(super) fn normalise_panic_thread_id(text: &str) -> String {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN
        .get_or_init(|| Regex::new(r"thread 'main' \([0-9]+\)").expect("the pattern compiles"))
        .replace_all(text, "thread 'main' (<tid>)")
        .into_owned()
}

/// Codex's per-process helper alias folder (`codex-arg0` + 6 random characters).
pub(super) fn normalise_arg0_alias(text: &str) -> String {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN
        .get_or_init(|| Regex::new("codex-arg0[0-9A-Za-z]*").expect("the pattern compiles"))
        .replace_all(text, "codex-arg0<random>")
        .into_owned()
}
