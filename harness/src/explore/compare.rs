//! Two sides' transcripts of one session, compared message by message: everything the
//! app-server said, normalised by the fidelity normaliser
//! (`fidelity::answers::app_server_messages`), but the notifications whose presence or count
//! the real Codex varies by timing or by its host (each with why). The first message that
//! differs is named, with the field path and both values.

use serde_json::Value;

/// Notifications not compared, with why: they do not follow from the session.
pub const NOT_COMPARED: &[(&str, &str)] = &[
    (
        "item/commandExecution/outputDelta",
        "sent only for a command still running after ~0.25 s (fidelity's summary leaves it \
         out for the same reason)",
    ),
    (
        "account/rateLimits/updated",
        "the mock model API's response headers carry no rate limits; when the real Codex sends \
         one is timing",
    ),
    (
        "thread/tokenUsage/updated",
        "the mock model API's token counts; the fake reports the script's",
    ),
];

/// Notifications compared by what they say but not where: the real Codex sends them from
/// another task than the answer they follow, so they land before or after it from run to run.
pub const UNORDERED: &[(&str, &str)] = &[(
    "warning",
    "the under-development-feature warning of a thread's first turn (measured with 0.169: \
     before or after the thread/start answer)",
)];

/// Notifications the real Codex sends from different tasks at the same moment, with why: in a
/// run of consecutive ones, each method's messages keep their order but the methods are
/// compared in a fixed order.
pub const RACING: &[(&str, &str)] = &[
    (
        "item/completed",
        "a declined command's item completes as the thread leaves waitingOnApproval (measured \
         with 0.169: item first mostly, the status first under load)",
    ),
    ("thread/status/changed", "see item/completed"),
];

/// Notifications the real Codex sends from another task than an answer they come with, with
/// why: one right after an answer compares as if it came right before it.
pub const RACING_AN_ANSWER: &[(&str, &str)] = &[
    (
        "thread/settings/updated",
        "the settings a turn/start changes (plan mode) are announced as the turn is answered \
         (measured with 0.169: the notification first mostly, the answer first under load)",
    ),
    (
        "item/completed",
        "a dynamic tool call an interrupt ended completes as turn/interrupt is answered \
         (measured with 0.169: the item first mostly, the answer first under load)",
    ),
];

/// Notifications whose back-to-back repeat (the same launch, the same normalised message) is
/// compared as one, with why: a status the client already holds, said again, tells it nothing.
pub const REPEATS_NOT_COUNTED: &[(&str, &str)] = &[(
    "thread/status/changed",
    "thread/archive of a thread started with dynamicTools: the real Codex 0.169 says \
     `notLoaded` once or twice before its answer (measured: twice in 3 of 8 replays of one \
     session, once in every replay without dynamicTools)",
)];

/// What is not compared in a raw event's item (`rawResponseItem/completed`, a thread started
/// with `experimentalRawEvents`), with why.
pub const RAW_ITEM_TEXTS_NOT_COMPARED: &str = "the texts of Codex's context messages (every \
     content part whose provenance is not the user's: the home's skills, the sandbox's and \
     tools' instructions, the host's date and time zone) are its prompts, not the protocol; a \
     tool output's `Chunk ID` and `Wall time` are random and timing";

/// A tool output's header values that are random or timing (see
/// [`RAW_ITEM_TEXTS_NOT_COMPARED`]).
fn tool_output_volatiles() -> &'static [(regex::Regex, &'static str)] {
    static PATTERNS: std::sync::OnceLock<Vec<(regex::Regex, &'static str)>> =
        std::sync::OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            (r"Chunk ID: [0-9a-f]+", "Chunk ID: <chunk>"),
            (r"Wall time: [0-9.]+ seconds", "Wall time: <wall> seconds"),
        ]
        .into_iter()
        .map(|(p, r)| {
            (
                regex::Regex::new(p).expect("the tool output patterns compile"),
                r,
            )
        })
        .collect()
    })
}

/// A raw event's item with [`RAW_ITEM_TEXTS_NOT_COMPARED`] masked.
fn mask_raw_item(entry: &mut Value) {
    if entry["message"]["method"] != "rawResponseItem/completed" {
        return;
    }
    let item = &mut entry["message"]["params"]["item"];
    if let Some(Value::String(output)) = item.get_mut("output") {
        for (pattern, placeholder) in tool_output_volatiles() {
            *output = pattern.replace_all(output, *placeholder).into_owned();
        }
    }
    let provenance: Vec<Value> = item["internal_chat_message_metadata_passthrough"]
        ["content_item_metadata"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .map(|p| p["provenance"]["type"].clone())
                .collect()
        })
        .unwrap_or_default();
    if let Some(parts) = item.get_mut("content").and_then(Value::as_array_mut) {
        for (part, source) in parts.iter_mut().zip(provenance) {
            if source != "user" && part.get("text").is_some() {
                part["text"] = Value::String("<not compared>".into());
            }
        }
    }
}

/// Where two sides' normalised messages first differ.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageDivergence {
    /// 0-based position among the compared messages.
    pub index: usize,
    pub real: Option<Value>,
    pub fake: Option<Value>,
    /// `PATH: REAL ≠ FAKE`.
    pub field: String,
}

impl MessageDivergence {
    /// `message N (METHOD): PATH: REAL ≠ FAKE`.
    pub fn describe(&self) -> String {
        let name = |m: &Option<Value>| match m {
            None => "nothing".to_string(),
            Some(m) => label(m),
        };
        format!(
            "message {} (real: {}, fake: {}): {}",
            self.index,
            name(&self.real),
            name(&self.fake),
            self.field
        )
    }

    /// What kind of divergence this is, to tell two shrunk sessions' divergences apart: the
    /// messages' labels and the field path (not the values, which carry ids).
    pub fn class(&self) -> String {
        let name = |m: &Option<Value>| m.as_ref().map(label).unwrap_or_default();
        let path = self.field.split(':').next().unwrap_or_default();
        format!("{} | {} | {path}", name(&self.real), name(&self.fake))
    }
}

/// A message's short name: its method, `answer`, `error`, `raw` or `exit`.
pub fn label(entry: &Value) -> String {
    if let Some(message) = entry.get("message") {
        let kind = match (message.get("method"), message.get("id")) {
            (Some(_), Some(_)) => "request",
            (Some(_), None) => "notification",
            (None, _) if message.get("error").is_some() => "error answer",
            (None, _) => "answer",
        };
        match message["method"].as_str() {
            Some(method) => format!("{kind} {method}"),
            None => kind.to_string(),
        }
    } else if entry.get("exit").is_some() {
        "exit".to_string()
    } else {
        "raw line".to_string()
    }
}

/// The messages compared: all but the [`NOT_COMPARED`] notifications, the [`UNORDERED`] ones
/// moved to the end of their launch (before its exit).
pub fn compared(messages: &[Value]) -> Vec<Value> {
    let method = |entry: &Value| {
        entry["message"]["method"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    let listed = |list: &[(&str, &str)], entry: &Value| {
        let method = method(entry);
        list.iter().any(|(m, _)| *m == method)
    };
    let mut out: Vec<Value> = Vec::new();
    let mut held: Vec<Value> = Vec::new();
    for entry in messages.iter().filter(|e| !listed(NOT_COMPARED, e)) {
        let mut entry = entry.clone();
        mask_raw_item(&mut entry);
        let entry = &entry;
        if listed(REPEATS_NOT_COUNTED, entry) && out.last() == Some(entry) {
            continue;
        }
        if listed(UNORDERED, entry) {
            held.push(entry.clone());
            continue;
        }
        let launch_ends = entry.get("exit").is_some()
            || out
                .last()
                .is_some_and(|last| last["launch"] != entry["launch"]);
        if launch_ends {
            out.append(&mut held);
        }
        out.push(entry.clone());
    }
    out.append(&mut held);
    order_answer_races(&mut out);
    order_racing(&mut out);
    out
}

/// An answer followed by [`RACING_AN_ANSWER`] notifications of its launch: the notifications
/// first (so comparing a compared list again changes nothing).
fn order_answer_races(messages: &mut [Value]) {
    let is_answer = |entry: &Value| {
        entry["message"].get("method").is_none() && entry["message"].get("id").is_some()
    };
    let races = |answer: &Value, entry: &Value| {
        let method = entry["message"]["method"].as_str().unwrap_or_default();
        entry["message"].get("id").is_none()
            && entry["launch"] == answer["launch"]
            && RACING_AN_ANSWER.iter().any(|(m, _)| *m == method)
    };
    let mut index = 0;
    while index < messages.len() {
        if !is_answer(&messages[index]) {
            index += 1;
            continue;
        }
        let mut end = index + 1;
        while end < messages.len() && races(&messages[index], &messages[end]) {
            end += 1;
        }
        messages[index..end].rotate_left(1);
        index = end;
    }
}

/// Each run of consecutive [`RACING`] notifications in a fixed order of methods, each method's
/// own messages in the order sent.
fn order_racing(messages: &mut [Value]) {
    let racing = |entry: &Value| {
        let method = entry["message"]["method"].as_str().unwrap_or_default();
        entry["message"].get("id").is_none() && RACING.iter().any(|(m, _)| *m == method)
    };
    let mut start = 0;
    while start < messages.len() {
        let mut end = start;
        while end < messages.len() && racing(&messages[end]) {
            end += 1;
        }
        messages[start..end].sort_by_key(|entry| {
            entry["message"]["method"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        });
        start = end + 1;
    }
}

/// The first difference of two compared message lists.
pub fn first_divergence(real: &[Value], fake: &[Value]) -> Option<MessageDivergence> {
    let length = real.len().max(fake.len());
    (0..length).find_map(|index| {
        let (r, f) = (real.get(index), fake.get(index));
        let field = match (r, f) {
            (Some(r), Some(f)) => {
                let found = maintainer_tools::fidelity::field_diff::first(r, f)?;
                format!(
                    "{}: {} ≠ {}",
                    if found.path.is_empty() {
                        "(the message)"
                    } else {
                        found.path.as_str()
                    },
                    found.show_left(),
                    found.show_right()
                )
            }
            (Some(r), None) => format!("the real Codex sent {} and the fake nothing", label(r)),
            (None, Some(f)) => format!("the fake sent {} and the real Codex nothing", label(f)),
            (None, None) => return None,
        };
        Some(MessageDivergence {
            index,
            real: r.cloned(),
            fake: f.cloned(),
            field,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_differing_message_is_named_with_its_field_and_both_values() {
        let real = vec![
            json!({"launch": 1, "message": {"id": 1, "result": {"serviceTier": "default"}}}),
            json!({"launch": 1, "exit": {"status": 0}}),
        ];
        let fake = vec![
            json!({"launch": 1, "message": {"id": 1, "result": {"serviceTier": null}}}),
            json!({"launch": 1, "exit": {"status": 0}}),
        ];
        let found = first_divergence(&real, &fake).expect("a divergence");
        assert_eq!(found.index, 0);
        assert_eq!(
            found.describe(),
            r#"message 0 (real: answer, fake: answer): message.result.serviceTier: "default" ≠ null"#
        );
        assert_eq!(first_divergence(&real, &real), None);
        let shorter = first_divergence(&real, &fake[..0]).expect("a divergence");
        assert!(
            shorter.field.contains("the fake nothing"),
            "{}",
            shorter.field
        );
    }

    #[test]
    fn timing_notifications_are_not_compared() {
        let messages = vec![
            json!({"launch": 1, "message": {"method": "thread/tokenUsage/updated", "params": {}}}),
            json!({"launch": 1, "message": {"method": "turn/completed", "params": {}}}),
        ];
        assert_eq!(compared(&messages), messages[1..]);
    }

    #[test]
    fn a_status_change_racing_an_item_completion_compares_in_one_order() {
        let item = json!({"launch": 1, "message": {"method": "item/completed", "params": {}}});
        let active = json!({"launch": 1, "message": {"method": "thread/status/changed", "params": {"s": 1}}});
        let idle = json!({"launch": 1, "message": {"method": "thread/status/changed", "params": {"s": 2}}});
        let answer = json!({"launch": 1, "message": {"id": 1, "result": {}}});
        let one = compared(&[active.clone(), item.clone(), idle.clone(), answer.clone()]);
        let other = compared(&[item.clone(), active.clone(), idle.clone(), answer.clone()]);
        assert_eq!(one, other);
        assert_eq!(one, [item, active, idle, answer]);
    }

    #[test]
    fn a_status_said_twice_in_a_row_compares_as_said_once() {
        let not_loaded = json!({"launch": 1, "message": {"method": "thread/status/changed", "params": {"status": {"type": "notLoaded"}}}});
        let idle = json!({"launch": 1, "message": {"method": "thread/status/changed", "params": {"status": {"type": "idle"}}}});
        let answer = json!({"launch": 1, "message": {"id": 3, "result": {}}});
        let twice = compared(&[not_loaded.clone(), not_loaded.clone(), answer.clone()]);
        assert_eq!(twice, compared(&[not_loaded.clone(), answer.clone()]));
        // A different status, or one of another launch, is a message of its own.
        let other_launch = json!({"launch": 2, "message": not_loaded["message"].clone()});
        assert_eq!(
            compared(&[not_loaded.clone(), idle.clone(), not_loaded.clone()]).len(),
            3
        );
        assert_eq!(compared(&[not_loaded.clone(), other_launch]).len(), 2);
        // Any other notification said twice counts twice.
        let item = json!({"launch": 1, "message": {"method": "item/completed", "params": {}}});
        assert_eq!(compared(&[item.clone(), item]).len(), 2);
    }

    #[test]
    fn a_notification_racing_an_answer_compares_before_it() {
        let settings =
            json!({"launch": 1, "message": {"method": "thread/settings/updated", "params": {}}});
        let answer = json!({"launch": 1, "message": {"id": 2, "result": {}}});
        let started = json!({"launch": 1, "message": {"method": "turn/started", "params": {}}});
        let one = compared(&[settings.clone(), answer.clone(), started.clone()]);
        let other = compared(&[answer.clone(), settings.clone(), started.clone()]);
        assert_eq!(one, other);
        assert_eq!(one, [settings.clone(), answer.clone(), started.clone()]);
        // Any other notification keeps its place, and a compared list compares the same.
        assert_eq!(
            compared(&[answer.clone(), started.clone()]),
            [answer.clone(), started]
        );
        let item = json!({"launch": 1, "message": {"method": "item/completed", "params": {}}});
        let twice = compared(&[answer.clone(), settings.clone(), item.clone()]);
        assert_eq!(twice, [settings, item, answer]);
        assert_eq!(compared(&twice), twice);
    }

    #[test]
    fn a_warning_compares_at_the_end_of_its_launch() {
        let warning = json!({"launch": 1, "message": {"method": "warning", "params": {}}});
        let answer = json!({"launch": 1, "message": {"id": 1, "result": {}}});
        let exit = json!({"launch": 1, "exit": {"status": 0}});
        let before = compared(&[warning.clone(), answer.clone(), exit.clone()]);
        let after = compared(&[answer.clone(), warning.clone(), exit.clone()]);
        assert_eq!(before, after);
        assert_eq!(before, [answer, warning, exit]);
    }

    #[test]
    fn a_raw_items_context_texts_and_tool_output_timings_are_not_compared() {
        let raw = |text: &str, source: &str, output: &str| {
            json!({"launch": 1, "message": {"method": "rawResponseItem/completed", "params": {"item": {
                "content": [{"type": "input_text", "text": text}], "output": output,
                "internal_chat_message_metadata_passthrough": {
                    "content_item_metadata": [{"provenance": {"type": source}}]},
            }}}})
        };
        let real = raw(
            "<skills_instructions>…",
            "skills",
            "Chunk ID: c6b298\nWall time: 0.0012 seconds\nProcess exited with code 0",
        );
        let fake = raw(
            "<host_skills.instructions: not modelled>",
            "skills",
            "Chunk ID: 0a1b2c\nWall time: 0.0000 seconds\nProcess exited with code 0",
        );
        assert_eq!(compared(&[real]), compared(&[fake]));
        // The user's own words and the rest of an output are compared.
        let user = compared(&[raw("explore", "user", "")]);
        assert_eq!(
            user[0]["message"]["params"]["item"]["content"][0]["text"],
            "explore"
        );
        assert_ne!(
            compared(&[raw("x", "skills", "Process exited with code 0")]),
            compared(&[raw("x", "skills", "Process exited with code 1")])
        );
    }
}
