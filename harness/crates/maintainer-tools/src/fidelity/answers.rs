//! What the app-server answered: every answer to a client request, in every launch of the
//! cell (a `codex --version` probe, then the app-server, then a relaunch: each one counts),
//! normalised and compared field by field. The driver's own events reduce what it was told to
//! what it acts on, so a field the fake invents (`thread/start`'s `serviceTier: null` where the
//! real Codex says `"default"`) shows there only as a driver that later fails on one side; here
//! it is named: `thread/start result.serviceTier: "default" ≠ null`.
//!
//! Normalised as what the driver sent ([`super::sent`]): UUIDs and model-made ids as numbered
//! placeholders, the app-server's folders as placeholders. Besides: the mock model API's port
//! (each real cell serves its own), content digests (`sha256:…`, over config layers that hold
//! that port and the cell's paths), the date in a rollout's file name, the numbers of fields
//! that measure time (`createdAt`, `startedAtMs`, `durationMs`, …), opaque paging cursors
//! (whether there is one still compares), and the fields of `NOT_COMPARED_FIELDS`, each with
//! its reason.
//!
//! Answers pair by the position of their request among the driver's requests; a request the
//! other side never got, or that one side left unanswered (a driver that hung up), is what the
//! sent-lines comparison and the cut already judge, so only answers present on both sides are
//! compared, and the comparison stops where the two sides' requests part.

use graders::wire::transcript::{Direction, Record};
use regex::Regex;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::OnceLock;

/// One answer as compared: `{launch, method, result | error}`.
pub(crate) type Answer = Value;

/// Keys whose numbers are times or durations: how fast a side was, not what it said.
fn is_time_key(key: &str) -> bool {
    // `create_time`: a raw event's item (`rawResponseItem/completed`), in seconds.
    key.ends_with("At") || key.ends_with("AtMs") || key.ends_with("Ms") || key == "create_time"
}

fn volatile_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            (r"127\.0\.0\.1:[0-9]+", "127.0.0.1:<port>"),
            (r"sha256:[0-9a-f]{64}", "sha256:<digest>"),
            (
                r"rollout-[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}-",
                "rollout-<time>-",
            ),
            (
                r"/sessions/[0-9]{4}/[0-9]{2}/[0-9]{2}/",
                "/sessions/<date>/",
            ),
            // A Rust panic names its thread's OS id (the real Codex's helper, the fake's
            // stand-in for it): which thread it was, not what went wrong.
            (
                r"thread '([^']*)' \([0-9]+\) panicked",
                "thread '$1' (<tid>) panicked",
            ),
        ]
        .into_iter()
        .map(|(pattern, placeholder)| {
            (
                Regex::new(pattern).expect("the volatile patterns compile"),
                placeholder,
            )
        })
        .collect()
    })
}

/// Keys whose string values are opaque paging cursors (`thread/resume`'s
/// `turnsBackwardsCursor`): the client hands them back as they are; inside, they count the
/// lines of the app-server's own rollout file, which the fake does not write line for line.
fn is_cursor_key(key: &str) -> bool {
    key.ends_with("Cursor")
}

/// Answer fields whose values are not compared (whether the field is there still is), with why.
const NOT_COMPARED_FIELDS: &[(&str, &str)] = &[(
    "gitInfo",
    "the git repository around the cell's workspace: on thread/resume the real Codex 0.169 \
     reports the repository enclosing the harness's output folder (measured: the checkout's \
     branch and commit), which is where the harness runs, not the scenario; the fake reports \
     none",
)];

/// Keys whose string values are process ids: which process, not what it did.
fn is_process_key(key: &str) -> bool {
    key == "processId"
}

/// Keys whose string values name the host the app-server runs on, with their placeholder:
/// where the harness runs, not what the app-server said (a recorded answer replays elsewhere).
const HOST_KEYS: &[(&str, &str)] = &[("serverName", "<host>")];

/// `initialize`'s `userAgent` names the host's operating system in its first parentheses
/// (`name/0.169.0 (Debian 12.0.0; x86_64) …`).
fn user_agent_os() -> &'static Regex {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN
        .get_or_init(|| Regex::new(r"^([^ ]+) \([^)]*\)").expect("the user agent pattern compiles"))
}

fn mask(value: &mut Value, key: Option<&str>) {
    if key.is_some_and(|k| NOT_COMPARED_FIELDS.iter().any(|(field, _)| *field == k)) {
        *value = Value::String("<not compared>".into());
        return;
    }
    match value {
        Value::Number(_) if key.is_some_and(is_time_key) => {
            *value = Value::String("<time>".into());
        }
        Value::String(_) if key.is_some_and(is_cursor_key) => {
            *value = Value::String("<cursor>".into());
        }
        Value::String(_) if key.is_some_and(is_process_key) => {
            *value = Value::String("<pid>".into());
        }
        Value::String(_) if HOST_KEYS.iter().any(|(k, _)| Some(*k) == key) => {
            let placeholder = HOST_KEYS
                .iter()
                .find(|(k, _)| Some(*k) == key)
                .map(|(_, p)| *p);
            *value = Value::String(placeholder.unwrap_or_default().into());
        }
        Value::String(text) if key == Some("userAgent") => {
            *text = user_agent_os().replace(text, "$1 (<os>)").into_owned();
        }
        Value::String(text) => {
            for (pattern, placeholder) in volatile_patterns() {
                if pattern.is_match(text) {
                    *text = pattern.replace_all(text, *placeholder).into_owned();
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| mask(v, None)),
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                mask(v, Some(k));
            }
        }
        _ => {}
    }
}

/// The app-server's answers to the driver's requests, every launch, in the order of the
/// requests, normalised; an unanswered request gives `{launch, method}` alone.
pub(crate) fn app_server_answers(
    transcript: &[Record],
    aliases: &[(String, String)],
) -> Vec<Answer> {
    let mut asked: HashMap<(u64, String), usize> = HashMap::new();
    let mut answers: Vec<Answer> = Vec::new();
    for record in transcript {
        let Record::Message {
            direction,
            message,
            launch,
            ..
        } = record
        else {
            continue;
        };
        let Some(id) = message.get("id").filter(|id| !id.is_null()) else {
            continue;
        };
        let key = (*launch, id.to_string());
        match (direction, message.get("method").and_then(Value::as_str)) {
            (Direction::In, Some(method)) => {
                asked.insert(key, answers.len());
                answers.push(json!({"launch": launch, "method": method}));
            }
            (Direction::Out, None) => {
                let Some(&index) = asked.get(&key) else {
                    continue;
                };
                for field in ["result", "error"] {
                    if let Some(value) = message.get(field) {
                        answers[index][field] = value.clone();
                    }
                }
            }
            _ => {}
        }
    }
    let mut placeholders = super::sent::Placeholders::default();
    for answer in &mut answers {
        placeholders.value(answer, aliases);
        mask(answer, None);
    }
    answers
}

/// Everything the app-server said in `transcript`, every launch in order, normalised as its
/// answers are ([`app_server_answers`]), with each thread's probe id as `<probe>`: its messages
/// (`{launch, message}`), the lines that were not JSON (`{launch, raw}`) and how each launch
/// ended (`{launch, exit}`; a harness's kill at its bound named). What `harness explore`
/// compares.
pub fn app_server_messages(transcript: &[Record], aliases: &[(String, String)]) -> Vec<Value> {
    let mut probes: Vec<(String, String)> = Vec::new();
    let mut shown = Vec::new();
    for record in transcript {
        let entry = match record {
            Record::Message {
                direction: Direction::Out,
                message,
                launch,
                ..
            } => {
                for found in super::sent::uuids(&message.to_string()) {
                    let probe = codex::mock_api::probe_id_for(&found);
                    if !probes.iter().any(|(p, _)| *p == probe) {
                        probes.push((probe, "<probe>".into()));
                    }
                }
                json!({"launch": launch, "message": message})
            }
            Record::Raw {
                direction: Direction::Out,
                text,
                launch,
                ..
            } => json!({"launch": launch, "raw": text}),
            Record::Exit {
                launch,
                status,
                signal,
                killed_by_harness,
                ..
            } => {
                json!({"launch": launch, "exit": {"status": status, "signal": signal, "killed": killed_by_harness}})
            }
            _ => continue,
        };
        shown.push(entry);
    }
    let mut placeholders = super::sent::Placeholders::default();
    for entry in &mut shown {
        placeholders.value(entry, aliases);
        // After the ids: a model-made id holds the probe id on one side only.
        replace_in_strings(entry, &probes);
        mask(entry, None);
    }
    shown
}

fn replace_in_strings(value: &mut Value, aliases: &[(String, String)]) {
    match value {
        Value::String(text) => *text = super::normalise::apply_aliases(text, aliases),
        Value::Array(items) => items
            .iter_mut()
            .for_each(|v| replace_in_strings(v, aliases)),
        Value::Object(map) => map
            .values_mut()
            .for_each(|v| replace_in_strings(v, aliases)),
        _ => {}
    }
}

/// The first answer that differs between the sides, as `METHOD PATH: REAL ≠ FAKE (…)`, or
/// `None` when every answer both sides gave agrees. Only for a fake that plays the real
/// Codex's release: another release's answers differ by construction (its fields, its feature
/// defaults, its model catalogue), so a pair whose release no fake plays is not compared here.
pub(crate) fn difference(fake: &[Answer], real: &[Answer]) -> Option<String> {
    for (index, (f, r)) in fake.iter().zip(real).enumerate() {
        if f["method"] != r["method"] || f["launch"] != r["launch"] {
            return None;
        }
        let answered = |a: &Value| a.get("result").is_some() || a.get("error").is_some();
        if !answered(f) || !answered(r) {
            continue;
        }
        let strip = |a: &Value| {
            let mut a = a.clone();
            if let Some(map) = a.as_object_mut() {
                map.remove("launch");
                map.remove("method");
            }
            a
        };
        if let Some(found) = super::field_diff::first(&strip(r), &strip(f)) {
            return Some(format!(
                "{} {}: {} ≠ {} (the real Codex's answer ≠ the fake's; request {} of what the driver asked, launch {})",
                real[index]["method"].as_str().unwrap_or("?"),
                found.path,
                found.show_left(),
                found.show_right(),
                index,
                real[index]["launch"]
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(launch: u64, direction: Direction, message: Value) -> Record {
        Record::Message {
            launch,
            direction,
            time: 0,
            message,
        }
    }

    /// A `codex --version` probe launch (no messages), then the app-server: its answers are
    /// compared, the invented `serviceTier` named with both values.
    fn transcript(service_tier: Value, thread: &str, port: u16) -> Vec<Record> {
        vec![
            Record::StdinClosed { launch: 1, time: 0 },
            message(
                2,
                Direction::In,
                json!({"id": 1, "method": "thread/start", "params": {}}),
            ),
            message(
                2,
                Direction::Out,
                json!({"id": 1, "result": {"thread": {"id": thread, "createdAt": port, "path": format!("/h/sessions/2026/12/0{}/rollout-2026-12-05T09-0{}-37-{thread}.jsonl", port % 9, port % 7)}, "serviceTier": service_tier, "url": format!("http://127.0.0.1:{port}/v1")}}),
            ),
        ]
    }

    #[test]
    fn an_invented_field_is_named_with_both_values_in_any_launch() {
        let fake = app_server_answers(
            &transcript(Value::Null, "01a2310e-f7aa-71a2-b7e9-e659bfd286b5", 9),
            &[],
        );
        let real = app_server_answers(
            &transcript(json!("default"), "01a2310e-0000-71a2-b7e9-e659bfd286b5", 40),
            &[],
        );
        let told = difference(&fake, &real).expect("a difference");
        assert!(
            told.starts_with(r#"thread/start result.serviceTier: "default" ≠ null"#),
            "{told}"
        );
        assert!(told.contains("launch 2"), "{told}");
        let same = app_server_answers(
            &transcript(json!("default"), "01a2310e-f7aa-71a2-b7e9-e659bfd286b5", 9),
            &[],
        );
        assert_eq!(difference(&same, &real), None, "ids, times, ports, dates");
        let git = |info: Value| {
            let mut answers = vec![
                json!({"launch": 1, "method": "thread/resume", "result": {"thread": {"gitInfo": info}}}),
            ];
            mask(&mut answers[0], None);
            answers
        };
        assert_eq!(
            difference(&git(Value::Null), &git(json!({"branch": "b"}))),
            None
        );
        let resumed = |cursor: Value| {
            vec![
                json!({"launch": 1, "method": "thread/resume", "result": {"turnsBackwardsCursor": cursor}}),
            ]
        };
        let (fake, real) = (
            resumed(json!("{\"rolloutOrdinal\":2}")),
            resumed(json!("{\"rolloutOrdinal\":9}")),
        );
        let mask_all = |answers: Vec<Value>| -> Vec<Value> {
            answers
                .into_iter()
                .map(|mut a| {
                    mask(&mut a, None);
                    a
                })
                .collect()
        };
        assert_eq!(difference(&mask_all(fake), &mask_all(real.clone())), None);
        assert!(difference(&mask_all(resumed(Value::Null)), &mask_all(real)).is_some());
    }

    #[test]
    fn a_panic_message_compares_without_its_thread_id() {
        let mut real = json!({"message": "helper failed: thread 'main' (92) panicked at x.rs:1:2"});
        let mut fake = json!({"message": "helper failed: thread 'main' (2) panicked at x.rs:1:2"});
        mask(&mut real, None);
        mask(&mut fake, None);
        assert_eq!(real, fake);
        assert_eq!(
            real["message"],
            "helper failed: thread 'main' (<tid>) panicked at x.rs:1:2"
        );
    }

    #[test]
    fn a_field_one_side_lacks_is_named_absent() {
        let answer =
            |result: Value| vec![json!({"launch": 1, "method": "turn/start", "result": result})];
        let (fake, real) = (
            answer(json!({"turn": {"id": "x"}, "status": "a"})),
            answer(json!({"turn": {"id": "x", "items": []}, "status": "a"})),
        );
        let told = difference(&fake, &real).expect("a difference");
        assert!(
            told.starts_with("turn/start result.turn.items: [] ≠ absent"),
            "{told}"
        );
    }
}
