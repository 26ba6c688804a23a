//! The driver's events, normalised for the comparison (see the parent module): ids as `<id-N>`,
//! the cell's and the app-server's folders as placeholders, probe ids as `<probe>`, the runner
//! as `<runner>`, and a command's output lines in a canonical order.

use codex::mock_api::probe_id_for;
use fake_app_server::sandbox::DENIAL_KEYWORDS;
use graders::events::{Body, Event, Source};
use regex::Regex;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Driver event kinds left out of the comparison (see the module docs).
pub(crate) const NOT_COMPARED: &[&str] = &["diagnostic"];
/// Fields that measure time, by event kind: their value is how fast the app-server or the
/// driver was, which differs from run to run of the same side. A measured value is compared as
/// `<ms>` (so whether there is one still counts: `null` marks an answer to an id never asked).
const TIMING_FIELDS: &[(&str, &str)] = &[
    ("protocol.client-request-answered", "latency_ms"),
    ("protocol.server-request-answered", "latency_ms"),
];
/// Notifications whose number the real Codex itself varies from run to run with timing, with
/// why: compared as sent or not, not by count. (The counts of every other method must match.)
const TIMING_DEPENDENT_COUNTS: &[(&str, &str)] = &[(
    "thread/goal/updated",
    "whether the usage of the response that created the goal counts for it races the goal's \
     creation (measured with 0.169: 2 or 3 updates for the same script)",
)];
/// Notifications left out of the summary's comparison altogether, with why: whether the real
/// Codex sends them at all does not follow from the scenario.
const NOT_COMPARED_METHODS: &[(&str, &str)] = &[
    (
        "item/commandExecution/outputDelta",
        "sent only for a command still running after ~0.25 s, so a quick command has none on \
         one run and some on the next",
    ),
    (
        "configWarning",
        "the start-up bubblewrap warning: measured with 0.169, the real Codex also warns of no \
         bubblewrap on PATH for launches whose permissions need no sandbox (external-sandbox \
         launches, containers), which the fake does not mirror yet; the warning's text is \
         compared where the driver shows it",
    ),
];
/// The sizes of legal lines the size cases send (`protocol-size`: 64 KiB, 1 MiB, 2 MiB).
const LINE_SIZE_CASES: &[u64] = &[64 << 10, 1 << 20, 2 << 20];
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
/// A probe file is named `NAME-<probe id>.txt` (`plan-write-probe-…`, `approval-probe-…`,
/// `file-change-probe-…`): the id follows this separator.
const PROBE_SEPARATOR: char = '-';

/// The driver-visible sequence of a run, normalised: one JSON value per driver event, `{kind,
/// payload}`, with ids as `<id-N>`, the cell folder as `<cell>` (and the app-server's own
/// folders as in [`side_aliases`]), the runner as `<runner>` and probe ids as `<probe>`.
#[cfg(test)]
pub(crate) fn normalise(events: &[Event], cell_root: &str) -> Vec<Value> {
    normalise_with(events, &[(cell_root.to_string(), "<cell>".to_string())])
}

/// `normalise` with explicit path aliases, applied in order.
pub(crate) fn normalise_with(events: &[Event], aliases: &[(String, String)]) -> Vec<Value> {
    let mut ids = IdMap::default();
    let mut out = Vec::new();
    let denied = racing_denied_commands(events);
    for event in exchanges_in_id_order(events) {
        let mut value = serde_json::to_value(&event.body).expect("events serialize");
        if NOT_COMPARED.contains(&value["kind"].as_str().unwrap_or_default()) {
            continue;
        }
        let item_id = value["payload"]["item"]["id"].as_str();
        if item_id.is_some_and(|id| denied.iter().any(|d| d == id)) {
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
            // The digest of the canary secrets planted in the driver's environment: fresh random
            // values per cell, so only their names compare.
            if let Some(digest) = value["payload"]["protocol"]
                .get_mut("canaries")
                .and_then(|c| c.get_mut("digest"))
                .filter(|d| d.is_string())
            {
                *digest = Value::String("<digest>".into());
            }
        }
        if let Body::SessionRelaunched(_) = event.body {
            // The relaunch's digest, computed like run.started's (paths included).
            value["payload"]["identity"] = Value::String("<identity>".into());
        }
        // Probe ids are derived from the thread id: learn them before ids are replaced.
        if let Body::SessionStarted(started) = &event.body {
            ids.probes.push(probe_id_for(&started.thread_id));
        }
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        for (_, field) in TIMING_FIELDS.iter().filter(|(k, _)| *k == kind) {
            if let Some(measured) = value["payload"].get_mut(*field).filter(|v| v.is_number()) {
                *measured = Value::String("<ms>".into());
            }
        }
        if let Body::ServerNotifications(_) = event.body {
            let payload = &mut value["payload"];
            payload["largest_line_bytes"] = line_size_class(payload["largest_line_bytes"].as_u64());
            // By method, so that a difference names the method (nothing is dropped).
            payload["methods"] = by_method(payload["methods"].take());
            uncount_denied_items(&mut payload["methods"], denied.len() as u64);
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
    order_signalled_launch_end(&mut out);
    close_before_an_unclosed_exit(&mut out);
    out
}

/// The same race can leave no close at all: the Python SDK closes stdin and signals at once,
/// the app-server exits (status 0) and the tap ends before it has read the end of the driver's
/// input (measured once in a rehearsal: the fake's side had the exit alone, the real side the
/// close, then the exit). An exit of a launch whose stdin was never seen closing, with nothing
/// of that launch after it, compares as its close followed by the exit.
pub(super) fn close_before_an_unclosed_exit(sequence: &mut Vec<Value>) {
    let Some(at) = sequence
        .iter()
        .rposition(|e| e["kind"] == "protocol.app-server-exited")
    else {
        return;
    };
    let launch = sequence[at]["payload"]["launch"].clone();
    let same_launch = |e: &Value| e["payload"]["launch"] == launch;
    let closed = sequence
        .iter()
        .any(|e| e["kind"] == "protocol.stdin-closed" && same_launch(e));
    let later_of_launch = sequence[at + 1..].iter().any(|e| {
        same_launch(e)
            && e["kind"]
                .as_str()
                .is_some_and(|k| k.starts_with("protocol."))
    });
    let exited_on_its_own = sequence[at]["payload"]["status"] == 0
        && sequence[at]["payload"]["after_stdin_closed"] != Value::Bool(true);
    if closed || later_of_launch || !exited_on_its_own {
        return;
    }
    sequence.insert(
        at,
        serde_json::json!({"kind": "protocol.stdin-closed", "payload": {"launch": launch}}),
    );
}

/// A driver that closes its app-server's stdin and signals it at once (the Python SDK: close,
/// then SIGTERM 2 ms later) races two threads of the tap: under load the forwarded signal's
/// exit can be recorded before the tap has read the end of the driver's input (the exit then
/// says `after_driver_signal`, not `after_stdin_closed`). Which record comes first is
/// scheduling, not behaviour: an exit after the driver's signal that the stdin's close follows
/// at once compares as the exit after that close.
pub(super) fn order_signalled_launch_end(sequence: &mut [Value]) {
    for at in 0..sequence.len().saturating_sub(1) {
        let exit = &sequence[at];
        let next = &sequence[at + 1];
        let raced = exit["kind"] == "protocol.app-server-exited"
            && exit["payload"]["after_driver_signal"] == Value::Bool(true)
            && next["kind"] == "protocol.stdin-closed"
            && next["payload"]["launch"] == exit["payload"]["launch"];
        if !raced {
            continue;
        }
        if let Some(payload) = sequence[at]["payload"].as_object_mut() {
            payload.remove("after_driver_signal");
            payload.insert("after_stdin_closed".into(), Value::Bool(true));
        }
        sequence.swap(at, at + 1);
    }
}

/// The driver's events, each block of consecutive client requests and their answers in the
/// order of the requests' ids (each request before its answer). A driver that sends requests
/// without waiting for the previous answer (codex-acp's `config/read` and `account/read` at
/// start-up) sees the answers arrive between its requests as fast as the app-server is, which
/// is timing, not behaviour; which requests were sent and how each was answered still compare.
fn exchanges_in_id_order(events: &[Event]) -> Vec<&Event> {
    let exchange_key = |event: &Event| match &event.body {
        Body::ClientRequest(r) => Some((r.launch, r.id.parse::<u64>().ok(), r.id.clone(), 0)),
        Body::ClientRequestAnswered(a) => {
            Some((a.launch, a.id.parse::<u64>().ok(), a.id.clone(), 1))
        }
        _ => None,
    };
    let mut out: Vec<&Event> = Vec::new();
    let mut block: Vec<&Event> = Vec::new();
    for event in events.iter().filter(|e| e.source == Source::Driver) {
        if exchange_key(event).is_some() {
            block.push(event);
            continue;
        }
        block.sort_by_key(|e| exchange_key(e));
        out.append(&mut block);
        out.push(event);
    }
    block.sort_by_key(|e| exchange_key(e));
    out.append(&mut block);
    answer_before_its_turn_started(&mut out);
    out
}

/// A `turn/start` answer right after the `turn/started` of the turn it names is put before it.
/// Codex writes the two from different tasks: under load the real Codex 0.171 sent the
/// notification first (seen once in a container, the same pair answered first on other runs),
/// so their order is timing, not behaviour. Only this adjacent pair moves; every other order
/// still compares.
fn answer_before_its_turn_started(events: &mut [&Event]) {
    for i in 1..events.len() {
        let (Body::TurnStarted(started), Body::ClientRequestAnswered(answer)) =
            (&events[i - 1].body, &events[i].body)
        else {
            continue;
        };
        if answer.method == "turn/start" && answer.turn_id.as_deref() == Some(&started.turn_id) {
            events.swap(i - 1, i);
        }
    }
}

/// The command items Codex may or may not send, by their ids: a sandboxed command that failed
/// with a denial keyword in its output. Codex judges such a command a sandbox denial (and sends
/// no item, only the model learns of it) when its output has been read by the time it checks
/// the early exit, which races the process's output reader: measured with 0.169 in
/// `lsm-mount-denied`, the same `bwrap: Failed to make / slave: Permission denied` in 18 ms
/// gave an item on one run and none on the next. The fake sends none; the model's tool output
/// (compared in the model log) still says what happened. Such items are not compared.
pub(super) fn racing_denied_commands(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.source == Source::Driver)
        .filter_map(|event| {
            let Body::ItemCompleted(_) = &event.body else {
                return None;
            };
            let value = serde_json::to_value(&event.body).ok()?;
            let item = &value["payload"]["item"];
            let output = item["aggregated_output"].as_str()?.to_ascii_lowercase();
            let denied = item["type"] == "command-execution"
                && item["status"] == "failed"
                && item["ran_in_sandbox"] == true
                && item["exit_code"].as_i64().is_some_and(|code| code != 0)
                && DENIAL_KEYWORDS.iter().any(|k| output.contains(k));
            denied.then(|| item["id"].as_str().map(str::to_string))?
        })
        .collect()
}

/// The summary's `item/started` and `item/completed` lines without the notifications of the
/// `dropped` items left out by [`racing_denied_commands`].
fn uncount_denied_items(methods: &mut Value, dropped: u64) {
    if dropped == 0 {
        return;
    }
    for method in ["item/started", "item/completed"] {
        let Some(line) = methods.get_mut(method) else {
            continue;
        };
        for counted in ["count", "checked", "extra_fields"] {
            if let Some(n) = line.get_mut(counted).filter(|n| n.is_u64()) {
                *n = Value::from(n.as_u64().unwrap_or_default().saturating_sub(dropped));
            }
        }
    }
}

/// The notifications summary's longest line, as the class the size cases judge it by (the
/// largest case size it reaches 90 % of, as `graders::grade::protocol` reads it), not in bytes:
/// the byte count holds the cell's folder paths, which are longer on the real side by
/// construction (its Codex home lies deeper, its runner's name differs), so it never matches
/// exactly, while the class is what a driver's line bound meets.
pub(super) fn line_size_class(bytes: Option<u64>) -> Value {
    let Some(bytes) = bytes else {
        return Value::Null;
    };
    let reached = LINE_SIZE_CASES
        .iter()
        .rev()
        .find(|size| bytes >= *size / 10 * 9);
    Value::String(match reached {
        Some(size) => format!("at least 90 % of {} KiB", size >> 10),
        None => format!("under 90 % of {} KiB", LINE_SIZE_CASES[0] >> 10),
    })
}

/// The notifications summary's per-method lines as an object keyed by method, without the
/// methods of [`NOT_COMPARED_METHODS`]; for a method whose count varies with timing ([`TIMING_DEPENDENT_COUNTS`]) the counts say only that some
/// were sent.
fn by_method(methods: Value) -> Value {
    match methods {
        Value::Array(lines) => Value::Object(
            lines
                .into_iter()
                .filter(|line| {
                    !NOT_COMPARED_METHODS
                        .iter()
                        .any(|(m, _)| line["method"].as_str() == Some(*m))
                })
                .map(|mut line| {
                    let method = line["method"].take();
                    let key = method
                        .as_str()
                        .map_or_else(|| method.to_string(), str::to_string);
                    if let Value::Object(fields) = &mut line {
                        fields.remove("method");
                        if TIMING_DEPENDENT_COUNTS.iter().any(|(m, _)| *m == key) {
                            for counted in ["count", "checked", "extra_fields"] {
                                if let Some(n) = fields.get_mut(counted) {
                                    let some = n.as_u64().is_some_and(|n| n > 0);
                                    *n = Value::String(if some { "some" } else { "none" }.into());
                                }
                            }
                        }
                    }
                    (key, line)
                })
                .collect(),
        ),
        other => other,
    }
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
    out = normalise_canary_values(&out);
    for probe in &ids.probes {
        out = out.replace(
            &format!("{PROBE_SEPARATOR}{probe}"),
            &format!("{PROBE_SEPARATOR}<probe>"),
        );
    }
    recut(text, &out)
}

/// How many characters before the `…` of a cut text are not compared.
const CUT_SLACK: usize = 16;

/// The recorder cuts a long text at a fixed number of characters (`text…`), before any
/// normalising: a thread id, path or probe id of another length on the other side moves what
/// the cut leaves (`thread 'main' (104)` and `(2)` both become `(<tid>)`, after which the real
/// text shows two characters fewer). A cut text (`raw`, as recorded) is compared by its
/// normalised form's first (recorded length - [`CUT_SLACK`]) characters, the same count on both
/// sides.
pub(super) fn recut(raw: &str, normalised: &str) -> String {
    let (Some(recorded), Some(shown)) = (raw.strip_suffix('…'), normalised.strip_suffix('…'))
    else {
        return normalised.to_string();
    };
    let keep = recorded.chars().count().saturating_sub(CUT_SLACK);
    let kept: String = shown.chars().take(keep).collect();
    format!("{kept}…")
}

/// A Rust panic names the thread's OS id (`thread 'main' (92) panicked`): a pid, not behaviour.
pub(super) fn normalise_panic_thread_id(text: &str) -> String {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN
        .get_or_init(|| Regex::new(r"thread 'main' \([0-9]+\)").expect("the pattern compiles"))
        .replace_all(text, "thread 'main' (<tid>)")
        .into_owned()
}

/// The canary values the harness plants (`ccf-canary-` in the driver's environment,
/// `ccf-home-canary-` in the app-server's home) are random per cell: a leaked one is the same
/// behaviour on both sides whatever its value.
pub(super) fn normalise_canary_values(text: &str) -> String {
    static PATTERN: OnceLock<Regex> = OnceLock::new();
    PATTERN
        .get_or_init(|| {
            Regex::new("(ccf-(?:home-)?canary-)[0-9a-f]{32}").expect("the pattern compiles")
        })
        .replace_all(text, "${1}<random>")
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

/// Where a run says which release it was checked against: the driver's protocol context and
/// the notifications summary.
const RELEASE_FIELDS: &[(&str, &[&str])] = &[
    ("run.started", &["protocol", "release"]),
    ("protocol.server-notifications", &["release"]),
];

/// A sequence with the release it names as `<release>`: for a real Codex compared with a fake
/// playing another release (no fake plays every pinned release), where the release differs by
/// construction.
pub(crate) fn mask_release(sequence: &mut [Value]) {
    for value in sequence {
        let kind = value["kind"].as_str().unwrap_or_default().to_string();
        for (_, path) in RELEASE_FIELDS.iter().filter(|(k, _)| *k == kind) {
            let field = path
                .iter()
                .try_fold(&mut value["payload"], |field, key| field.get_mut(*key));
            if let Some(field) = field.filter(|f| f.is_string()) {
                *field = Value::String("<release>".into());
            }
        }
        // Which notifications a release sends, and its schema's verdict on them, differ from
        // release to release (0.160 sends no `thread/readState/changed`): the summary is compared
        // only between the same releases, and so is which of them the client was not owed.
        if kind == "protocol.server-notifications" {
            value["payload"]["methods"] = Value::String("<another release's>".into());
            value["payload"]["not_owed"] = Value::String("<another release's>".into());
        }
        // What a release sends only to experimental clients is measured per release (none
        // recorded for a release without a persona): compared only between the same releases.
        if kind == "run.started" {
            if let Some(protocol) = value["payload"]["protocol"].as_object_mut() {
                protocol.insert(
                    "experimental_only_notifications".into(),
                    Value::String("<release's>".into()),
                );
            }
        }
    }
}
