//! Checks a parsed scenario before it plays: names the fake does not know, combinations that
//! exclude each other, and every number's range (a size or a time a typo made absurd must fail
//! at load naming the key, not abort the fake mid-run).

use super::codex_tools;
use super::model::ModelStep;
use super::server_steps::{ServerAction, ServerStep};
use super::{closest, Scenario, ScenarioTurn};
use crate::protocol::release_schema;
use std::ops::RangeInclusive;

const MIB: u64 = 1024 * 1024;
/// Any wait a scenario sets: at most an hour.
const MS: RangeInclusive<u64> = 0..=3_600_000;
/// Any wait that must end on its own: at least a millisecond.
const POSITIVE_MS: RangeInclusive<u64> = 1..=3_600_000;
/// Any size a scenario writes: at most 64 MiB.
const BYTES: RangeInclusive<u64> = 1..=64 * MIB;

/// The server requests a model step causes, with the step that does.
const MODEL_CAUSED: [(&str, &str); 4] = [
    (
        "item/fileChange/requestApproval",
        "a `tool-call` of `apply_patch`",
    ),
    (
        "item/tool/requestUserInput",
        "a `tool-call` of `request_user_input` in plan mode",
    ),
    (
        "item/permissions/requestApproval",
        "a `tool-call` of `request_permissions`",
    ),
    ("item/tool/call", "a `tool-call` of a dynamic tool"),
];

/// The requests a server step can send (the rest are caused by model steps).
pub(super) const SERVER_REQUESTS: [&str; 7] = [
    "item/commandExecution/requestApproval",
    "mcpServer/elicitation/request",
    "account/chatgptAuthTokens/refresh",
    "attestation/generate",
    "currentTime/read",
    "applyPatchApproval",
    "execCommandApproval",
];

pub(super) fn validate(scenario: &Scenario) -> Result<(), String> {
    methods(scenario)?;
    for method in scenario.notifications.keys() {
        if !crate::protocol::is_server_notification(method) {
            return Err(format!(
                "notifications.\"{method}\": `{method}` is not a notification Codex {} sends{}",
                crate::protocol::shapes::cli_version(),
                closest(method, crate::protocol::server_notifications())
            ));
        }
    }
    if let Some(filter) = &scenario.app_server_log {
        log_filter(filter)?;
    }
    let limits = &scenario.limits;
    in_range(
        "limits.client_answer_ms",
        limits.client_answer_ms,
        POSITIVE_MS,
    )?;
    in_range("limits.hang_ms", limits.hang_ms, POSITIVE_MS)?;
    in_range("limits.command_ms", limits.command_ms, POSITIVE_MS)?;
    in_range("limits.goal_turns", u64::from(limits.goal_turns), 0..=100)?;
    for (index, start) in scenario.threads.start_index.iter().flatten().enumerate() {
        in_range(
            &format!("threads.start_index[{index}]"),
            *start as u64,
            0..=1_000_000,
        )?;
    }
    for (index, turn) in scenario.turns.iter().enumerate() {
        self::turn(&format!("turns[{index}]"), turn)?;
    }
    Ok(())
}

/// `app_server_log`: comma-separated directives, each a level or `target=level` (a Rust module
/// path), as `RUST_LOG` reads them; nothing else, since it goes into the environment as is.
fn log_filter(filter: &str) -> Result<(), String> {
    let directive = |d: &str| {
        let (target, level) = d.rsplit_once('=').unwrap_or(("", d));
        super::LOG_LEVELS.contains(&level)
            && target
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == ':')
            && target.is_empty() != d.contains('=')
    };
    if filter.split(',').all(directive) {
        return Ok(());
    }
    Err(format!(
        "app_server_log = {filter:?}: each comma-separated directive must be a level ({}) or `target=level`",
        super::LOG_LEVELS.join(", ")
    ))
}

fn in_range(key: &str, value: u64, range: RangeInclusive<u64>) -> Result<(), String> {
    if range.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{key} = {value} is out of range ({}..={})",
            range.start(),
            range.end()
        ))
    }
}

fn methods(scenario: &Scenario) -> Result<(), String> {
    for (method, behaviour) in &scenario.methods {
        let key = format!("methods.\"{method}\"");
        if !crate::protocol::is_client_method(method) {
            return Err(format!(
                "{key}: `{method}` is not a method Codex {} knows{}",
                crate::protocol::shapes::cli_version(),
                closest(method, crate::protocol::client_methods())
            ));
        }
        let answers = [
            behaviour.error.is_some(),
            behaviour.result.is_some(),
            behaviour.result_json.is_some(),
        ];
        if answers.iter().filter(|a| **a).count() > 1 {
            return Err(format!(
                "{key}: `error`, `result` and `result_json` exclude each other"
            ));
        }
        if let Some(text) = &behaviour.result_json {
            if let Err(err) = serde_json::from_str::<serde_json::Value>(text) {
                return Err(format!("{key}.result_json is not JSON: {err}"));
            }
        }
        if let Some(times) = behaviour.times {
            in_range(&format!("{key}.times"), u64::from(times), 0..=1_000_000)?;
        }
        if let Some(delay) = behaviour.delay_ms {
            in_range(&format!("{key}.delay_ms"), delay, MS)?;
        }
        if let Some(bytes) = behaviour.crash_after_bytes {
            in_range(
                &format!("{key}.crash_after_bytes"),
                bytes as u64,
                0..=64 * MIB,
            )?;
        }
        if let Some(bytes) = behaviour.oversized_bytes {
            in_range(&format!("{key}.oversized_bytes"), bytes as u64, BYTES)?;
        }
        if let Some(chunks) = behaviour.split_writes {
            in_range(&format!("{key}.split_writes"), chunks as u64, 1..=4096)?;
        }
        let answered_otherwise = behaviour.hang
            || behaviour.malformed
            || behaviour.crash_after_bytes.is_some()
            || answers.iter().any(|a| *a);
        if behaviour.answer_after_turn {
            if method != "turn/start" {
                return Err(format!(
                    "{key}.answer_after_turn applies to `turn/start` only"
                ));
            }
            if answered_otherwise {
                return Err(format!(
                    "{key}.answer_after_turn needs the real answer (no error, result, hang, malformed or crash)"
                ));
            }
        }
        if behaviour.turns_shown.is_some() {
            if method != "thread/read" {
                return Err(format!("{key}.turns_shown applies to `thread/read` only"));
            }
            if answered_otherwise {
                return Err(format!(
                    "{key}.turns_shown needs the real answer (no error, result, hang, malformed or crash)"
                ));
            }
        }
        if behaviour.fork_thread {
            if method != "thread/resume" {
                return Err(format!("{key}.fork_thread applies to `thread/resume` only"));
            }
            if answered_otherwise {
                return Err(format!(
                    "{key}.fork_thread needs the real answer (no error, result, hang, malformed or crash)"
                ));
            }
        }
    }
    Ok(())
}

fn turn(key: &str, turn: &ScenarioTurn) -> Result<(), String> {
    let steps = turn.steps.len();
    if let Some(fault) = &turn.fault {
        if let Some(after) = fault.after_step {
            if after >= steps {
                return Err(format!(
                    "{key}.fault.after_step = {after} but the turn has {steps} steps"
                ));
            }
        }
        if let Some(bytes) = fault.bytes {
            in_range(&format!("{key}.fault.bytes"), bytes as u64, BYTES)?;
        }
    }
    if turn.stream_drops > super::MAX_STREAM_DROPS {
        return Err(format!(
            "{key}.stream_drops = {} but Codex retries a stream at most {} times",
            turn.stream_drops,
            super::MAX_STREAM_DROPS
        ));
    }
    if turn.fail.is_some() && turn.interrupted {
        return Err(format!(
            "{key}: `fail` and `interrupted` exclude each other"
        ));
    }
    for (index, step) in turn.steps.iter().enumerate() {
        if let ModelStep::ToolCall { name, arguments } = step {
            if let Some(Err(message)) = codex_tools::parse(name, arguments) {
                return Err(format!("{key}.steps[{index}]: {message}"));
            }
        }
        if let ModelStep::Message { text } | ModelStep::Plan { text } = step {
            super::model::check_fillers(text)
                .map_err(|message| format!("{key}.steps[{index}].text: {message}"))?;
        }
    }
    for (index, step) in turn.server_steps.iter().enumerate() {
        server_step(&format!("{key}.server_steps[{index}]"), step, steps)?;
    }
    Ok(())
}

fn server_step(key: &str, step: &ServerStep, steps: usize) -> Result<(), String> {
    if let Some(after) = step.after_step {
        if step.after_turn {
            return Err(format!(
                "{key}: `after_step` and `after_turn` exclude each other"
            ));
        }
        if after >= steps {
            return Err(format!(
                "{key}.after_step = {after} but the turn has {steps} steps"
            ));
        }
    }
    let release = release_schema::current()?;
    let any_release = |check: &dyn Fn(&release_schema::ReleaseSchema) -> bool| {
        release_schema::all().iter().any(check)
    };
    match &step.action {
        ServerAction::Request { method, cmd, patch } => {
            if let Some((_, cause)) = MODEL_CAUSED.iter().find(|(m, _)| m == method) {
                return Err(format!(
                    "{key}: `{method}` is caused by the model: use {cause} in `steps`"
                ));
            }
            if !release.has_request(method) {
                return Err(format!(
                    "{key}: `{method}` is not a request Codex {} sends{}",
                    release.version,
                    closest(method, release.request_methods().into_iter())
                ));
            }
            if !SERVER_REQUESTS.contains(&method.as_str()) {
                return Err(format!("{key}: the fake cannot send `{method}`"));
            }
            let approves_command = matches!(
                method.as_str(),
                "item/commandExecution/requestApproval" | "execCommandApproval"
            );
            if cmd.is_some() && !approves_command {
                return Err(format!("{key}.cmd: `{method}` approves no command"));
            }
            if let Some(patch) = patch {
                if method != "applyPatchApproval" {
                    return Err(format!("{key}.patch: `{method}` approves no patch"));
                }
                crate::apply_patch::parse(patch).map_err(|e| format!("{key}.patch: {e}"))?;
            }
        }
        ServerAction::UnknownRequest { method } => {
            if any_release(&|r| r.has_request(method)) {
                return Err(format!(
                    "{key}: `{method}` is a request Codex sends; an unknown request needs a method no release has"
                ));
            }
        }
        ServerAction::UnknownNotification { method } => {
            if any_release(&|r| r.notification_methods().contains(&method.as_str())) {
                return Err(format!(
                    "{key}: `{method}` is a notification Codex sends; an unknown notification needs a method no release has"
                ));
            }
        }
        ServerAction::UnknownItem { item_type } => {
            if any_release(&|r| item_types(r).iter().any(|t| t == item_type)) {
                return Err(format!(
                    "{key}: `{item_type}` is an item type Codex has; an unknown item needs a type no release has"
                ));
            }
        }
        ServerAction::LongLine { bytes } => {
            in_range(&format!("{key}.bytes"), *bytes, 1024..=64 * MIB)?;
        }
        ServerAction::DeltaBurst { count } => {
            in_range(&format!("{key}.count"), *count, 1..=1_000_000)?;
        }
        ServerAction::StderrFlood { bytes } => {
            in_range(&format!("{key}.bytes"), *bytes, BYTES)?;
        }
        ServerAction::WaitForControl { max_ms } => {
            in_range(&format!("{key}.max_ms"), *max_ms, POSITIVE_MS)?;
            if step.after_turn {
                return Err(format!(
                    "{key}: `wait-for-control` waits inside a turn, not after it"
                ));
            }
        }
        ServerAction::Error { .. }
        | ServerAction::ForeignTurn { .. }
        | ServerAction::StrayEvents {}
        | ServerAction::EveryNotification {}
        | ServerAction::UnknownEnumValues {} => {}
    }
    Ok(())
}

/// The item `type`s of a release (`ThreadItem`'s variants).
pub(super) fn item_types(release: &release_schema::ReleaseSchema) -> Vec<String> {
    release.notifications_document()["definitions"]["ThreadItem"]["oneOf"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|branch| branch["properties"]["type"]["enum"][0].as_str())
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::scenario::{Scenario, ServerAction};
    use std::path::Path;

    fn load(text: &str) -> Result<Scenario, String> {
        Scenario::from_toml_str(text, Path::new("s.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn absurd_numbers_fail_at_load_naming_file_and_key() {
        for (text, key) in [
            ("[methods.\"thread/start\"]\ndelay_ms = 100000000000\n", "methods.\"thread/start\".delay_ms = 100000000000 is out of range"),
            ("[methods.\"thread/start\"]\noversized_bytes = 100000000000\n", "oversized_bytes = 100000000000 is out of range"),
            ("[limits]\nhang_ms = 0\n", "limits.hang_ms = 0 is out of range (1..=3600000)"),
            ("[[turns]]\nsteps = []\nfault = { kind = \"oversized-line\", bytes = 100000000000 }\n", "turns[0].fault.bytes"),
            ("[[turns]]\nsteps = []\nserver_steps = [{ step = \"long-line\", bytes = 100 }]\n", "turns[0].server_steps[0].bytes = 100 is out of range (1024..=67108864)"),
            ("[[turns]]\nsteps = []\nserver_steps = [{ step = \"delta-burst\", count = 0 }]\n", "turns[0].server_steps[0].count = 0"),
            ("[[turns]]\nsteps = [{ step = \"message\", text = \"a {filler:0}\" }]\n", "turns[0].steps[0].text: `{filler:0}`: the size must be"),
            ("[[turns]]\nsteps = [{ step = \"plan\", text = \"{filler:99999999999}\" }]\n", "turns[0].steps[0].text: `{filler:99999999999}`"),
            ("[[turns]]\nsteps = [{ step = \"message\", text = \"{filler:12\" }]\n", "turns[0].steps[0].text: `{filler:` at byte 0 has no closing"),
            ("[[turns]]\nsteps = []\nstream_drops = 6\n", "turns[0].stream_drops = 6 but Codex retries a stream at most 5 times"),
            ("app_server_log = \"trace; rm -rf\"\n", "app_server_log = \"trace; rm -rf\": each comma-separated directive"),
            ("app_server_log = \"codex_api=loud\"\n", "app_server_log = \"codex_api=loud\""),
            ("app_server_log = \"=trace\"\n", "app_server_log = \"=trace\""),
        ] {
            let err = load(text).unwrap_err();
            assert!(err.contains("s.toml"), "{err}");
            assert!(err.contains(key), "{key}: {err}");
        }
    }

    #[test]
    fn log_filters_are_levels_or_target_directives() {
        for filter in ["trace", "codex_api=trace", "info,codex_core::session=debug"] {
            let text = format!("app_server_log = \"{filter}\"\n");
            assert!(load(&text).is_ok(), "{filter}");
        }
    }

    #[test]
    fn server_steps_reject_unknown_keys_and_bad_positions() {
        let err = load(
            "[[turns]]\nsteps = []\nserver_steps = [{ step = \"stderr-flood\", bytez = 1 }]\n",
        )
        .unwrap_err();
        assert!(err.contains("bytez"), "{err}");
        assert!(err.contains("line 3"), "{err}");
        let err = load("[[turns]]\nsteps = []\nserver_steps = [{ step = \"every-notification\", after_step = 0 }]\n").unwrap_err();
        assert!(
            err.contains("turns[0].server_steps[0].after_step = 0 but the turn has 0 steps"),
            "{err}"
        );
        let err = load("[[turns]]\nsteps = [{ step = \"message\", text = \"x\" }]\nserver_steps = [{ step = \"wait-for-control\", max_ms = 5, after_turn = true }]\n").unwrap_err();
        assert!(err.contains("waits inside a turn"), "{err}");
    }

    #[test]
    fn requests_must_be_the_releases_and_unknowns_must_be_unknown() {
        let err = load("[[turns]]\nsteps = []\nserver_steps = [{ step = \"request\", method = \"item/tool/call\" }]\n").unwrap_err();
        assert!(err.contains("caused by the model"), "{err}");
        let err = load("[[turns]]\nsteps = []\nserver_steps = [{ step = \"request\", method = \"attestation/generat\" }]\n").unwrap_err();
        assert!(err.contains("did you mean `attestation/generate`"), "{err}");
        let err = load("[[turns]]\nsteps = []\nserver_steps = [{ step = \"unknown-notification\", method = \"turn/completed\" }]\n").unwrap_err();
        assert!(err.contains("needs a method no release has"), "{err}");
        let err = load("[[turns]]\nsteps = []\nserver_steps = [{ step = \"unknown-item\", item_type = \"agentMessage\" }]\n").unwrap_err();
        assert!(err.contains("needs a type no release has"), "{err}");
        let err = load("[[turns]]\nsteps = []\nserver_steps = [{ step = \"request\", method = \"attestation/generate\", cmd = \"true\" }]\n").unwrap_err();
        assert!(err.contains("approves no command"), "{err}");
        let err = load("[[turns]]\nsteps = [{ step = \"tool-call\", name = \"apply_patch\", arguments = { input = \"nope\" } }]\n").unwrap_err();
        assert!(
            err.contains("turns[0].steps[0]: `apply_patch` input"),
            "{err}"
        );
        let err = load("[methods.\"thread/start\"]\nanswer_after_turn = true\n").unwrap_err();
        assert!(err.contains("applies to `turn/start` only"), "{err}");
        let err = load("[methods.\"thread/resume\"]\nturns_shown = \"none\"\n").unwrap_err();
        assert!(err.contains("applies to `thread/read` only"), "{err}");
        let err =
            load("[methods.\"thread/read\"]\nturns_shown = \"none\"\nhang = true\n").unwrap_err();
        assert!(err.contains("turns_shown needs the real answer"), "{err}");
        let err =
            load("[methods.\"thread/resume\"]\nfork_thread = true\nhang = true\n").unwrap_err();
        assert!(err.contains("needs the real answer"), "{err}");
    }

    #[test]
    fn server_steps_round_trip_and_make_a_scenario_fake_only() {
        let scenario = Scenario::builtin("stale-request-after-turn").unwrap();
        let step = &scenario.turns[0].server_steps[0];
        assert!(step.after_turn);
        assert!(matches!(step.action, ServerAction::Request { .. }));
        let text = toml::to_string(&scenario).unwrap();
        assert_eq!(load(&text).unwrap(), scenario);
        assert!(
            scenario.fake_only().unwrap().contains("server step"),
            "{:?}",
            scenario.fake_only()
        );
        assert!(!scenario.off_schema());
        assert!(Scenario::builtin("unknown-item-type").unwrap().off_schema());
        assert_eq!(
            Scenario::builtin("command-approval").unwrap().fake_only(),
            None
        );
        assert!(Scenario::builtin("failed-turn-no-error")
            .unwrap()
            .fake_only()
            .is_some());
        assert!(Scenario::builtin("unknown-fields")
            .unwrap()
            .fake_only()
            .is_some());
    }
}
