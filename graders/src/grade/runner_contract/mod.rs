//! The `runner-contract` profile's graders for the parts of the incident runner's driver
//! contract the older suites did not check (issue 20, "The runner contract, whole"; the
//! contract in short: docs/profiles/runner-contract.md): skills, unsafe workspaces, the
//! app-server's allowlisted environment, the sealed Codex home, idempotent results and resume
//! reconciliation. Each reads the wire translator's events, as the protocol cases do
//! (`super::protocol::Exchange`), names the contract rule in its reasons, and passes only on
//! positive evidence; what the stream cannot show is `incomplete`.

pub mod env;
mod environment;
mod home;
mod reconciliation;
mod results;
mod skills;
mod workspaces;

pub use env::{app_server_env_allowed, APP_SERVER_ENV_ALLOWLIST};
pub(crate) use environment::AllowlistedEnvironment;
pub(crate) use home::HomeSecretsSealed;
pub use home::{
    HOME_CANARY_PREFIX, PROBE_MARKER as HOME_PROBE_MARKER, TAMPER_MARKER as HOME_TAMPER_MARKER,
};
pub(crate) use reconciliation::ResumeReconciliation;
pub(crate) use results::IdempotentResult;
pub(crate) use skills::{Skills, SkillsCase};
pub(crate) use workspaces::UnsafeWorkspace;

/// The skills a text names explicitly, in order, each once: a word that is `$name` or `/name`
/// (brackets and quotes around it, and trailing punctuation, aside), the name one path
/// component of ASCII letters, digits, `-`, `_` and `.` that starts with a letter or digit. The
/// runner contract's definition: the reference driver reads a task's text with it too.
pub fn skill_references(text: &str) -> Vec<String> {
    const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '"', '\''];
    let mut names: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        let word = word.trim_start_matches(['(', '[', '"', '\'']);
        let word = word.trim_end_matches(TRAILING);
        let Some(name) = word.strip_prefix('$').or_else(|| word.strip_prefix('/')) else {
            continue;
        };
        let valid = name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if valid && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_references_are_dollar_or_slash_words_naming_one_component() {
        assert_eq!(
            skill_references("Use $imagegen, then /openai-docs. Again: ($imagegen) and $skill_2!"),
            ["imagegen", "openai-docs", "skill_2"]
        );
        assert!(skill_references("Summarise /tmp/x and cost $ 5 or $-1 or a$b").is_empty());
        assert!(skill_references("nothing here").is_empty());
    }
}
