//! What Codex 0.169 remembers of a client's answer to an approval (measured with `harness
//! explore --replay`, corpus scenarios `*-remembered-*`):
//!
//! - `acceptForSession` on a command: the same command runs again in that thread without
//!   asking; any other command is asked, one the first's words start too, and so is the same
//!   command in another thread (measured). The fake keys the cache by the thread, the argv, the
//!   folder and whether the command asked to leave the sandbox (the last two as codex-rs's
//!   approval key names them; not measured apart);
//! - `acceptWithExecpolicyAmendment`: the amendment becomes a rule, appended to
//!   `$CODEX_HOME/rules/default.rules` as `prefix_rule(pattern=[…], decision="allow")`; every
//!   later command whose judged commands (a plain `bash -lc` script's, else its argv) each
//!   start with an allowing rule's words runs without asking, in any thread (measured: a new
//!   thread of the same launch); the fake reads the file again for every command, so a later
//!   launch with the same home keeps the rule too (the real Codex's later launch was not
//!   measured);
//! - `acceptForSession` on a file change: a later patch touching only files already accepted
//!   so in that thread is applied without asking;
//! - `applyNetworkPolicyAmendment` runs the command as `accept` does and remembers nothing of
//!   it; a permissions grant with `scope: session` does not spare the next `request_permissions`
//!   its request.
//!
//! The session cache lives as long as the process: a resumed thread in a later launch, like a
//! fork, starts with none.

use super::exec_approval;
use serde_json::Value;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The rules file Codex appends an accepted amendment to, under `$CODEX_HOME`.
const RULES_FILE: &str = "rules/default.rules";

/// Where the amendments' rules are kept: `$CODEX_HOME`, when set (as the fake's rollouts are:
/// never a user's own home).
pub(crate) fn rules_home() -> Option<PathBuf> {
    std::env::var_os("CODEX_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A command asked about: what the session cache keys it by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct CommandKey {
    pub thread_id: String,
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// Whether it asked to leave the sandbox.
    pub escalated: bool,
}

/// The process's memory of approvals.
#[derive(Debug, Default)]
pub(crate) struct Remembered {
    commands: HashSet<CommandKey>,
    files: HashSet<(String, PathBuf)>,
    /// Allowing prefix rules (also written to the rules file when `CODEX_HOME` is set).
    rules: Vec<Vec<String>>,
}

impl Remembered {
    /// Whether `argv`, run in `cwd` (`escalated`: asking to leave the sandbox), needs no
    /// approval: approved for the thread's session, or allowed by an amendment's rule.
    pub(crate) fn command_allowed(&self, key: &CommandKey, home: Option<&Path>) -> bool {
        if self.commands.contains(key) {
            return true;
        }
        let mut rules = self.rules.clone();
        if let Some(home) = home {
            rules.extend(read_rules(&home.join(RULES_FILE)));
        }
        exec_approval::judged_commands(&key.argv)
            .iter()
            .all(|command| rules.iter().any(|rule| command.starts_with(rule)))
    }

    /// What the client's accepting `decision` (the answer's `decision` value) on `argv`
    /// leaves behind.
    pub(crate) fn command_accepted(
        &mut self,
        key: CommandKey,
        decision: &Value,
        home: Option<&Path>,
    ) {
        if decision == "acceptForSession" {
            self.commands.insert(key);
            return;
        }
        let amendment = &decision["acceptWithExecpolicyAmendment"]["execpolicy_amendment"];
        let Some(words) = amendment.as_array() else {
            return;
        };
        let rule: Vec<String> = words
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect();
        if rule.is_empty() {
            return;
        }
        if let Some(home) = home {
            if let Err(err) = append_rule(&home.join(RULES_FILE), &rule) {
                eprintln!("fake-app-server: writing the amendment's rule failed: {err}");
            }
        }
        self.rules.push(rule);
    }

    /// Whether every one of `files` was accepted for the session in `thread_id`.
    pub(crate) fn files_allowed(&self, thread_id: &str, files: &[PathBuf]) -> bool {
        !files.is_empty()
            && files
                .iter()
                .all(|f| self.files.contains(&(thread_id.to_string(), f.clone())))
    }

    pub(crate) fn files_accepted_for_session(&mut self, thread_id: &str, files: &[PathBuf]) {
        for file in files {
            self.files.insert((thread_id.to_string(), file.clone()));
        }
    }
}

/// The rule line Codex 0.169 appends (its words JSON-quoted, `", "` between them).
fn rule_line(rule: &[String]) -> String {
    let words: Vec<String> = rule
        .iter()
        .map(|w| Value::from(w.as_str()).to_string())
        .collect();
    format!(
        "prefix_rule(pattern=[{}], decision=\"allow\")\n",
        words.join(", ")
    )
}

fn append_rule(path: &Path, rule: &[String]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(rule_line(rule).as_bytes())
}

/// The allowing prefix rules of a rules file, in the form [`rule_line`] writes (other lines,
/// which the fake does not evaluate, are left out).
fn read_rules(path: &Path) -> Vec<Vec<String>> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let pattern = line
                .strip_prefix("prefix_rule(pattern=")?
                .strip_suffix(", decision=\"allow\")")?;
            serde_json::from_str::<Vec<String>>(pattern).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn argv(script: &str) -> Vec<String> {
        vec!["/bin/bash".into(), "-lc".into(), script.into()]
    }

    fn key(thread_id: &str, script: &str, cwd: &str, escalated: bool) -> CommandKey {
        CommandKey {
            thread_id: thread_id.into(),
            argv: argv(script),
            cwd: cwd.into(),
            escalated,
        }
    }

    #[test]
    fn a_command_accepted_for_the_session_runs_again_unasked_in_that_thread_only() {
        let mut memory = Remembered::default();
        let probe = key("t", "echo remembered-probe", "/w", true);
        assert!(!memory.command_allowed(&probe, None));
        memory.command_accepted(probe.clone(), &json!("acceptForSession"), None);
        assert!(memory.command_allowed(&probe, None));
        for other in [
            key("other", "echo remembered-probe", "/w", true),
            key("t", "echo remembered-probe", "/x", true),
            key("t", "echo remembered-probe", "/w", false),
            key("t", "echo remembered-probe matching", "/w", true),
        ] {
            assert!(!memory.command_allowed(&other, None), "{other:?}");
        }
    }

    #[test]
    fn a_plain_accept_or_a_network_amendment_leaves_nothing_behind() {
        let mut memory = Remembered::default();
        let probe = key("t", "echo remembered-probe", "/w", true);
        let allow = json!({"host": "example.com", "action": "allow"});
        for decision in [
            json!("accept"),
            json!({"applyNetworkPolicyAmendment": {"network_policy_amendment": allow}}),
        ] {
            memory.command_accepted(probe.clone(), &decision, None);
            assert!(!memory.command_allowed(&probe, None));
        }
    }

    #[test]
    fn an_amendment_becomes_a_rule_in_the_home_that_a_later_launch_reads() {
        let home = tempfile::tempdir().unwrap();
        let amendment = json!(["echo", "remembered-probe"]);
        let decision =
            json!({"acceptWithExecpolicyAmendment": {"execpolicy_amendment": amendment}});
        let mut memory = Remembered::default();
        let probe = key("t", "echo remembered-probe", "/w", true);
        memory.command_accepted(probe, &decision, Some(home.path()));
        let written = std::fs::read_to_string(home.path().join(RULES_FILE)).unwrap();
        assert_eq!(
            written,
            "prefix_rule(pattern=[\"echo\", \"remembered-probe\"], decision=\"allow\")\n"
        );
        let later_launch = Remembered::default();
        for (script, allowed) in [
            ("echo remembered-probe", true),
            ("echo remembered-probe matching", true),
            ("echo remembered-probe && echo remembered-probe again", true),
            ("echo other", false),
            ("echo remembered-probe && echo other", false),
        ] {
            let command = key("u", script, "/w", true);
            assert_eq!(
                later_launch.command_allowed(&command, Some(home.path())),
                allowed,
                "{script}"
            );
        }
    }

    #[test]
    fn files_accepted_for_the_session_are_not_asked_again_in_that_thread() {
        let mut memory = Remembered::default();
        let file = PathBuf::from("/w/remembered.txt");
        assert!(!memory.files_allowed("t", std::slice::from_ref(&file)));
        memory.files_accepted_for_session("t", std::slice::from_ref(&file));
        assert!(memory.files_allowed("t", std::slice::from_ref(&file)));
        assert!(!memory.files_allowed("u", std::slice::from_ref(&file)));
        let both = [file, PathBuf::from("/w/other.txt")];
        assert!(!memory.files_allowed("t", &both));
    }
}
