//! A fake persona recorded from a real Codex (`fake_app_server::persona`): the lists its
//! unknown-method error and its schema give, and what it answers to the methods a driver calls
//! around its threads (`model/list`, `config/read`, `skills/list`, …) with the custom model
//! provider every cell configures. `harness drift VERSION` writes the persona folder of VERSION;
//! the protocol-list test asks the real Codex and the fake playing it the same questions.

use anyhow::{bail, Context, Result};
use codex::runner as codex_runner;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
/// The provider the cells configure; its URL is never called by these methods.
const UNUSED_MODEL_URL: &str = "http://127.0.0.1:9/v1";

/// The questions, with their parameters (`{cwd}` is the scratch workspace).
fn questions(cwd: &str) -> Vec<(&'static str, Value)> {
    vec![
        ("account/read", json!({})),
        ("collaborationMode/list", json!({})),
        ("config/read", json!({"includeLayers": true, "cwd": cwd})),
        ("model/list", json!({})),
        ("permissionProfile/list", json!({})),
        ("skills/list", json!({"cwds": [cwd]})),
    ]
}

/// `program ARGS… app-server` with the cells' provider, in a fresh home, CODEX_HOME, workspace
/// and TMPDIR under `scratch`; with the placeholders of those folders (CODEX_HOME, home,
/// workspace: most specific first).
fn scratch_command(
    program: &Path,
    leading_args: &[&str],
    scratch: &Path,
    model_url: &str,
) -> Result<(Command, [(String, &'static str); 3])> {
    let home = scratch.join("home");
    let codex_home = home.join(".codex");
    let (cwd, tmp) = (scratch.join("ws"), scratch.join("tmp"));
    for dir in [&codex_home, &cwd, &tmp] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut command = Command::new(program);
    command
        .args(leading_args)
        .args(codex_runner::provider_args(model_url))
        .env_clear()
        .envs(codex_runner::allowlisted_env(&home, &codex_home, &tmp))
        .current_dir(&cwd);
    let aliases = [
        (codex_home.display().to_string(), "{codex_home}"),
        (home.display().to_string(), "{home}"),
        (cwd.display().to_string(), "{cwd}"),
    ];
    Ok((command, aliases))
}

/// `program app-server` in fresh folders under `scratch`, as [`settings_answers`] asks it.
pub(super) fn scratch_command_for(
    program: &Path,
    scratch: &Path,
) -> Result<(Command, [(String, &'static str); 3])> {
    scratch_command(program, &["app-server"], scratch, UNUSED_MODEL_URL)
}

/// Method → result (or `{"error": …}`) of `program ARGS… app-server` answering [`questions`],
/// with the scratch folders written `{cwd}`, `{codex_home}` and `{home}`.
pub fn settings_answers(
    program: &Path,
    leading_args: &[&str],
    scratch: &Path,
) -> Result<BTreeMap<String, Value>> {
    let (command, aliases) = scratch_command(program, leading_args, scratch, UNUSED_MODEL_URL)?;
    let cwd_text = aliases[2].0.clone();
    let asked = questions(&cwd_text);
    let responses = super::ask::ask(command, &asked)?;
    let mut answers = BTreeMap::new();
    for ((method, _), message) in asked.iter().zip(responses) {
        let answer = match message.get("result") {
            Some(result) => result.clone(),
            None => json!({"error": message["error"]}),
        };
        answers.insert(method.to_string(), answer);
    }
    for answer in answers.values_mut() {
        replace_paths(answer, &aliases);
    }
    Ok(answers)
}

/// The `serviceTier` values a `thread/start` asks with, besides none: JSON `null` (which
/// Codex 0.169 answers `"default"`), the tiers a catalogue entry or the config names, and one
/// no catalogue entry of a custom provider offers.
const SERVICE_TIERS_ASKED: &[&str] = &[
    "null",
    r#""default""#,
    r#""flex""#,
    r#""priority""#,
    r#""fast""#,
];

/// What the release answers to the requests that make and run a thread, recorded for the fake
/// to build its answers from (`thread_answers.json`): `thread/start` (with the cells' provider
/// and only `cwd` given), `turn/start` and `thread/resume` of that thread (after the turn's
/// user message is recorded), each answer's paths written as placeholders, and `serviceTier`:
/// what `thread/start` answers in `serviceTier` for each value it is asked with (`asked`
/// absent: asked with none).
pub(crate) fn thread_answers(
    program: &Path,
    leading_args: &[&str],
    scratch: &Path,
) -> Result<Value> {
    use super::ask::Step;
    let (command, aliases) = scratch_command(program, leading_args, scratch, UNUSED_MODEL_URL)?;
    let cwd_text = aliases[2].0.clone();
    let mut steps: Vec<Step> = SERVICE_TIERS_ASKED
        .iter()
        .map(|tier| {
            let tier: Value = serde_json::from_str(tier).expect("the asked tiers are JSON");
            Step::Request(
                "thread/start",
                json!({"cwd": cwd_text, "serviceTier": tier}),
            )
        })
        .collect();
    steps.extend([
        Step::Request("thread/start", json!({"cwd": cwd_text})),
        Step::Request(
            "turn/start",
            json!({"threadId": "{thread_id}", "input": [{"type": "text", "text": "recording"}]}),
        ),
        Step::Notification("item/completed"),
        Step::Request("thread/resume", json!({"threadId": "{thread_id}"})),
    ]);
    let answers = super::ask::converse(command, &steps, true)?.answers;
    let result = |index: usize, method: &str| -> Result<Value> {
        answers[index]
            .get("result")
            .cloned()
            .with_context(|| format!("{method} answered {}", answers[index]))
    };
    let tiers = SERVICE_TIERS_ASKED.len();
    let mut service_tier: Vec<Value> = SERVICE_TIERS_ASKED
        .iter()
        .enumerate()
        .map(|(index, asked)| {
            let asked: Value = serde_json::from_str(asked).expect("the asked tiers are JSON");
            Ok(json!({"asked": asked, "answered": result(index, "thread/start")?["serviceTier"]}))
        })
        .collect::<Result<_>>()?;
    let start = result(tiers, "thread/start")?;
    service_tier.push(json!({"answered": start["serviceTier"]}));
    let mut recorded = json!({
        "thread/start": start,
        "turn/start": result(tiers + 1, "turn/start")?,
        "thread/resume": result(tiers + 2, "thread/resume")?,
        "serviceTier": service_tier,
    });
    replace_paths(&mut recorded, &aliases);
    Ok(recorded)
}

/// The notifications the release sends only to a client that declared
/// `capabilities.experimentalApi`: one plain turn (the `healthy` scenario on the mock
/// model API) played twice, with and without it, and the methods heard only the first time.
/// Measured, not read from the schema: `generate-json-schema` lists the same notifications
/// with and without `--experimental` (0.169: `thread/readState/changed` among them).
pub(crate) fn experimental_notifications(
    program: &Path,
    scratch: &Path,
) -> Result<BTreeSet<String>> {
    use super::ask::Step;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the mock model API's runtime")?;
    let scenario = fake_app_server::scenario::Scenario::builtin("healthy")
        .map_err(|e| anyhow::anyhow!("the healthy scenario: {e}"))?;
    let mut heard: Vec<BTreeSet<String>> = Vec::new();
    for experimental_api in [true, false] {
        let folder = scratch.join(format!("experimental-{experimental_api}"));
        std::fs::create_dir_all(&folder)
            .with_context(|| format!("creating {}", folder.display()))?;
        let script = codex::mock_api::MockScript::from_scenario(&scenario)
            .map_err(|e| anyhow::anyhow!("the healthy scenario: {e:?}"))?;
        let mock = runtime.block_on(codex::mock_api::MockModelApi::start_with(
            codex::mock_api::MockConfig {
                script,
                model_log: folder.join("model-log.jsonl"),
                request_log: None,
            },
        ))?;
        let (command, aliases) =
            scratch_command(program, &["app-server"], &folder, &mock.base_url())?;
        let steps = [
            Step::Request("thread/start", json!({"cwd": aliases[2].0})),
            Step::Request(
                "turn/start",
                json!({"threadId": "{thread_id}", "input": [{"type": "text", "text": scenario.name}]}),
            ),
            Step::Notification("turn/completed"),
        ];
        let conversation = super::ask::converse(command, &steps, experimental_api);
        runtime.block_on(mock.shutdown());
        heard.push(conversation?.notifications.into_iter().collect());
    }
    Ok(heard[0].difference(&heard[1]).cloned().collect())
}

fn replace_paths(value: &mut Value, aliases: &[(String, &str)]) {
    match value {
        Value::String(text) => {
            for (path, placeholder) in aliases {
                *text = text.replace(path.as_str(), placeholder);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| replace_paths(v, aliases)),
        Value::Object(map) => map.values_mut().for_each(|v| replace_paths(v, aliases)),
        _ => {}
    }
}

/// The five files of a persona folder.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recording {
    pub(crate) client_methods: Vec<String>,
    pub(crate) server_notifications: BTreeSet<String>,
    pub(crate) model_catalog: Value,
    pub(crate) config_defaults: Value,
    pub(crate) system_skills: Value,
    /// The files recorded by running the release (not from its answers around threads).
    pub(crate) recorded: Recorded,
}

/// What [`record`] takes as recorded: [`thread_answers`], [`experimental_notifications`] and
/// [`super::features::feature_aliases`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Recorded {
    pub(crate) thread_answers: Value,
    pub(crate) experimental_notifications: BTreeSet<String>,
    pub(crate) feature_aliases: BTreeSet<String>,
    /// `experimental_gate.txt` (`crate::drift::experimental`).
    pub(crate) experimental_gate: Vec<String>,
}

/// The persona of a Codex, from what `harness drift` already learnt of it: the methods its
/// unknown-method error lists, the notifications of its schema, and its [`settings_answers`].
pub(crate) fn record(
    client_methods: Vec<String>,
    server_notifications: BTreeSet<String>,
    answers: &BTreeMap<String, Value>,
    recorded: Recorded,
) -> Result<Recording> {
    let (model_catalog, config_defaults, system_skills) = from_answers(answers)?;
    Ok(Recording {
        client_methods,
        server_notifications,
        model_catalog,
        config_defaults,
        system_skills,
        recorded,
    })
}

/// What the fake serves from data, out of the real answers: the catalogue, the config values no
/// layer set (`config`, and `custom_provider`: what Codex fills into a declared provider), and
/// the system skills.
pub(crate) fn from_answers(answers: &BTreeMap<String, Value>) -> Result<(Value, Value, Value)> {
    let catalog = answers["model/list"]["data"].clone();
    if !catalog.is_array() {
        bail!(
            "model/list answered no `data` list: {}",
            answers["model/list"]
        );
    }
    let Some(Value::Object(effective)) = answers["config/read"].get("config").cloned() else {
        bail!(
            "config/read answered no `config`: {}",
            answers["config/read"]
        );
    };
    let mut config = effective.clone();
    // What the session flags set (`codex_runner::provider_args`).
    for key in ["model", "model_provider", "model_providers"] {
        config.remove(key);
    }
    let Some(Value::Object(mut provider)) = effective
        .get("model_providers")
        .and_then(|p| p.get(codex_runner::PROVIDER_ID))
        .cloned()
    else {
        bail!(
            "config/read lists no `model_providers.{}`",
            codex_runner::PROVIDER_ID
        );
    };
    for key in [
        "name",
        "base_url",
        "wire_api",
        "request_max_retries",
        "stream_max_retries",
    ] {
        provider.remove(key);
    }
    let skills: Vec<Value> = answers["skills/list"]["data"][0]["skills"]
        .as_array()
        .context("skills/list answered no skills for the workspace")?
        .iter()
        .filter(|s| s["scope"] == "system")
        .cloned()
        .collect();
    Ok((
        catalog,
        json!({"config": config, "custom_provider": provider}),
        Value::Array(skills),
    ))
}

impl Recording {
    /// Write the persona folder (`fake-app-server/personas/VERSION/` once copied).
    pub(crate) fn write(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let lines = |items: &mut dyn Iterator<Item = &String>| -> String {
            items.map(|m| format!("{m}\n")).collect()
        };
        let json = |value: &Value| -> Result<String> {
            Ok(format!("{}\n", serde_json::to_string_pretty(value)?))
        };
        let files = [
            ("client_methods.txt", lines(&mut self.client_methods.iter())),
            (
                "server_notifications.txt",
                lines(&mut self.server_notifications.iter()),
            ),
            ("model_catalog.json", json(&self.model_catalog)?),
            ("config_defaults.json", json(&self.config_defaults)?),
            ("system_skills.json", json(&self.system_skills)?),
            ("thread_answers.json", json(&self.recorded.thread_answers)?),
            (
                "experimental_notifications.txt",
                lines(&mut self.recorded.experimental_notifications.iter()),
            ),
            (
                "feature_aliases.txt",
                lines(&mut self.recorded.feature_aliases.iter()),
            ),
            (
                "experimental_gate.txt",
                lines(&mut self.recorded.experimental_gate.iter()),
            ),
        ];
        for (name, text) in files {
            let path = dir.join(name);
            std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(())
    }
}

/// Where the fake's persona differs from a recording of its release (empty: nowhere).
pub(crate) fn differences(
    fake: &fake_app_server::persona::Persona,
    recording: &Recording,
) -> Vec<String> {
    let mut out = Vec::new();
    let methods: Vec<String> = fake.client_methods().map(str::to_string).collect();
    if methods != recording.client_methods {
        out.push("client_methods.txt".to_string());
    }
    let notifications: BTreeSet<String> = fake.server_notifications().map(str::to_string).collect();
    if notifications != recording.server_notifications {
        out.push("server_notifications.txt".to_string());
    }
    if fake.model_catalog()
        != recording
            .model_catalog
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or(&[])
    {
        out.push("model_catalog.json".to_string());
    }
    if fake.config_defaults() != &recording.config_defaults {
        out.push("config_defaults.json".to_string());
    }
    if fake.system_skills() != &recording.system_skills {
        out.push("system_skills.json".to_string());
    }
    // Ids and times differ from recording to recording: the shape and the tier table compare.
    let shape = |answers: &Value| {
        let mut answers = answers.clone();
        blank_leaves(&mut answers, &["serviceTier"]);
        answers
    };
    if shape(fake.thread_answers()) != shape(&recording.recorded.thread_answers) {
        out.push("thread_answers.json".to_string());
    }
    let experimental: BTreeSet<String> = fake
        .experimental_notifications()
        .map(str::to_string)
        .collect();
    if experimental != recording.recorded.experimental_notifications {
        out.push("experimental_notifications.txt".to_string());
    }
    let aliases: BTreeSet<String> = fake.feature_aliases().map(str::to_string).collect();
    if aliases != recording.recorded.feature_aliases {
        out.push("feature_aliases.txt".to_string());
    }
    let gate: Vec<String> = fake.experimental_gate().map(str::to_string).collect();
    if gate != recording.recorded.experimental_gate {
        out.push("experimental_gate.txt".to_string());
    }
    out
}

/// `value` with every string and number replaced by its type (`<string>`, `<number>`), but
/// under the keys of `kept`: what stays the same from one recording to the next.
fn blank_leaves(value: &mut Value, kept: &[&str]) {
    match value {
        Value::String(_) => *value = Value::String("<string>".into()),
        Value::Number(_) => *value = Value::String("<number>".into()),
        Value::Array(items) => items.iter_mut().for_each(|v| blank_leaves(v, kept)),
        Value::Object(map) => {
            for (key, item) in map.iter_mut() {
                if !kept.contains(&key.as_str()) {
                    blank_leaves(item, kept);
                }
            }
        }
        _ => {}
    }
}

/// Each method whose answers differ between two sets, with the first differing path.
pub fn answer_changes(pin: &BTreeMap<String, Value>, new: &BTreeMap<String, Value>) -> Vec<String> {
    let methods: BTreeSet<&String> = pin.keys().chain(new.keys()).collect();
    methods
        .into_iter()
        .filter_map(|method| {
            let (a, b) = (&pin.get(method), &new.get(method));
            (a != b).then(|| match (a, b) {
                (Some(a), Some(b)) => {
                    format!("`{method}` answers differently: {}", first_path(a, b, ""))
                }
                _ => format!("`{method}` answered by one side only"),
            })
        })
        .collect()
}

fn first_path(a: &Value, b: &Value, path: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let next = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) if p == q => continue,
                    (Some(p), Some(q)) => return first_path(p, q, &next),
                    (None, _) => return format!("+ `{next}`"),
                    (_, None) => return format!("- `{next}`"),
                }
            }
            format!("`{path}`")
        }
        (Value::Array(x), Value::Array(y)) if x.len() != y.len() => {
            format!("`{path}`: {} → {} entries", x.len(), y.len())
        }
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .position(|(p, q)| p != q)
            .map(|i| first_path(&x[i], &y[i], &format!("{path}[{i}]")))
            .unwrap_or_else(|| format!("`{path}`")),
        _ => format!(
            "`{path}`: {} → {}",
            driver::rpc::excerpt(&a.to_string(), 80),
            driver::rpc::excerpt(&b.to_string(), 80)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recording_keeps_what_no_layer_set() {
        let answers: BTreeMap<String, Value> = [
            ("model/list".to_string(), json!({"data": [{"id": "m", "isDefault": true}]})),
            (
                "config/read".to_string(),
                json!({"config": {"model": "mock-model", "model_provider": "mock", "web_search": null,
                    "model_providers": {"mock": {"name": "mock", "base_url": "u", "wire_api": "responses",
                    "request_max_retries": 0, "stream_max_retries": 0, "env_key": null}}}}),
            ),
            (
                "skills/list".to_string(),
                json!({"data": [{"skills": [{"name": "a", "scope": "system"}, {"name": "b", "scope": "user"}]}]}),
            ),
        ]
        .into();
        let (catalog, defaults, skills) = from_answers(&answers).unwrap();
        assert_eq!(catalog, json!([{"id": "m", "isDefault": true}]));
        assert_eq!(
            defaults,
            json!({"config": {"web_search": null}, "custom_provider": {"env_key": null}})
        );
        assert_eq!(skills, json!([{"name": "a", "scope": "system"}]));
    }

    #[test]
    fn changes_name_the_first_differing_path() {
        let pin: BTreeMap<String, Value> =
            [("config/read".to_string(), json!({"config": {"a": 1}}))].into();
        let new: BTreeMap<String, Value> = [(
            "config/read".to_string(),
            json!({"config": {"a": 1, "b": null}}),
        )]
        .into();
        assert_eq!(
            answer_changes(&pin, &new),
            ["`config/read` answers differently: + `config.b`"]
        );
    }
}
