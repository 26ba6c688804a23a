//! What the driver sent: every line from the driver to the app-server in the cell's transcript
//! (requests, notifications, its answers to server requests), normalised. A driver acts on what
//! it was told, so a fake that tells it something else shows up here even when the driver's own
//! events do not (the model a thread reports, which a driver sends back in its plan-mode
//! `turn/start`; the reasoning effort codex-acp picks from `model/list`).
//!
//! Normalised: the JSON-RPC `id` and `jsonrpc` fields are dropped (the order is compared);
//! UUIDs (thread, turn and item ids) become `<id-N>` in order of first appearance and ids the
//! model API made (`call_…`, `msg_…`, `item_…`) become `<model-id-N>`, wherever they appear in a
//! string; the app-server's folders become the placeholders of [`super::side_aliases`].

use graders::wire::transcript::{Direction, Record};
use regex::Regex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

fn uuid_pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
            .expect("the UUID pattern compiles")
    })
}

fn model_id_pattern() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN.get_or_init(|| {
        Regex::new(r"\b(?:call|msg|item)_[0-9A-Za-z_]+").expect("the model-id pattern compiles")
    })
}

/// Every UUID in `text`, in order.
pub(super) fn uuids(text: &str) -> Vec<String> {
    uuid_pattern()
        .find_iter(text)
        .map(|found| found.as_str().to_string())
        .collect()
}

#[derive(Default)]
pub(super) struct Placeholders {
    ids: HashMap<String, String>,
    model_ids: HashMap<String, String>,
}

impl Placeholders {
    fn text(&mut self, text: &str, aliases: &[(String, String)]) -> String {
        let out = super::normalise::apply_aliases(text, aliases);
        let out = numbered(uuid_pattern(), &out, &mut self.ids, "id");
        numbered(model_id_pattern(), &out, &mut self.model_ids, "model-id")
    }

    pub(super) fn value(&mut self, value: &mut Value, aliases: &[(String, String)]) {
        match value {
            Value::String(text) => *text = self.text(text, aliases),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v, aliases)),
            // Keys too: a driver may key its config by a path (codex-acp's `projects`).
            Value::Object(map) => {
                let entries = std::mem::take(map);
                for (key, mut item) in entries {
                    self.value(&mut item, aliases);
                    map.insert(self.text(&key, aliases), item);
                }
            }
            _ => {}
        }
    }
}

/// `text` with every match of `pattern` replaced by `<label-N>`, N counting distinct matches in
/// order of first appearance (kept in `seen` across calls).
fn numbered(
    pattern: &Regex,
    text: &str,
    seen: &mut HashMap<String, String>,
    label: &str,
) -> String {
    pattern
        .replace_all(text, |found: &regex::Captures| {
            let next = seen.len() + 1;
            seen.entry(found[0].to_string())
                .or_insert_with(|| format!("<{label}-{next}>"))
                .clone()
        })
        .into_owned()
}

/// The driver's lines to the app-server, every launch in order, normalised.
pub(crate) fn driver_sent(transcript: &[Record], aliases: &[(String, String)]) -> Vec<Value> {
    let mut placeholders = Placeholders::default();
    transcript
        .iter()
        .filter_map(|record| match record {
            Record::Message {
                direction: Direction::In,
                message,
                ..
            } => Some(message),
            _ => None,
        })
        .map(|message| {
            let mut shown = match message.get("method") {
                Some(method) => json!({
                    "kind": if message.get("id").is_some() { "request" } else { "notification" },
                    "method": method,
                    "params": message.get("params").cloned().unwrap_or(Value::Null),
                }),
                None => json!({
                    "kind": "answer",
                    "result": message.get("result").cloned().unwrap_or(Value::Null),
                    "error": message.get("error").cloned().unwrap_or(Value::Null),
                }),
            };
            placeholders.value(&mut shown, aliases);
            shown
        })
        .collect()
}

/// Where two sides' sent lines first differ, described; `None` when they agree. A side its
/// driver cut short (`cut`, see [`super::cut`]), or whose messages were compared only up to
/// its driver's earlier close, must be a prefix of the other.
pub(crate) fn difference(
    fake: &[Value],
    real: &[Value],
    fake_cut: bool,
    real_cut: bool,
) -> Option<String> {
    let index = (0..fake.len().max(real.len())).find(|&i| fake.get(i) != real.get(i))?;
    let ended = |side: &[Value], cut: bool| cut && index == side.len();
    if ended(fake, fake_cut) || ended(real, real_cut) {
        return None;
    }
    let show = |v: Option<&Value>| match v {
        Some(v) => driver::rpc::excerpt(&v.to_string(), 240),
        None => "nothing (its driver stopped sending)".to_string(),
    };
    Some(format!(
        "the driver sent otherwise at line {index} of what it sent: to the fake {} | to the real Codex {}",
        show(fake.get(index)),
        show(real.get(index))
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(message: Value) -> Record {
        Record::Message {
            launch: 1,
            direction: Direction::In,
            time: 0,
            message,
        }
    }

    #[test]
    fn ids_paths_and_model_ids_are_placeholders_and_the_rest_is_compared() {
        let cell = vec![("/tmp/cell-1".to_string(), "<cell>".to_string())];
        let sent = |thread: &str, model: &str| {
            driver_sent(
                &[
                    record(
                        json!({"id": 7, "jsonrpc": "2.0", "method": "turn/start", "params": {"threadId": thread, "cwd": "/tmp/cell-1/ws", "projects": {"/tmp/cell-1/ws": {"trust_level": "trusted"}}, "collaborationMode": {"settings": {"model": model}}}}),
                    ),
                    record(
                        json!({"id": 0, "result": {"decision": "accept", "call": "call_ab12_0_0"}}),
                    ),
                ],
                &cell,
            )
        };
        let fake = sent("01a2310e-f7aa-71a2-b7e9-e659bfd286b5", "mock-model");
        let real = sent("01a2310e-0000-71a2-b7e9-e659bfd286b5", "mock-model");
        assert_eq!(fake, real);
        assert_eq!(fake[0]["params"]["threadId"], "<id-1>");
        assert_eq!(fake[0]["params"]["cwd"], "<cell>/ws");
        assert_eq!(
            fake[0]["params"]["projects"]["<cell>/ws"]["trust_level"],
            "trusted"
        );
        assert_eq!(fake[1]["result"]["call"], "<model-id-1>");
        let other = sent("01a2310e-f7aa-71a2-b7e9-e659bfd286b5", "gpt-6.1-sol");
        let told = difference(&other, &real, false, false).expect("a difference");
        assert!(
            told.contains("gpt-6.1-sol") && told.contains("line 0"),
            "{told}"
        );
    }

    #[test]
    fn a_side_cut_by_its_driver_compares_as_a_prefix() {
        let line = |n: u64| json!({"kind": "request", "method": "m", "params": n});
        let long = vec![line(1), line(2), line(3)];
        let short = vec![line(1), line(2)];
        assert_eq!(difference(&long, &short, false, true), None);
        assert!(difference(&long, &short, false, false).is_some());
        let changed = vec![line(1), line(9)];
        assert!(difference(&long, &changed, false, true).is_some());
    }
}
