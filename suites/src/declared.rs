//! A declared driver's command line, with its placeholders filled in for one cell.
//!
//! The command is split into words first (shell quoting rules, `shlex`), and each placeholder
//! is then filled in inside its word: a value becomes part of exactly that word and is never
//! parsed again, so `$(…)`, backquotes, quotes or `;` in a workspace path or a prompt reach the
//! driver as plain text, however the drivers file quoted the placeholder. The words are then
//! executed as they are: no shell runs between the harness and the driver.

use crate::spec::{CodexDiscovery, DeclaredDriver};

/// The values a declared driver's command line and environment may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholders {
    pub workspace: String,
    /// The task's prompt: `{prompt}` puts it, as it is, into its word.
    pub prompt: String,
    pub mode: String,
    /// The path of the tap standing in for `codex`.
    pub codex: String,
    /// The task envelope's path.
    pub task: String,
    /// The harness repository root (where the shipped launch scripts live).
    pub repo: String,
    /// The harness cache root (`codex::provision::cache_root`), where `harness
    /// provision` installs the pinned Codex and the published drivers' packages.
    pub cache: String,
    /// The cell's turn-idle bound in whole seconds, rounded up (the task envelope's
    /// `timeouts.turn_idle_ms`): one command line can then give a driver's own idle wait for
    /// both the fake (2 s) and the real Codex (60 s), so the two runners declare one driver.
    pub idle_seconds: u64,
    /// The model the task names (`{model}`), empty when it names none.
    pub model: String,
}

/// Why a command line could not be filled in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("unknown placeholder `{{{0}}}` (known: {{workspace}} {{prompt}} {{mode}} {{model}} {{codex}} {{task}} {{repo}} {{cache}} {{idle_seconds}})")]
    Unknown(String),
    #[error("unclosed `{{` in `{0}`")]
    Unclosed(String),
    #[error("`{{codex}}` is used but the driver finds Codex by {0}; declare codex = \"arg\"")]
    CodexNotArg(String),
    #[error("codex = \"arg\" but the command line has no `{{codex}}`")]
    MissingCodexArg,
    #[error("`{{{0}}}` holds a NUL byte, which no process can be given")]
    Nul(&'static str),
    #[error("`{0}` cannot be split into words (an unclosed quote, or a backslash at the end)")]
    NotShellWords(String),
    #[error("`{0}` names no program")]
    NoProgram(String),
    #[error("the word `{0}` is shell syntax, but the command is not run by a shell: write `sh -c '…'` to use a pipe, a list or a redirection")]
    ShellSyntax(String),
    #[error("`{0}` sits in the script of a shell's `-c`, which that shell would parse: give it as an argument after the script (`sh -c '… \"$0\"' {0}`)")]
    InShellScript(String),
}

/// Words that only a shell gives a meaning to (a pipe, a list, a redirection, a subshell). The
/// command is executed without one, so such a word would silently become an argument.
const SHELL_OPERATORS: &[&str] = &["|", "||", "&", "&&", ";", ";;", "|&", "(", ")"];

/// Whether `word` only means something to a shell: an operator, or a redirection (`>log`,
/// `2>&1`, `<in`).
fn is_shell_syntax(word: &str) -> bool {
    let redirection = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
    SHELL_OPERATORS.contains(&word) || redirection.starts_with(['<', '>'])
}

/// A word that assigns a variable (`NAME=value`): leading ones are the environment of the
/// program, as a shell would take them.
pub fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// `command` split into words by the shell's quoting rules, placeholders still in them.
pub fn split_words(command: &str) -> Result<Vec<String>, RenderError> {
    let words =
        shlex::split(command).ok_or_else(|| RenderError::NotShellWords(command.to_string()))?;
    if let Some(operator) = words.iter().find(|word| is_shell_syntax(word)) {
        return Err(RenderError::ShellSyntax(operator.clone()));
    }
    if let Some(placeholder) = shell_script(&words).and_then(|script| placeholder_in(script)) {
        return Err(RenderError::InShellScript(placeholder.to_string()));
    }
    Ok(words)
}

/// Programs that parse the word after `-c` as a script.
const SHELLS: &[&str] = &["sh", "bash", "dash", "ash", "ksh", "zsh"];

/// The script word of a command that starts a shell (`[NAME=value…] [env …] sh [-e] -c SCRIPT`).
fn shell_script(words: &[String]) -> Option<&String> {
    let mut rest = words
        .iter()
        .skip_while(|word| is_assignment(word) || word.as_str() == "env");
    let program = rest.next()?;
    let name = std::path::Path::new(program).file_name()?.to_str()?;
    if !SHELLS.contains(&name) {
        return None;
    }
    let mut takes_script = false;
    while let Some(word) = rest.next() {
        if takes_script {
            return Some(word);
        }
        match word.as_str() {
            // `-o NAME`: the name is no script.
            "-o" | "+o" => drop(rest.next()),
            option if option.starts_with('-') && !option.starts_with("--") => {
                takes_script |= option.contains('c');
            }
            _ => return None,
        }
    }
    None
}

/// The first `{name}` in `word`, if any.
fn placeholder_in(word: &str) -> Option<&str> {
    let open = word.find('{')?;
    let close = word[open..].find('}')?;
    Some(&word[open..=open + close])
}

/// A command line as the driver's process is given it: no shell, one argument per word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandWords {
    /// Its leading `NAME=value` words: entries of the program's environment.
    pub assignments: Vec<(String, String)>,
    /// The program (`argv[0]`: a path, or a name looked up on `PATH`) and its arguments.
    pub argv: Vec<String>,
}

impl CommandWords {
    /// The words of `command` with every placeholder filled in inside its word.
    pub fn fill(command: &str, values: &Placeholders) -> Result<Self, RenderError> {
        let words = split_words(command)?
            .iter()
            .map(|word| render(word, values))
            .collect::<Result<Vec<_>, _>>()?;
        let program = words
            .iter()
            .position(|word| !is_assignment(word))
            .ok_or_else(|| RenderError::NoProgram(command.to_string()))?;
        let assignments = words[..program]
            .iter()
            .filter_map(|word| word.split_once('='))
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        Ok(Self {
            assignments,
            argv: words[program..].to_vec(),
        })
    }
}

impl Placeholders {
    /// `{idle_seconds}` for a turn-idle bound: whole seconds, rounded up, so a driver told
    /// this waits at least as long as the harness's own bound.
    pub fn idle_seconds(turn_idle: std::time::Duration) -> u64 {
        u64::try_from(turn_idle.as_millis().div_ceil(1000)).unwrap_or(u64::MAX)
    }

    fn value(&self, name: &str) -> Result<String, RenderError> {
        let (key, value): (&'static str, &str) = match name {
            "workspace" => ("workspace", &self.workspace),
            "prompt" => ("prompt", &self.prompt),
            "mode" => ("mode", &self.mode),
            "model" => ("model", &self.model),
            "codex" => ("codex", &self.codex),
            "task" => ("task", &self.task),
            "repo" => ("repo", &self.repo),
            "cache" => ("cache", &self.cache),
            "idle_seconds" => return Ok(self.idle_seconds.to_string()),
            other => return Err(RenderError::Unknown(other.to_string())),
        };
        if value.contains('\0') {
            return Err(RenderError::Nul(key));
        }
        Ok(value.to_string())
    }
}

/// Replace every `{name}` in `text` (one word of a command line, or an environment value) by
/// its value, verbatim.
fn render(text: &str, values: &Placeholders) -> Result<String, RenderError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or_else(|| RenderError::Unclosed(text.to_string()))?;
        out.push_str(&values.value(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl DeclaredDriver {
    /// The command line for one cell, as words (module docs).
    pub fn command_words(&self, values: &Placeholders) -> Result<CommandWords, RenderError> {
        let names_codex = self.command.contains("{codex}");
        match (&self.codex, names_codex) {
            (CodexDiscovery::Arg, false) => return Err(RenderError::MissingCodexArg),
            (CodexDiscovery::Path, true) => return Err(RenderError::CodexNotArg("PATH".into())),
            (CodexDiscovery::Env(name), true) => {
                return Err(RenderError::CodexNotArg(format!("${name}")))
            }
            _ => {}
        }
        CommandWords::fill(&self.command, values)
    }

    /// The driver's extra environment, placeholders filled in.
    pub fn environment(&self, values: &Placeholders) -> Result<Vec<(String, String)>, RenderError> {
        self.env
            .iter()
            .map(|(k, v)| Ok((k.clone(), render(v, values)?)))
            .collect()
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DriverContract;

    fn driver(command: &str, codex: CodexDiscovery) -> DeclaredDriver {
        DeclaredDriver {
            codex,
            contract: DriverContract::Wire,
            modes: vec![],
            plan_reviews: false,
            answers: false,
            ..DeclaredDriver::harness_own(command.into())
        }
    }

    fn values() -> Placeholders {
        Placeholders {
            workspace: "/w s".into(),
            prompt: "it's $HOME; rm -rf /".into(),
            mode: "planning".into(),
            codex: "/t/codex".into(),
            task: "/t/task.json".into(),
            repo: "/r".into(),
            cache: "/c c".into(),
            idle_seconds: 2,
            model: String::new(),
        }
    }

    fn argv(command: &str, codex: CodexDiscovery, values: &Placeholders) -> Vec<String> {
        driver(command, codex).command_words(values).unwrap().argv
    }

    #[test]
    fn placeholders_are_filled_and_the_prompt_stays_one_word() {
        assert_eq!(
            argv(
                "node {cache}/cli.js --cwd {workspace} --prompt {prompt} --mode {mode} --bin {codex}",
                CodexDiscovery::Arg,
                &values()
            ),
            [
                "node",
                "/c c/cli.js",
                "--cwd",
                "/w s",
                "--prompt",
                "it's $HOME; rm -rf /",
                "--mode",
                "planning",
                "--bin",
                "/t/codex"
            ]
        );
    }

    /// Issue 36: a drivers file that quotes its placeholders defensively (`"{workspace}"`,
    /// `'{prompt}'`) once handed values holding `$(…)` to a shell that ran it. Each value is
    /// now exactly one argument, whatever it holds and however it was quoted.
    #[test]
    fn quoted_placeholders_holding_shell_syntax_are_each_one_exact_argument() {
        let hostile = [
            "$(touch /tmp/pwned)",
            "`touch /tmp/pwned`",
            "a b; touch /tmp/pwned",
            "it's \"quoted\" \\ 'twice'",
            "x' ; touch /tmp/pwned ; '",
        ];
        for text in hostile {
            let values = Placeholders {
                workspace: format!("/out/{text}/workspace"),
                prompt: text.into(),
                task: format!("/out/{text}/task.json"),
                codex: format!("/out/{text}/codex"),
                ..values()
            };
            let words = argv(
                r#"d --cwd "{workspace}" --prompt '{prompt}' "--task={task}" --bin '{codex}' {prompt}"#,
                CodexDiscovery::Arg,
                &values,
            );
            assert_eq!(
                words,
                [
                    "d".to_string(),
                    "--cwd".into(),
                    values.workspace.clone(),
                    "--prompt".into(),
                    text.into(),
                    format!("--task={}", values.task),
                    "--bin".into(),
                    values.codex.clone(),
                    text.into(),
                ],
                "{text}"
            );
        }
    }

    #[test]
    fn leading_assignments_are_environment_entries_not_the_program() {
        let words = driver(
            "CODEX_PATH={codex} PYTHONUNBUFFERED=1 python3 x.py A=1",
            CodexDiscovery::Arg,
        )
        .command_words(&values())
        .unwrap();
        assert_eq!(
            words.assignments,
            [
                ("CODEX_PATH".to_string(), "/t/codex".to_string()),
                ("PYTHONUNBUFFERED".into(), "1".into())
            ]
        );
        assert_eq!(words.argv, ["python3", "x.py", "A=1"]);
        assert_eq!(
            driver("A=1 B=2", CodexDiscovery::Path).command_words(&values()),
            Err(RenderError::NoProgram("A=1 B=2".into()))
        );
    }

    /// A shell is only there when the driver writes one: its script is one word, placeholders
    /// in it are plain text (never re-parsed), and what a shell alone understands outside one
    /// is refused rather than passed on as arguments.
    #[test]
    fn shell_syntax_outside_an_explicit_shell_and_unbalanced_quotes_are_refused() {
        assert_eq!(
            argv(
                "sh -c 'exec d \"$0\"' {prompt}",
                CodexDiscovery::Path,
                &values()
            ),
            ["sh", "-c", "exec d \"$0\"", "it's $HOME; rm -rf /"]
        );
        for inside in [
            "sh -c 'exec d --prompt \"{prompt}\"'",
            "A=1 /bin/bash -e -c 'd {workspace} | tee log'",
            "env B=2 sh -o pipefail -ec 'd {task}'",
        ] {
            assert!(
                matches!(
                    driver(inside, CodexDiscovery::Path).command_words(&values()),
                    Err(RenderError::InShellScript(_))
                ),
                "{inside}"
            );
        }
        for (command, word) in [
            ("d | tee log", "|"),
            ("cd x && d", "&&"),
            ("d ; true", ";"),
            ("d >log", ">log"),
            ("d 2>&1", "2>&1"),
        ] {
            assert_eq!(
                driver(command, CodexDiscovery::Path).command_words(&values()),
                Err(RenderError::ShellSyntax(word.into())),
                "{command}"
            );
        }
        for unbalanced in ["d '{prompt}", "d \"--cwd {workspace}", "d x\\"] {
            assert_eq!(
                driver(unbalanced, CodexDiscovery::Path).command_words(&values()),
                Err(RenderError::NotShellWords(unbalanced.into())),
                "{unbalanced}"
            );
        }
        let nul = Placeholders {
            prompt: "a\0b".into(),
            ..values()
        };
        assert_eq!(
            driver("d {prompt}", CodexDiscovery::Path).command_words(&nul),
            Err(RenderError::Nul("prompt"))
        );
    }

    /// The idle bound is whole seconds rounded up: a driver told `{idle_seconds}` never gives
    /// up before the harness's own bound (1.5 s is 2, not 1).
    #[test]
    fn idle_seconds_is_the_turn_idle_bound_rounded_up() {
        use std::time::Duration;
        assert_eq!(Placeholders::idle_seconds(Duration::from_secs(2)), 2);
        assert_eq!(Placeholders::idle_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(Placeholders::idle_seconds(Duration::from_secs(60)), 60);
        assert_eq!(
            argv(
                "x --timeout {idle_seconds}",
                CodexDiscovery::Path,
                &values()
            ),
            ["x", "--timeout", "2"]
        );
    }

    #[test]
    fn unknown_and_unclosed_placeholders_and_codex_mismatches_are_errors() {
        let path = CodexDiscovery::Path;
        assert_eq!(
            driver("x {nope}", path.clone()).command_words(&values()),
            Err(RenderError::Unknown("nope".into()))
        );
        assert_eq!(
            driver("x {task", path.clone()).command_words(&values()),
            Err(RenderError::Unclosed("{task".into()))
        );
        assert!(matches!(
            driver("x {codex}", path).command_words(&values()),
            Err(RenderError::CodexNotArg(_))
        ));
        assert_eq!(
            driver("x", CodexDiscovery::Arg).command_words(&values()),
            Err(RenderError::MissingCodexArg)
        );
    }

    #[test]
    fn codex_discovery_parses_its_three_forms_and_rejects_others() {
        assert_eq!(CodexDiscovery::parse("path"), Ok(CodexDiscovery::Path));
        assert_eq!(CodexDiscovery::parse("arg"), Ok(CodexDiscovery::Arg));
        assert_eq!(
            CodexDiscovery::parse("env:CODEX_PATH"),
            Ok(CodexDiscovery::Env("CODEX_PATH".into()))
        );
        for bad in ["env:", "env:1X", "env:A-B", "PATH", ""] {
            assert!(CodexDiscovery::parse(bad).is_err(), "{bad}");
        }
    }
}
