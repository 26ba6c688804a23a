//! A declared driver's command line, with its placeholders filled in for one cell.

use crate::spec::{CodexDiscovery, DeclaredDriver};

/// The values a declared driver's command line and environment may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholders {
    pub workspace: String,
    /// The task's prompt, unquoted: `{prompt}` is replaced by its shell-quoted form.
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
}

/// Why a command line could not be filled in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    #[error("unknown placeholder `{{{0}}}` (known: {{workspace}} {{prompt}} {{mode}} {{codex}} {{task}} {{repo}} {{cache}} {{idle_seconds}})")]
    Unknown(String),
    #[error("unclosed `{{` at byte {0}")]
    Unclosed(usize),
    #[error("`{{codex}}` is used but the driver finds Codex by {0}; declare codex = \"arg\"")]
    CodexNotArg(String),
    #[error("codex = \"arg\" but the command line has no `{{codex}}`")]
    MissingCodexArg,
    #[error("the prompt cannot be shell-quoted (it holds a NUL byte)")]
    Unquotable,
}

impl Placeholders {
    /// `{idle_seconds}` for a turn-idle bound: whole seconds, rounded up, so a driver told
    /// this waits at least as long as the harness's own bound.
    pub fn idle_seconds(turn_idle: std::time::Duration) -> u64 {
        u64::try_from(turn_idle.as_millis().div_ceil(1000)).unwrap_or(u64::MAX)
    }

    fn value(&self, name: &str, quote: bool) -> Result<String, RenderError> {
        let plain = |v: &str| -> Result<String, RenderError> {
            if quote {
                shlex::try_quote(v)
                    .map(|q| q.into_owned())
                    .map_err(|_| RenderError::Unquotable)
            } else {
                Ok(v.to_string())
            }
        };
        match name {
            "workspace" => plain(&self.workspace),
            // The prompt is free text: always quoted, so it stays one word of the command line.
            "prompt" => shlex::try_quote(&self.prompt)
                .map(|q| q.into_owned())
                .map_err(|_| RenderError::Unquotable),
            "mode" => plain(&self.mode),
            "codex" => plain(&self.codex),
            "task" => plain(&self.task),
            "repo" => plain(&self.repo),
            "cache" => plain(&self.cache),
            "idle_seconds" => Ok(self.idle_seconds.to_string()),
            other => Err(RenderError::Unknown(other.to_string())),
        }
    }
}

/// Replace every `{name}` in `text`. Paths are shell-quoted when `quote` (a `sh -c` command
/// line), verbatim otherwise (an environment value).
fn render(text: &str, values: &Placeholders, quote: bool) -> Result<String, RenderError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut offset = 0;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after
            .find('}')
            .ok_or(RenderError::Unclosed(offset + open))?;
        out.push_str(&values.value(&after[..close], quote)?);
        offset += open + close + 2;
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

impl DeclaredDriver {
    /// The `sh -c` command line for one cell.
    pub fn command_line(&self, values: &Placeholders) -> Result<String, RenderError> {
        let names_codex = self.command.contains("{codex}");
        match (&self.codex, names_codex) {
            (CodexDiscovery::Arg, false) => return Err(RenderError::MissingCodexArg),
            (CodexDiscovery::Path, true) => return Err(RenderError::CodexNotArg("PATH".into())),
            (CodexDiscovery::Env(name), true) => {
                return Err(RenderError::CodexNotArg(format!("${name}")))
            }
            _ => {}
        }
        render(&self.command, values, true)
    }

    /// The driver's extra environment, placeholders filled in (values unquoted).
    pub fn environment(&self, values: &Placeholders) -> Result<Vec<(String, String)>, RenderError> {
        self.env
            .iter()
            .map(|(k, v)| Ok((k.clone(), render(v, values, false)?)))
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
        }
    }

    #[test]
    fn placeholders_are_filled_and_the_prompt_stays_one_quoted_word() {
        let d = driver(
            "node {cache}/cli.js --cwd {workspace} --prompt {prompt} --mode {mode} --bin {codex}",
            CodexDiscovery::Arg,
        );
        let line = d.command_line(&values()).unwrap();
        let words = shlex::split(&line).unwrap();
        assert_eq!(
            words,
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

    /// The idle bound is whole seconds rounded up: a driver told `{idle_seconds}` never gives
    /// up before the harness's own bound (1.5 s is 2, not 1).
    #[test]
    fn idle_seconds_is_the_turn_idle_bound_rounded_up() {
        use std::time::Duration;
        assert_eq!(Placeholders::idle_seconds(Duration::from_secs(2)), 2);
        assert_eq!(Placeholders::idle_seconds(Duration::from_millis(1500)), 2);
        assert_eq!(Placeholders::idle_seconds(Duration::from_secs(60)), 60);
        let d = driver("x --timeout {idle_seconds}", CodexDiscovery::Path);
        assert_eq!(d.command_line(&values()).unwrap(), "x --timeout 2");
    }

    #[test]
    fn unknown_and_unclosed_placeholders_and_codex_mismatches_are_errors() {
        let path = CodexDiscovery::Path;
        assert_eq!(
            driver("x {nope}", path.clone()).command_line(&values()),
            Err(RenderError::Unknown("nope".into()))
        );
        assert_eq!(
            driver("x {task", path.clone()).command_line(&values()),
            Err(RenderError::Unclosed(2))
        );
        assert!(matches!(
            driver("x {codex}", path).command_line(&values()),
            Err(RenderError::CodexNotArg(_))
        ));
        assert_eq!(
            driver("x", CodexDiscovery::Arg).command_line(&values()),
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
