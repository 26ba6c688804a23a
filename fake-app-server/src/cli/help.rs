//! The one parser of a release's recorded `--help` texts (`personas/VERSION/cli_help.txt`): what
//! the fake's command line accepts is derived from them, so a new release is new data.
//!
//! The recording holds one section per command, each the command's `--help` output verbatim,
//! headed by a line `==> codex ARGS --help <==`. A help text is clap's long help:
//!
//! ```text
//! Usage: codex app-server [OPTIONS] [COMMAND]        (more usage lines indented by 7 spaces)
//!
//! Commands:
//!   daemon                Manage …  [aliases: d]     (2 spaces, the name; wrapped text deeper)
//! Arguments:
//!   [PROMPT]                                         (`<X>` required, `[X]` optional)
//! Options:
//!   -c, --config <key=value>                         (2 spaces with a short, 6 without)
//!           Override …                               (10 spaces: the description)
//!           [possible values: read-only, …]  [default: stdio://]
//!           Possible values:                         (or one value a line, with its help)
//!           - on-request: The model decides …
//! ```
//!
//! Hand-written rather than a crate: no crate reads clap's rendered help back, and the format
//! is small and stable (clap 4's long help).

use std::collections::BTreeMap;

/// One option as a help text lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionSpec {
    pub short: Option<char>,
    /// Without its dashes.
    pub long: String,
    /// `<NAME>` after the flag: the option takes a value.
    pub value_name: Option<String>,
    /// `<NAME>...`: it takes one value or more.
    pub multiple: bool,
    /// `[possible values: …]` or the `Possible values:` list.
    pub possible_values: Vec<String>,
    /// `[default: …]`.
    pub default: Option<String>,
}

/// A positional argument (`Arguments:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Positional {
    pub name: String,
    pub required: bool,
}

/// A subcommand (`Commands:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subcommand {
    pub name: String,
    pub aliases: Vec<String>,
}

/// What one command's help says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HelpText {
    /// The text after `Usage: `, continuation lines included (as printed).
    pub usage: String,
    pub commands: Vec<Subcommand>,
    pub arguments: Vec<Positional>,
    pub options: Vec<OptionSpec>,
    /// The whole text, verbatim (what `--help` prints).
    pub verbatim: String,
}

impl HelpText {
    /// Whether every usage line requires a subcommand (`<COMMAND>`, not `[COMMAND]`).
    pub fn requires_command(&self) -> bool {
        self.usage.lines().all(|line| line.contains("<COMMAND>"))
    }

    /// The options the usage line names outside `[…]`: the required ones (`--out <DIR>`).
    pub fn required_options(&self) -> Vec<String> {
        let first_line = self.usage.lines().next().unwrap_or_default();
        let mut depth = 0usize;
        let mut outside = String::new();
        for c in first_line.chars() {
            match c {
                '[' => depth += 1,
                ']' => depth = depth.saturating_sub(1),
                _ if depth == 0 => outside.push(c),
                _ => {}
            }
        }
        outside
            .split_whitespace()
            .filter_map(|word| word.strip_prefix("--"))
            .map(str::to_string)
            .collect()
    }

    pub fn option(&self, long: &str) -> Option<&OptionSpec> {
        self.options.iter().find(|o| o.long == long)
    }
}

/// A recording's sections: command path (`codex`, `codex app-server`, …) → its help.
pub fn parse_recording(text: &str) -> Result<BTreeMap<String, HelpText>, String> {
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in text.split_inclusive('\n') {
        let header = line
            .trim_end_matches('\n')
            .strip_prefix("==> ")
            .and_then(|rest| rest.strip_suffix(" <=="));
        if let Some(command) = header {
            if let Some((path, body)) = current.take() {
                sections.insert(path, parse_help(&body));
            }
            let path = command
                .strip_suffix(" --help")
                .ok_or_else(|| format!("section `{command}` is not a `--help` output"))?;
            current = Some((path.to_string(), String::new()));
        } else if let Some((_, body)) = current.as_mut() {
            body.push_str(line);
        } else if !line.trim().is_empty() {
            return Err(format!(
                "text before the first `==> … <==` header: {line:?}"
            ));
        }
    }
    if let Some((path, body)) = current {
        sections.insert(path, parse_help(&body));
    }
    if !sections.contains_key("codex") {
        return Err("no `==> codex --help <==` section".into());
    }
    Ok(sections)
}

#[derive(PartialEq)]
enum Section {
    None,
    Commands,
    Arguments,
    Options,
}

/// Parse one command's `--help` output.
pub fn parse_help(text: &str) -> HelpText {
    let mut help = HelpText {
        verbatim: text.to_string(),
        ..HelpText::default()
    };
    let mut section = Section::None;
    let mut in_usage = false;
    let mut in_possible_values = false;
    // The description text of the entry being read (aliases may sit on a wrapped line).
    let mut command_text = String::new();
    for line in text.lines() {
        if let Some(usage) = line.strip_prefix("Usage: ") {
            help.usage = usage.to_string();
            in_usage = true;
            continue;
        }
        if in_usage {
            if line.starts_with("       ") && !line.trim().is_empty() {
                help.usage.push('\n');
                help.usage.push_str(line);
                continue;
            }
            in_usage = false;
        }
        match line {
            "Commands:" => {
                section = Section::Commands;
                continue;
            }
            "Arguments:" => {
                section = Section::Arguments;
                continue;
            }
            "Options:" => {
                section = Section::Options;
                continue;
            }
            _ => {}
        }
        if !line.is_empty() && !line.starts_with(' ') {
            section = Section::None;
            continue;
        }
        match section {
            Section::None => {}
            Section::Commands => {
                if let Some(entry) = line.strip_prefix("  ").filter(|e| !e.starts_with(' ')) {
                    finish_command(&mut help, &command_text);
                    let name = entry.split_whitespace().next().unwrap_or_default();
                    help.commands.push(Subcommand {
                        name: name.to_string(),
                        aliases: Vec::new(),
                    });
                    command_text = entry[name.len()..].to_string();
                } else {
                    command_text.push(' ');
                    command_text.push_str(line.trim());
                }
            }
            Section::Arguments => argument_line(&mut help, line),
            Section::Options => option_line_or_detail(&mut help, line, &mut in_possible_values),
        }
    }
    finish_command(&mut help, &command_text);
    help
}

/// A line of the `Arguments:` section: a positional, required when in angle brackets.
fn argument_line(help: &mut HelpText, line: &str) {
    if let Some(entry) = line.strip_prefix("  ").filter(|e| !e.starts_with(' ')) {
        let word = entry.split_whitespace().next().unwrap_or_default();
        let word = word.trim_end_matches("...");
        let (name, required) = if let Some(n) = word.strip_prefix('<') {
            (n.trim_end_matches('>'), true)
        } else {
            (word.trim_start_matches('[').trim_end_matches(']'), false)
        };
        help.arguments.push(Positional {
            name: name.to_string(),
            required,
        });
    }
}

/// A line of the `Options:` section: a new option, or what the last one's description says
/// of its possible values and default.
fn option_line_or_detail(help: &mut HelpText, line: &str, in_possible_values: &mut bool) {
    if let Some(spec) = option_line(line) {
        help.options.push(spec);
        *in_possible_values = false;
        return;
    }
    let Some(last) = help.options.last_mut() else {
        return;
    };
    let text = line.trim();
    if text == "Possible values:" {
        *in_possible_values = true;
    } else if *in_possible_values && line.starts_with("          - ") {
        let value = text[2..].split(':').next().unwrap_or_default().trim();
        last.possible_values.push(value.to_string());
    } else if !line.starts_with("            ") {
        *in_possible_values = false;
    }
    if let Some(values) = bracketed(text, "[possible values: ") {
        last.possible_values = values.split(", ").map(str::to_string).collect();
    }
    if let Some(default) = bracketed(text, "[default: ") {
        last.default = Some(default.to_string());
    }
}

/// `[aliases: a, b]` at the end of the command's description.
fn finish_command(help: &mut HelpText, text: &str) {
    if let (Some(command), Some(aliases)) =
        (help.commands.last_mut(), bracketed(text, "[aliases: "))
    {
        command.aliases = aliases.split(", ").map(str::to_string).collect();
    }
}

/// The text between `opening` and the next `]`.
fn bracketed<'a>(text: &'a str, opening: &str) -> Option<&'a str> {
    let start = text.find(opening)? + opening.len();
    let end = text[start..].find(']')? + start;
    Some(&text[start..end])
}

/// `  -c, --config <key=value>` or `      --stdio` (a description may follow after 2 spaces).
fn option_line(line: &str) -> Option<OptionSpec> {
    let (short, flags) = match line.strip_prefix("  -") {
        Some(rest) if !rest.starts_with('-') => {
            let mut chars = rest.chars();
            let short = chars.next()?;
            (Some(short), chars.as_str().strip_prefix(", ")?)
        }
        _ => (None, line.strip_prefix("      ")?),
    };
    let spec_text = flags.split("  ").next().unwrap_or(flags);
    let mut words = spec_text.split_whitespace();
    let long = words.next()?.strip_prefix("--")?;
    let well_formed = !long.is_empty()
        && long
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !well_formed {
        return None;
    }
    let (value_name, multiple) = match words.next() {
        Some(value) => {
            let multiple = value.ends_with("...");
            let name = value
                .trim_end_matches("...")
                .strip_prefix('<')?
                .strip_suffix('>')?;
            (Some(name.to_string()), multiple)
        }
        None => (None, false),
    };
    Some(OptionSpec {
        short,
        long: long.to_string(),
        value_name,
        multiple,
        possible_values: Vec::new(),
        default: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
[experimental] Run the app server

Usage: codex app-server [OPTIONS] [COMMAND]
       codex app-server [OPTIONS] <COMMAND> [ARGS]

Commands:
  daemon                Manage the local app-server daemon
  generate-json-schema  [experimental] Generate JSON Schema for the app server protocol, with a
                        long description [aliases: gjs]
  help                  Print this message or the help of the given subcommand(s)

Arguments:
  [PROMPT]
          Optional user prompt

Options:
  -c, --config <key=value>
          Override a configuration value. Examples: - `-c model=\"o3\"` - `-c x=[1]`

      --enable <FEATURE>
          Enable a feature (repeatable)

  -i, --image <FILE>...
          Images

      --listen <URL>
          Transport endpoint URL

          [default: stdio://]

      --stdio
          Use stdio as the transport

  -s, --sandbox <SANDBOX_MODE>
          Select the sandbox policy

          [possible values: read-only, workspace-write, danger-full-access]

  -a, --ask-for-approval <APPROVAL_POLICY>
          Configure when the model requires human approval

          Possible values:
          - on-request: The model decides when to ask the user for approval
          - never:      Never ask for user approval Execution failures are immediately returned to
            the model

      --search
          Enable live web search

  -h, --help
          Print help (see a summary with '-h')
";

    #[test]
    fn a_long_help_text_parses_into_its_surface() {
        let help = parse_help(SAMPLE);
        assert_eq!(
            help.usage,
            "codex app-server [OPTIONS] [COMMAND]\n       codex app-server [OPTIONS] <COMMAND> [ARGS]"
        );
        let names: Vec<&str> = help.commands.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["daemon", "generate-json-schema", "help"]);
        assert_eq!(help.commands[1].aliases, ["gjs"]);
        assert!(help.commands[0].aliases.is_empty());
        assert_eq!(
            help.arguments,
            [Positional {
                name: "PROMPT".into(),
                required: false
            }]
        );
        let longs: Vec<&str> = help.options.iter().map(|o| o.long.as_str()).collect();
        assert_eq!(
            longs,
            [
                "config",
                "enable",
                "image",
                "listen",
                "stdio",
                "sandbox",
                "ask-for-approval",
                "search",
                "help"
            ]
        );
        let config = help.option("config").unwrap();
        assert_eq!(config.short, Some('c'));
        assert_eq!(config.value_name.as_deref(), Some("key=value"));
        assert!(!config.multiple && config.possible_values.is_empty());
        assert!(help.option("image").unwrap().multiple);
        assert_eq!(
            help.option("listen").unwrap().default.as_deref(),
            Some("stdio://")
        );
        assert_eq!(help.option("stdio").unwrap().value_name, None);
        assert_eq!(
            help.option("sandbox").unwrap().possible_values,
            ["read-only", "workspace-write", "danger-full-access"]
        );
        assert_eq!(
            help.option("ask-for-approval").unwrap().possible_values,
            ["on-request", "never"]
        );
        assert!(help.option("search").unwrap().possible_values.is_empty());
        assert!(
            !help.requires_command(),
            "only one of its usages needs a command"
        );
        assert!(
            parse_help("Usage: codex app-server daemon [OPTIONS] <COMMAND>\n").requires_command()
        );
        assert_eq!(help.verbatim, SAMPLE);
    }

    #[test]
    fn required_options_are_the_ones_outside_brackets() {
        let help = parse_help("Usage: codex app-server generate-ts [OPTIONS] --out <DIR>\n");
        assert_eq!(help.required_options(), ["out"]);
        assert!(!help.requires_command());
        let help = parse_help("Usage: codex [OPTIONS] [PROMPT]\n");
        assert!(help.required_options().is_empty());
    }

    #[test]
    fn a_recording_splits_into_its_commands_verbatim() {
        let recording = "==> codex --help <==\nUsage: codex [OPTIONS]\n\n==> codex app-server --help <==\nUsage: codex app-server\n";
        let sections = parse_recording(recording).unwrap();
        assert_eq!(sections["codex"].verbatim, "Usage: codex [OPTIONS]\n\n");
        assert_eq!(sections["codex app-server"].usage, "codex app-server");
        assert!(parse_recording("stray\n==> codex --help <==\n").is_err());
        assert!(parse_recording("==> codex app-server --help <==\nx\n").is_err());
    }

    #[test]
    fn every_persona_records_the_commands_the_fake_builds_on() {
        for persona in crate::persona::all() {
            let sections = parse_recording(persona.cli_help_text()).unwrap();
            let app_server = &sections["codex app-server"];
            for option in ["config", "enable", "disable", "listen"] {
                assert!(
                    app_server.option(option).is_some(),
                    "{} app-server --{option}",
                    persona.version
                );
            }
            assert!(sections["codex"]
                .commands
                .iter()
                .any(|c| c.name == "app-server"));
            assert_eq!(
                sections["codex app-server generate-json-schema"].required_options(),
                ["out"]
            );
        }
    }
}
