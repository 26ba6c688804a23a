//! The fake's command line: the real `codex` one of the release it plays, built at start-up
//! from that release's recorded `--help` texts ([`help`]) and the rules its help does not say
//! ([`rules`]). The fake's own options ([`FAKE_OPTIONS`]) are taken out of the command line
//! before it is read, so that clap sees, and words its errors for, exactly the release's
//! surface (its suggestions of similar options included). A driver launches it exactly like the real
//! binary (`codex [OPTIONS] app-server [OPTIONS]`); every option the release accepts is
//! accepted, and one it does not is refused with clap's own text and exit status, as the real
//! binary (built with clap) refuses it.
//!
//! What the fake does with an accepted option: `-c` and `--enable`/`--disable` (as
//! `-c features.NAME=true|false`, after every `-c`, as Codex applies them; given after
//! `app-server` they replace those given before it, as clap's global options do) configure it;
//! `--listen stdio://` / `--stdio` are what it serves; `--print-startup-config`, `--help` and
//! `--version` print the release's recorded answers; the options the release refuses before
//! serving ([`rules::Refusal`]) are refused with its message; the rest change nothing a
//! driver of `codex app-server` sees (terminal-UI options before `app-server`) or concern what
//! the fake never does (websocket listeners, a remote code-mode host), and are accepted and
//! ignored. Without a subcommand the real binary starts its terminal UI; the fake serves, so
//! that `fake-app-server --scenario …` keeps working.

pub mod help;
pub mod rules;

use crate::sandbox::ModeChoice;
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::{Arg, ArgAction, ArgMatches, Command};
use help::HelpText;
use rules::{CommandRules, Rules};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;

/// The fake's own options, `--NAME VALUE` or `--NAME=VALUE` anywhere on the command line (the
/// last one wins), else their environment variable: `(name, environment variable)`.
pub const FAKE_OPTIONS: &[(&str, &str)] = &[
    ("scenario", "FAKE_APP_SERVER_SCENARIO"),
    ("transcript", "FAKE_APP_SERVER_TRANSCRIPT"),
    ("model-log", "FAKE_APP_SERVER_MODEL_LOG"),
    ("sandbox", "FAKE_APP_SERVER_SANDBOX"),
    ("codex-version", "FAKE_APP_SERVER_CODEX_VERSION"),
];

/// The values of the fake's `--sandbox`. `codex --sandbox` (before `app-server`) is also an
/// option of the release, with other values: only these make `--sandbox` the fake's.
const FAKE_SANDBOX_MODES: &[&str] = &["auto", "real", "simulated"];

/// What to do, once the command line is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Serve `codex app-server` on stdio.
    Serve,
    /// `codex --version`.
    Version,
    /// `codex app-server --print-startup-config`.
    StartupConfig,
    /// `codex app-server generate-json-schema --out DIR`.
    GenerateJsonSchema { out: PathBuf },
    /// A command the release has and the fake does not play (`codex exec`, `codex app-server
    /// daemon`, …), named.
    NotPlayed(String),
    /// Codex's refusal of an option before serving (`Error: …`, exit 1).
    Refused(String),
}

/// The command line, read.
#[derive(Debug, Clone)]
pub struct Args {
    pub action: Action,
    pub codex_version: String,
    pub scenario: String,
    pub transcript: Option<PathBuf>,
    pub model_log: Option<PathBuf>,
    pub sandbox: ModeChoice,
    /// Every `-c` (before `app-server`, then after), then `features.NAME=true|false` per
    /// `--enable`/`--disable`: Codex's session flags, in the order they apply.
    pub overrides: Vec<String>,
    /// `--listen` (or `stdio://` for `--stdio` and by default).
    pub listen: String,
}

/// The command line could not be read, or asks for a text and an exit (help, a usage error):
/// what to print where, and the exit status.
#[derive(Debug)]
pub struct Exit {
    pub status: u8,
    pub stdout: String,
    pub stderr: String,
}

/// Read `args` (without the program name) as the persona's `codex` reads them.
pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Args, Exit> {
    let fail = |message: String| Exit {
        status: 1,
        stdout: String::new(),
        stderr: format!("Error: {message}\n"),
    };
    let (fake, args) = take_fake_options(args.into_iter().collect());
    let fake_option = |name: &str| -> Option<String> {
        fake.get(name).cloned().or_else(|| {
            let (_, env) = FAKE_OPTIONS.iter().find(|(n, _)| *n == name)?;
            std::env::var(env).ok().filter(|v| !v.is_empty())
        })
    };
    // The release decides the surface, so it is chosen before the rest is read.
    let version =
        fake_option("codex-version").unwrap_or_else(|| crate::persona::DEFAULT_VERSION.into());
    let persona = crate::persona::select(&version).map_err(fail)?;
    let sections = help::parse_recording(persona.cli_help_text()).map_err(fail)?;
    let rules = rules::parse(persona.cli_rules_text()).map_err(fail)?;
    let command = build("codex", &sections, &rules);
    let argv = std::iter::once(OsString::from("codex")).chain(args);
    let matches = command.try_get_matches_from(argv).map_err(|err| {
        let text = err.render().to_string();
        let (stdout, stderr) = if err.use_stderr() {
            (String::new(), text)
        } else {
            (text, String::new())
        };
        Exit {
            status: err.exit_code() as u8,
            stdout,
            stderr,
        }
    })?;
    let sandbox = match fake_option("sandbox").as_deref() {
        None | Some("auto") => ModeChoice::Auto,
        Some("real") => ModeChoice::Real,
        Some("simulated") => ModeChoice::Simulated,
        Some(other) => {
            return Err(fail(format!(
            "FAKE_APP_SERVER_SANDBOX={other}: the fake's sandbox mode is auto, real or simulated"
        )))
        }
    };
    let (action, overrides, listen) = read(&matches, &sections, &rules);
    Ok(Args {
        action,
        codex_version: version,
        scenario: fake_option("scenario").unwrap_or_else(|| "builtin:healthy".into()),
        transcript: fake_option("transcript").map(PathBuf::from),
        model_log: fake_option("model-log").map(PathBuf::from),
        sandbox,
        overrides,
        listen,
    })
}

/// The fake's options ([`FAKE_OPTIONS`]) taken out of `args`: name → value, and the rest.
fn take_fake_options(args: Vec<OsString>) -> (BTreeMap<String, String>, Vec<OsString>) {
    let mut found = BTreeMap::new();
    let mut rest = Vec::new();
    let mut words = args.into_iter().peekable();
    while let Some(word) = words.next() {
        let text = word.to_str().unwrap_or_default();
        let option = FAKE_OPTIONS.iter().find_map(|(name, _)| {
            let flag = format!("--{name}");
            if text == flag {
                Some((*name, None))
            } else {
                text.strip_prefix(&format!("{flag}="))
                    .map(|v| (*name, Some(v.to_string())))
            }
        });
        let Some((name, inline)) = option else {
            rest.push(word);
            continue;
        };
        let value = match inline {
            Some(value) => Some(value),
            None => words.peek().and_then(|v| v.to_str()).map(str::to_string),
        };
        // `--sandbox read-only` (before `app-server`) is the release's own option.
        let ours = value
            .as_deref()
            .is_some_and(|v| name != "sandbox" || FAKE_SANDBOX_MODES.contains(&v));
        match value {
            Some(value) if ours => {
                if !text.contains('=') {
                    words.next();
                }
                found.insert(name.to_string(), value);
            }
            _ => rest.push(word),
        }
    }
    (found, rest)
}

/// The clap command of `path` (`codex`, `codex app-server`, …) from its recorded help.
fn build(path: &str, sections: &BTreeMap<String, HelpText>, rules: &Rules) -> Command {
    let name = path.rsplit(' ').next().unwrap_or(path).to_string();
    let Some(help) = sections.get(path) else {
        // A command the recording does not describe (`codex exec`): whatever follows is its.
        return Command::new(name).disable_help_flag(true).arg(
            Arg::new("rest")
                .num_args(0..)
                .trailing_var_arg(true)
                .allow_hyphen_values(true),
        );
    };
    let no_rules = CommandRules::default();
    let rules_here = rules.get(path).unwrap_or(&no_rules);
    let mut command = Command::new(name)
        .override_help(help.verbatim.clone())
        .disable_version_flag(true)
        .subcommand_required(help.requires_command())
        .arg_required_else_help(help.requires_command());
    if path == "codex" {
        command = command.bin_name("codex");
    }
    let required = help.required_options();
    for option in help.options.iter().filter(|o| o.long != "help") {
        command = command.arg(arg_of(option, rules_here, required.contains(&option.long)));
    }
    for positional in &help.arguments {
        command = command.arg(Arg::new(positional.name.clone()).required(positional.required));
    }
    for subcommand in help.commands.iter().filter(|c| c.name != "help") {
        let child = build(&format!("{path} {}", subcommand.name), sections, rules)
            .visible_aliases(subcommand.aliases.clone());
        command = command.subcommand(child);
    }
    // clap writes the usage line itself (also the narrower one of a missing-argument error);
    // where it would differ from the recorded one (Codex overrides its top-level usage), the
    // recorded one is the release's. Built alone, a subcommand's usage names only itself.
    let mut probe = command.clone();
    let generated = probe.render_usage().to_string();
    let expected = help.usage.replace(path, probe.get_name());
    if generated.strip_prefix("Usage: ") != Some(expected.as_str()) {
        command = command.override_usage(help.usage.clone());
    }
    command
}

fn arg_of(option: &help::OptionSpec, rules: &CommandRules, required: bool) -> Arg {
    let repeatable = rules.repeatable.contains(&option.long);
    let mut arg = Arg::new(option.long.clone())
        .long(option.long.clone())
        .required(required);
    if let Some(short) = option.short {
        arg = arg.short(short);
    }
    if option.long == "version" {
        return arg.action(ArgAction::SetTrue);
    }
    if let Some(other) = rules.requires.get(&option.long) {
        arg = arg.requires(other.clone());
    }
    let Some(value_name) = &option.value_name else {
        return arg.action(if repeatable {
            ArgAction::Count
        } else {
            ArgAction::SetTrue
        });
    };
    arg = arg
        .value_name(value_name.clone())
        .num_args(if option.multiple {
            clap::builder::ValueRange::new(1..)
        } else {
            clap::builder::ValueRange::new(1)
        })
        .action(if repeatable || option.multiple {
            ArgAction::Append
        } else {
            ArgAction::Set
        });
    if option.long == "listen" {
        arg = arg.value_parser(parse_listen);
    } else if !option.possible_values.is_empty() {
        arg = arg.value_parser(PossibleValuesParser::new(
            option
                .possible_values
                .iter()
                .map(|v| PossibleValue::new(v.clone())),
        ));
    }
    arg
}

/// Codex's `--listen` parser (its error text, measured with 0.169): `stdio://`, `unix://`,
/// `unix://PATH`, `ws://IP:PORT` or `off`. The fake serves only the first (checked later).
fn parse_listen(url: &str) -> Result<String, String> {
    let ws_ok = url
        .strip_prefix("ws://")
        .is_some_and(|addr| addr.parse::<std::net::SocketAddr>().is_ok());
    if url == "stdio://" || url == "off" || url.starts_with("unix://") || ws_ok {
        Ok(url.to_string())
    } else {
        Err(format!(
            "unsupported --listen URL `{url}`; expected `stdio://`, `unix://`, `unix://PATH`, `ws://IP:PORT`, or `off`"
        ))
    }
}

/// The values given for `id` on the command line, in order (none when the command has no such
/// option).
fn values(matches: &ArgMatches, id: &str) -> Vec<String> {
    matches
        .try_get_many::<String>(id)
        .ok()
        .flatten()
        .map(|v| v.cloned().collect())
        .unwrap_or_default()
}

fn given(matches: &ArgMatches, id: &str) -> bool {
    matches.try_contains_id(id).unwrap_or(false)
        && matches.value_source(id) == Some(clap::parser::ValueSource::CommandLine)
}

/// What the command line asks for: the action, the `-c` overrides, the `--listen` URL.
fn read(
    root: &ArgMatches,
    sections: &BTreeMap<String, HelpText>,
    rules: &Rules,
) -> (Action, Vec<String>, String) {
    let mut levels = vec![("codex".to_string(), root)];
    let mut path = "codex".to_string();
    let mut current = root;
    while let Some((name, sub)) = current.subcommand() {
        path = format!("{path} {name}");
        levels.push((path.clone(), sub));
        current = sub;
    }
    let persona = crate::persona::current();
    let global = rules
        .get("codex")
        .map(|r| r.global.as_slice())
        .unwrap_or(&[]);
    // A global option's values are those of the deepest command giving it; any other
    // option's, every command's in order.
    let given_values = |id: &str| -> Vec<String> {
        let per_level = levels.iter().map(|(_, m)| values(m, id));
        if global.iter().any(|g| g == id) {
            per_level.rev().find(|v| !v.is_empty()).unwrap_or_default()
        } else {
            per_level.flatten().collect()
        }
    };
    let mut overrides = given_values("config");
    // Codex applies every `--enable`, then every `--disable` (measured: a feature given both is
    // disabled, whatever the order).
    let features: Vec<(String, &str)> = given_values("enable")
        .into_iter()
        .map(|name| (name, "true"))
        .chain(
            given_values("disable")
                .into_iter()
                .map(|name| (name, "false")),
        )
        .collect();
    let mut action = match path.as_str() {
        "codex" | "codex app-server" => Action::Serve,
        "codex app-server generate-json-schema" => Action::GenerateJsonSchema {
            out: PathBuf::from(values(current, "out").pop().unwrap_or_default()),
        },
        other => Action::NotPlayed(other.to_string()),
    };
    if given(root, "version") {
        action = Action::Version;
    }
    for (path, matches) in &levels {
        if !sections.contains_key(path) {
            break;
        }
        if given(matches, "print-startup-config") {
            action = Action::StartupConfig;
        }
        for refusal in rules.get(path).map(|r| r.refuses.as_slice()).unwrap_or(&[]) {
            if !given(matches, &refusal.option) || action != Action::Serve {
                continue;
            }
            let value = values(matches, &refusal.option).pop().unwrap_or_default();
            if refusal.applies(&value, |other| given(matches, other)) {
                action = Action::Refused(refusal.message.replace("{value}", &value));
            }
        }
    }
    for (name, _) in &features {
        if !persona.is_feature(name) && matches!(action, Action::Serve | Action::StartupConfig) {
            action = Action::Refused(format!("Unknown feature flag: {name}"));
            break;
        }
    }
    overrides.extend(
        features
            .into_iter()
            .map(|(name, value)| format!("features.{name}={value}")),
    );
    let app_server = levels.iter().find(|(p, _)| p == "codex app-server");
    let listen = match app_server {
        Some((_, m)) if given(m, "stdio") => "stdio://".to_string(),
        Some((_, m)) => values(m, "listen")
            .pop()
            .unwrap_or_else(|| "stdio://".into()),
        None => "stdio://".into(),
    };
    if action == Action::Serve && listen != "stdio://" {
        action = Action::Refused(format!(
            "fake-app-server serves only `--listen stdio://` (asked for `{listen}`)"
        ));
    }
    (action, overrides, listen)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_fakes_options_are_taken_out_and_codexs_sandbox_stays() {
        let (fake, rest) = take_fake_options(os(&[
            "--sandbox",
            "read-only",
            "--scenario=builtin:hang",
            "app-server",
            "--sandbox",
            "simulated",
            "--transcript",
            "t.jsonl",
            "-c",
            "a=1",
        ]));
        assert_eq!(fake["sandbox"], "simulated");
        assert_eq!(fake["scenario"], "builtin:hang");
        assert_eq!(fake["transcript"], "t.jsonl");
        assert_eq!(
            rest,
            os(&["--sandbox", "read-only", "app-server", "-c", "a=1"])
        );
    }

    #[test]
    fn overrides_keep_every_c_then_the_innermost_feature_flags() {
        let args = parse(os(&[
            "-c",
            "model=\"a\"",
            "--enable",
            "memories",
            "--disable",
            "apps",
            "app-server",
            "--enable",
            "goals",
            "-c",
            "model=\"b\"",
            "--listen",
            "stdio://",
        ]))
        .unwrap();
        assert_eq!(args.action, Action::Serve);
        assert_eq!(
            args.overrides,
            [
                "model=\"a\"",
                "model=\"b\"",
                "features.goals=true",
                "features.apps=false"
            ]
        );
        assert_eq!(args.listen, "stdio://");
    }

    #[test]
    fn what_the_release_refuses_or_the_fake_does_not_play() {
        let action = |words: &[&str]| parse(os(words)).unwrap().action;
        assert_eq!(
            action(&["app-server", "--enable", "no_such_feature"]),
            Action::Refused("Unknown feature flag: no_such_feature".into())
        );
        assert!(matches!(
            action(&["--remote", "ws://127.0.0.1:9", "app-server"]),
            Action::Refused(m) if m.starts_with("`--remote ws://127.0.0.1:9` is only supported")
        ));
        assert_eq!(
            action(&["app-server", "--listen", "off"]),
            Action::Refused(
                "fake-app-server serves only `--listen stdio://` (asked for `off`)".into()
            )
        );
        assert_eq!(
            action(&["exec", "hi"]),
            Action::NotPlayed("codex exec".into())
        );
        assert_eq!(action(&[]), Action::Serve);
        assert_eq!(action(&["-V"]), Action::Version);
        assert_eq!(
            action(&[
                "app-server",
                "generate-json-schema",
                "--out",
                "x",
                "--experimental"
            ]),
            Action::GenerateJsonSchema { out: "x".into() }
        );
        let exit = parse(os(&["app-server", "--bogus"])).unwrap_err();
        assert_eq!(exit.status, 2);
        assert!(exit
            .stderr
            .starts_with("error: unexpected argument '--bogus' found"));
    }
}
