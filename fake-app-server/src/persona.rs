//! Which Codex release the fake plays. A persona is what a driver can see of one release: its
//! version (`--version`, `initialize`'s user agent, a thread's `cliVersion`), the client methods
//! its unknown-method error lists, the notifications it can send, its bundled model catalogue,
//! its effective-config defaults, its system skills, its command line (`crate::cli`), and how it
//! makes a plan item's id.
//!
//! Each persona's data lives in `fake-app-server/personas/VERSION/` (the files are listed, with
//! how each is recorded, in `personas/README.md`), recorded from that real Codex, most of it by
//! `harness drift VERSION` (which writes the folder to copy), and checked against it at
//! test time (`codex_protocol_lists` and `fake_schema_fidelity` in
//! `harness/tests/needs_root_runc_codex/`).
//! A new Codex release is one folder and one row of [`PERSONAS`].
//!
//! The persona is chosen once per process, at start-up (`--codex-version`), like the real
//! binary's version: it is process-wide so that every shape the fake builds reads the same one.

use serde_json::Value;
use std::collections::HashSet;
use std::sync::OnceLock;

/// The marker of a gated plain boolean in `experimental_gate.txt` (see
/// [`Persona::experimental_gate`]).
pub const IF_TRUE: &str = "if-true";

/// The Codex the fake plays unless told otherwise: the harness's pin.
pub const DEFAULT_VERSION: &str = "0.169.0";

/// How a release makes the id of a plan item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlanItemIds {
    /// `<turnId>-plan` (0.169 and earlier).
    TurnSuffix,
    /// A fresh UUIDv7 of its own (0.171).
    Uuid,
}

pub struct Persona {
    pub version: &'static str,
    pub plan_item_ids: PlanItemIds,
    client_methods: &'static str,
    server_notifications: &'static str,
    model_catalog: &'static str,
    config_defaults: &'static str,
    system_skills: &'static str,
    collaboration_modes: &'static str,
    cli_help: &'static str,
    cli_rules: &'static str,
    features: &'static str,
    startup_config: &'static str,
    static_answers: &'static str,
    thread_answers: &'static str,
    experimental_notifications: &'static str,
    feature_aliases: &'static str,
    experimental_gate: &'static str,
    unimplemented: &'static str,
    parsed: OnceLock<Parsed>,
}

struct Parsed {
    client_methods: HashSet<&'static str>,
    model_catalog: Vec<Value>,
    config_defaults: Value,
    system_skills: Value,
    collaboration_modes: Value,
    static_answers: Value,
    thread_answers: Value,
    unimplemented: std::collections::BTreeMap<String, String>,
}

macro_rules! persona {
    ($version:literal, $plan:expr) => {
        Persona {
            version: $version,
            plan_item_ids: $plan,
            client_methods: include_str!(concat!("../personas/", $version, "/client_methods.txt")),
            server_notifications: include_str!(concat!(
                "../personas/",
                $version,
                "/server_notifications.txt"
            )),
            model_catalog: include_str!(concat!("../personas/", $version, "/model_catalog.json")),
            config_defaults: include_str!(concat!(
                "../personas/",
                $version,
                "/config_defaults.json"
            )),
            system_skills: include_str!(concat!("../personas/", $version, "/system_skills.json")),
            collaboration_modes: include_str!(concat!(
                "../personas/",
                $version,
                "/collaboration_modes.json"
            )),
            cli_help: include_str!(concat!("../personas/", $version, "/cli_help.txt")),
            cli_rules: include_str!(concat!("../personas/", $version, "/cli_rules.toml")),
            features: include_str!(concat!("../personas/", $version, "/features.txt")),
            startup_config: include_str!(concat!("../personas/", $version, "/startup_config.json")),
            static_answers: include_str!(concat!("../personas/", $version, "/static_answers.json")),
            thread_answers: include_str!(concat!("../personas/", $version, "/thread_answers.json")),
            experimental_notifications: include_str!(concat!(
                "../personas/",
                $version,
                "/experimental_notifications.txt"
            )),
            feature_aliases: include_str!(concat!(
                "../personas/",
                $version,
                "/feature_aliases.txt"
            )),
            experimental_gate: include_str!(concat!(
                "../personas/",
                $version,
                "/experimental_gate.txt"
            )),
            unimplemented: include_str!(concat!("../personas/", $version, "/unimplemented.toml")),
            parsed: OnceLock::new(),
        }
    };
}

static PERSONAS: [Persona; 2] = [
    persona!("0.169.0", PlanItemIds::TurnSuffix),
    persona!("0.171.0", PlanItemIds::Uuid),
];

static CURRENT: OnceLock<&'static Persona> = OnceLock::new();

/// Every persona, oldest first.
pub fn all() -> &'static [Persona] {
    &PERSONAS
}

/// The persona of `version`, or an error naming the ones there are.
pub fn find(version: &str) -> Result<&'static Persona, String> {
    PERSONAS
        .iter()
        .find(|p| p.version == version)
        .ok_or_else(|| {
            format!(
                "fake-app-server has no persona for Codex {version}; it plays {} (`harness drift {version}` records one)",
                versions().join(", ")
            )
        })
}

pub fn versions() -> Vec<&'static str> {
    PERSONAS.iter().map(|p| p.version).collect()
}

/// Play `version` in this process from now on. Choosing a second, different persona is an error.
pub fn select(version: &str) -> Result<&'static Persona, String> {
    let wanted = find(version)?;
    let chosen = *CURRENT.get_or_init(|| wanted);
    if chosen.version == wanted.version {
        Ok(chosen)
    } else {
        Err(format!(
            "this process already plays Codex {}; cannot switch to {version}",
            chosen.version
        ))
    }
}

/// The persona this process plays (the default until [`select`] chose one).
pub fn current() -> &'static Persona {
    CURRENT
        .get()
        .copied()
        .unwrap_or_else(|| find(DEFAULT_VERSION).expect("the default persona is in the table"))
}

impl Persona {
    fn parsed(&self) -> &Parsed {
        self.parsed.get_or_init(|| {
            let json = |text: &str, what: &str| -> Value {
                serde_json::from_str(text)
                    .unwrap_or_else(|e| panic!("personas/{}/{what} is not JSON: {e}", self.version))
            };
            Parsed {
                client_methods: self.client_methods().collect(),
                model_catalog: match json(self.model_catalog, "model_catalog.json") {
                    Value::Array(entries) => entries,
                    _ => panic!("personas/{}/model_catalog.json is no array", self.version),
                },
                config_defaults: json(self.config_defaults, "config_defaults.json"),
                system_skills: json(self.system_skills, "system_skills.json"),
                collaboration_modes: json(self.collaboration_modes, "collaboration_modes.json"),
                static_answers: json(self.static_answers, "static_answers.json"),
                thread_answers: json(self.thread_answers, "thread_answers.json"),
                unimplemented: toml::from_str(self.unimplemented).unwrap_or_else(|e| {
                    panic!("personas/{}/unimplemented.toml: {e}", self.version)
                }),
            }
        })
    }

    /// Every client method, in the order the unknown-method error lists them.
    pub fn client_methods(&self) -> impl Iterator<Item = &'static str> {
        self.client_methods.lines().filter(|l| !l.is_empty())
    }

    pub fn is_client_method(&self, method: &str) -> bool {
        self.parsed().client_methods.contains(method)
    }

    /// Every notification this release can send (its generated `ServerNotification.json`).
    pub fn server_notifications(&self) -> impl Iterator<Item = &'static str> {
        self.server_notifications.lines().filter(|l| !l.is_empty())
    }

    pub fn is_server_notification(&self, method: &str) -> bool {
        self.server_notifications().any(|m| m == method)
    }

    /// `model/list`'s entries with a custom model provider: the bundled catalogue, in order.
    pub fn model_catalog(&self) -> &[Value] {
        &self.parsed().model_catalog
    }

    /// The catalogue's default (`isDefault`), used when none is configured.
    pub fn default_model(&self) -> &str {
        self.model_catalog()
            .iter()
            .find(|m| m["isDefault"] == true)
            .and_then(|m| m["id"].as_str())
            .unwrap_or_else(|| {
                panic!(
                    "personas/{}/model_catalog.json has no default model",
                    self.version
                )
            })
    }

    /// `config/read`'s values no layer set: `{config, custom_provider}`.
    pub fn config_defaults(&self) -> &Value {
        &self.parsed().config_defaults
    }

    /// `skills/list`'s system skills, `{codex_home}` standing for CODEX_HOME.
    pub fn system_skills(&self) -> &Value {
        &self.parsed().system_skills
    }

    /// `codex --help`, `codex app-server --help` and each app-server subcommand's, verbatim, as
    /// `crate::cli::help` reads them.
    pub fn cli_help_text(&self) -> &'static str {
        self.cli_help
    }

    /// What the command line does that its help does not say (`crate::cli::rules`).
    pub fn cli_rules_text(&self) -> &'static str {
        self.cli_rules
    }

    /// Whether `--enable NAME` / `--disable NAME` names a feature of this release (`codex
    /// features list`, any stage, removed ones included) or one of its legacy names
    /// (`feature_aliases.txt`).
    pub fn is_feature(&self, name: &str) -> bool {
        self.listed_features()
            .chain(self.feature_aliases())
            .any(|feature| feature == name)
    }

    /// The feature names `codex features list` prints.
    pub fn listed_features(&self) -> impl Iterator<Item = &'static str> {
        self.features
            .lines()
            .filter_map(|line| line.split_whitespace().next())
    }

    /// The legacy feature names the release accepts besides those `codex features list`
    /// lists (`feature_aliases.txt`, found in the binary by `harness drift`).
    pub fn feature_aliases(&self) -> impl Iterator<Item = &'static str> {
        self.feature_aliases.lines().filter(|l| !l.is_empty())
    }

    /// Whether feature `name` is on when no configuration sets it (`codex features list`'s last
    /// column); an unknown feature is off.
    pub fn feature_default(&self, name: &str) -> bool {
        self.features.lines().any(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            words.first() == Some(&name) && words.last() == Some(&"true")
        })
    }

    /// Whether `name` is a feature of this release that `codex features list` says is under
    /// development (those Codex warns about when a configuration enables them).
    pub fn is_under_development(&self, name: &str) -> bool {
        self.features.lines().any(|line| {
            let mut words = line.split_whitespace();
            words.next() == Some(name)
                && words.next() == Some("under")
                && words.next() == Some("development")
        })
    }

    /// The release's recorded answer to `method` where it does not depend on the fake's state
    /// (`static_answers.json`: `{params, result | error, before?, after?}`, the notifications
    /// it sent before and after answering).
    pub fn static_answer(&self, method: &str) -> Option<&Value> {
        self.parsed().static_answers.get(method)
    }

    /// Why the fake does not implement `method` (`unimplemented.toml`), if it is listed.
    pub fn unimplemented_reason(&self, method: &str) -> Option<&str> {
        self.parsed().unimplemented.get(method).map(String::as_str)
    }

    /// Every method `unimplemented.toml` lists.
    pub fn unimplemented(&self) -> impl Iterator<Item = &str> {
        self.parsed().unimplemented.keys().map(String::as_str)
    }

    /// Every method `static_answers.json` answers.
    pub fn static_answers(&self) -> impl Iterator<Item = &str> {
        self.parsed()
            .static_answers
            .as_object()
            .into_iter()
            .flat_map(|answers| answers.keys().map(String::as_str))
    }

    /// The release's recorded answers to the requests that make and run a thread
    /// (`thread_answers.json`, recorded by `harness drift`): `thread/start`, `turn/start` and
    /// `thread/resume` results, and the `serviceTier` table.
    pub fn thread_answers(&self) -> &Value {
        &self.parsed().thread_answers
    }

    /// The notifications the release sends only to a client that declared
    /// `capabilities.experimentalApi` at `initialize` (`experimental_notifications.txt`,
    /// measured by `harness drift`: the schema lists them with and without `--experimental`).
    pub fn experimental_notifications(&self) -> impl Iterator<Item = &'static str> {
        self.experimental_notifications
            .lines()
            .filter(|l| !l.is_empty())
    }

    /// What the release refuses a client that did not declare `capabilities.experimentalApi`
    /// (`experimental_gate.txt`, recorded by `harness drift` from the schema's experimental
    /// markers): `METHOD` for a method, `METHOD FIELD` for a request field, the fields of a
    /// method in the order the release checks them; `METHOD FIELD if-true` for a plain (not
    /// nullable) boolean, which counts as set only when `true`.
    pub fn experimental_gate(&self) -> impl Iterator<Item = &'static str> {
        self.experimental_gate.lines().filter(|l| !l.is_empty())
    }

    /// Why the release refuses `method` with `params` to a client without the experimental
    /// API: the method, or its first gated field that is set, as Codex words it
    /// (`thread/start.multiAgentMode requires experimentalApi capability`); `None` when it
    /// does not. Set (measured with 0.169 and `harness explore`): any value but `null`, even
    /// `false` (`daybreakEnabled`), `[]` or `{}`; a plain boolean (`experimentalRawEvents`)
    /// only `true`.
    pub fn experimental_refusal(&self, method: &str, params: Option<&Value>) -> Option<String> {
        let set = |field: &str, only_true: bool| {
            params.and_then(|p| p.get(field)).is_some_and(|v| {
                if only_true {
                    *v == Value::Bool(true)
                } else {
                    !v.is_null()
                }
            })
        };
        self.experimental_gate().find_map(|line| {
            let mut words = line.split(' ');
            let gated = words.next()?;
            match (words.next(), words.next()) {
                (None, _) if gated == method => {
                    Some(format!("{method} requires experimentalApi capability"))
                }
                (Some(field), marker) if gated == method && set(field, marker == Some(IF_TRUE)) => {
                    Some(format!(
                        "{method}.{field} requires experimentalApi capability"
                    ))
                }
                _ => None,
            }
        })
    }

    pub fn is_experimental_notification(&self, method: &str) -> bool {
        self.experimental_notifications().any(|m| m == method)
    }

    /// The recorded result of `method` (`thread/start`, `turn/start`, `thread/resume`): the
    /// shape and the default values of the fake's own answer.
    pub fn answer_template(&self, method: &str) -> &Value {
        &self.thread_answers()[method]
    }

    /// What `thread/start` answers in `serviceTier` when asked with `asked` (`None`: the
    /// request had no `serviceTier`), as recorded; a value never recorded is answered as a
    /// request without one.
    pub fn service_tier_answer(&self, asked: Option<&Value>) -> Value {
        let table = self.thread_answers()["serviceTier"].as_array();
        let entry = |asked: Option<&Value>| {
            table
                .into_iter()
                .flatten()
                .find(|entry| entry.get("asked") == asked)
                .map(|entry| entry["answered"].clone())
        };
        entry(asked).or_else(|| entry(None)).unwrap_or(Value::Null)
    }

    /// `codex app-server --print-startup-config`'s output, verbatim.
    pub fn startup_config(&self) -> &'static str {
        self.startup_config
    }

    /// The developer instructions the release fills in for a collaboration mode (`plan`,
    /// `default`) sent without its own, as `thread/settings/updated` reports them.
    pub fn collaboration_mode_instructions(&self, mode: &str) -> Option<&str> {
        self.parsed().collaboration_modes[mode].as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_persona_parses_and_the_default_is_one() {
        assert!(find(DEFAULT_VERSION).is_ok());
        for persona in all() {
            assert!(
                persona.client_methods().count() > 100,
                "{}",
                persona.version
            );
            assert!(persona.is_client_method("thread/start"));
            assert!(persona.is_server_notification("turn/completed"));
            assert!(!persona.model_catalog().is_empty());
            assert!(persona.config_defaults()["config"].is_object());
            assert!(persona.config_defaults()["custom_provider"].is_object());
            assert!(persona.system_skills().is_array());
            assert!(persona.is_feature("goals") && !persona.is_feature("no_such_feature"));
            assert!(persona.startup_config().contains(persona.version));
            for mode in ["plan", "default"] {
                assert!(
                    persona.collaboration_mode_instructions(mode).is_some(),
                    "{} {mode}",
                    persona.version
                );
            }
        }
    }

    #[test]
    fn an_unknown_version_names_the_ones_there_are() {
        let err = find("0.170.0").err().unwrap();
        assert!(err.contains("no persona for Codex 0.170.0"), "{err}");
        assert!(err.contains("0.169.0, 0.171.0"), "{err}");
    }

    #[test]
    fn the_releases_differ_where_drivers_can_see_it() {
        let (old, new) = (find("0.169.0").unwrap(), find("0.171.0").unwrap());
        assert!(!old.is_client_method("thread/search/stream"));
        assert!(new.is_client_method("thread/search/stream"));
        assert!(new.is_server_notification("thread/search/partial"));
        assert_eq!(old.plan_item_ids, PlanItemIds::TurnSuffix);
        assert_eq!(new.plan_item_ids, PlanItemIds::Uuid);
        assert_eq!(old.default_model(), "gpt-6.1-sol");
        assert_eq!(new.default_model(), "gpt-6.2-sol");
    }
}
