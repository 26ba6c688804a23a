//! What a release's command line does that its `--help` does not say, recorded in
//! `personas/VERSION/cli_rules.toml` (measured with the real binary): which options may repeat,
//! which need another one, and which it parses but then refuses before serving.

use serde::Deserialize;
use std::collections::BTreeMap;

/// Command path (`codex`, `codex app-server`, …) → its rules.
pub type Rules = BTreeMap<String, CommandRules>;

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRules {
    /// Options that are one option at every level of the command line (clap's global
    /// options): given after a subcommand, their values replace those given before it.
    #[serde(default)]
    pub global: Vec<String>,
    /// Options that may be given more than once (clap refuses a repeat of any other).
    #[serde(default)]
    pub repeatable: Vec<String>,
    /// Option → the option it is accepted only with (clap's `requires`).
    #[serde(default)]
    pub requires: BTreeMap<String, String>,
    /// Options refused before serving, in the order Codex checks them.
    #[serde(default)]
    pub refuses: Vec<Refusal>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    pub option: String,
    /// Refused only with this value.
    #[serde(default)]
    pub value: Option<String>,
    /// Not refused when one of these options is given too.
    #[serde(default)]
    pub unless: Vec<String>,
    /// `Error: MESSAGE`, exit 1; `{value}` stands for the option's value.
    pub message: String,
}

impl Refusal {
    /// Whether the refusal applies to `value` of its option, with `given` telling which other
    /// options the command line has.
    pub fn applies(&self, value: &str, given: impl Fn(&str) -> bool) -> bool {
        self.value.as_deref().is_none_or(|v| v == value) && !self.unless.iter().any(|u| given(u))
    }
}

pub fn parse(text: &str) -> Result<Rules, String> {
    toml::from_str(text).map_err(|e| format!("cli_rules.toml: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rule names a command and options its recorded help has: a rule about an option
    /// the release no longer lists is stale data.
    #[test]
    fn every_personas_rules_name_recorded_commands_and_options() {
        for persona in crate::persona::all() {
            let rules = parse(persona.cli_rules_text()).unwrap();
            let help = super::super::help::parse_recording(persona.cli_help_text()).unwrap();
            for (command, rules) in &rules {
                let surface = help
                    .get(command)
                    .unwrap_or_else(|| panic!("{}: no help for `{command}`", persona.version));
                let named = rules
                    .repeatable
                    .iter()
                    .chain(&rules.global)
                    .chain(rules.requires.keys())
                    .chain(rules.requires.values())
                    .chain(rules.refuses.iter().map(|r| &r.option))
                    .chain(rules.refuses.iter().flat_map(|r| &r.unless));
                for option in named {
                    assert!(
                        surface.option(option).is_some(),
                        "{}: `{command}` has no `--{option}`",
                        persona.version
                    );
                }
            }
        }
    }
}
