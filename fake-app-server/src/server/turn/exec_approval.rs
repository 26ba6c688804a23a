//! Which commands (and patches) Codex asks the client about before running them, and the
//! exec-policy amendment it proposes for a command.
//!
//! The rule (codex-rs `core/src/exec_policy.rs`, `render_decision_for_unmatched_command` and
//! `commands_for_exec_policy`; the bash lowering is `shell-command/src/bash.rs`,
//! `parse_shell_lc_plain_commands`; read in the public source of the release line, the
//! behaviour measured on the pinned binary): with no exec-policy rule matching, approval
//! policy `untrusted` prompts for every command, whatever the sandbox. The known-safe list of
//! earlier releases (`is_known_safe_command`: `ls`, `cat`, `sed -n Np`, …) no longer exempts
//! any command in 0.169 (its binary's `untrusted` prompt says as much: "unless an explicit
//! exec policy rule allows them"); measured with 0.169 (`harness explore`, corpus scenario
//! `untrusted-commands-*`): `ls`, `pwd`, `cat /dev/null`, `true`, `sed -n 1p /dev/null`,
//! `git status`, `ls | wc -l` and `echo …` were each asked under read-only, workspace-write and
//! danger-full-access sandboxes, and none under `on-request`.
//!
//! The amendment Codex proposes (`proposedExecpolicyAmendment`) is the first command that
//! prompted: a `bash -lc` script made only of plain word commands joined by `&&`, `||`, `;`,
//! `|` is judged command by command, so it is the script's first command's words; any other
//! script is judged whole, so it is the whole argv.

use serde_json::Value;

/// Whether the thread's approval policy makes Codex ask before every command (sandboxed or
/// not, escalated or not) and every patch (even one the sandbox may write: codex-rs
/// `core/src/safety.rs`, `assess_patch_safety`, asks the user first under `UnlessTrusted`;
/// measured with 0.169 under workspace-write and danger-full-access). The client is asked
/// even where `approvalsReviewer` is `auto_review`: under `untrusted` no automatic review runs
/// (measured with 0.169, for a command and a patch).
pub(super) fn asks_before_every_action(approval_policy: &Value) -> bool {
    approval_policy.as_str() == Some("untrusted")
}

/// The exec-policy amendment Codex 0.169 offers when it asks about `argv`.
pub(super) fn proposed_amendment(argv: &[String]) -> Vec<String> {
    shell_script(argv)
        .and_then(plain_commands)
        .and_then(|commands| commands.into_iter().next())
        .unwrap_or_else(|| argv.to_vec())
}

/// The commands Codex 0.169 judges one by one against its exec-policy rules for `argv`: a
/// plain `bash -lc` script's commands, else the whole argv.
pub(super) fn judged_commands(argv: &[String]) -> Vec<Vec<String>> {
    shell_script(argv)
        .and_then(plain_commands)
        .unwrap_or_else(|| vec![argv.to_vec()])
}

/// The script of `SHELL -lc SCRIPT` or `SHELL -c SCRIPT`, for a bash, zsh or sh by its file
/// name; `None` for any other argv.
fn shell_script(argv: &[String]) -> Option<&str> {
    let [shell, flag, script] = argv else {
        return None;
    };
    let name = std::path::Path::new(shell).file_name()?.to_str()?;
    let name = name.strip_suffix(".exe").unwrap_or(name);
    (matches!(flag.as_str(), "-lc" | "-c") && matches!(name, "bash" | "zsh" | "sh"))
        .then_some(script.as_str())
}

/// Words that start a construct (control flow, tests, declarations, grouping) rather than a
/// plain command when they stand where a command name would.
const NOT_A_PLAIN_COMMAND_NAME: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "in", "!", "[", "[[", "]]", "{", "}", "declare", "export", "local",
    "readonly", "typeset", "unset", "unsetenv",
];

/// The commands of a script made only of plain word commands (bare words, single-quoted
/// strings, double-quoted strings without expansions, and concatenations of them; a command
/// name a bare word) joined by `&&`, `||`, `;`, `|` or newlines; `None` for any other script:
/// redirections, substitutions, expansions, subshells, background `&`, assignments, comments,
/// control flow, or an empty command between operators. A non-empty script gives at least one
/// command. Words keep their text as written (quotes removed, escapes not undone), as Codex's
/// tree-sitter lowering keeps it.
fn plain_commands(script: &str) -> Option<Vec<Vec<String>>> {
    let mut commands: Vec<Vec<String>> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    // After `&&`, `||` or `|` a command must follow; after `;` or a newline one may.
    let mut command_required = false;
    let mut chars = script.chars().peekable();
    while let Some(&c) = chars.peek() {
        match c {
            ' ' | '\t' => {
                chars.next();
            }
            '\n' if current.is_empty() => {
                chars.next();
            }
            ';' | '\n' => {
                chars.next();
                if c == ';' && (current.is_empty() || chars.peek() == Some(&';')) {
                    return None;
                }
                commands.push(std::mem::take(&mut current));
                command_required = false;
            }
            '&' | '|' => {
                chars.next();
                let doubled = chars.next_if_eq(&c).is_some();
                // A lone `&` runs in the background and `|&` pipes stderr: neither is plain.
                if (c == '&' && !doubled) || chars.peek() == Some(&'&') || current.is_empty() {
                    return None;
                }
                commands.push(std::mem::take(&mut current));
                command_required = true;
            }
            '#' => return None,
            _ => {
                let word = plain_word(&mut chars, current.is_empty())?;
                current.push(word);
            }
        }
    }
    if command_required && current.is_empty() {
        return None;
    }
    if !current.is_empty() {
        commands.push(current);
    }
    (!commands.is_empty()).then_some(commands)
}

/// One word starting at `chars`, quotes removed; `None` when it is not a plain word (or, as
/// a command's name, when it is quoted, an assignment or a construct's keyword).
fn plain_word(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    is_command_name: bool,
) -> Option<String> {
    let mut word = String::new();
    let mut quoted = false;
    while let Some(&c) = chars.peek() {
        match c {
            ' ' | '\t' | '\n' | ';' | '&' | '|' => break,
            '<' | '>' | '(' | ')' | '`' | '$' => return None,
            '\'' | '"' => {
                chars.next();
                quoted = true;
                quoted_part(chars, c, &mut word)?;
            }
            '\\' => {
                chars.next();
                word.push('\\');
                word.push(chars.next()?);
            }
            _ => {
                chars.next();
                word.push(c);
            }
        }
    }
    if is_command_name
        && (quoted || is_assignment(&word) || NOT_A_PLAIN_COMMAND_NAME.contains(&word.as_str()))
    {
        return None;
    }
    Some(word)
}

/// The rest of a part quoted by `quote`, its text appended to `word` as written; `None` when
/// it is not closed, or when a double-quoted one expands (`$`, backticks). A single quote
/// escapes nothing; in double quotes a backslash keeps the character after it.
fn quoted_part(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    quote: char,
    word: &mut String,
) -> Option<()> {
    let double = quote == '"';
    loop {
        match chars.next()? {
            c if c == quote => return Some(()),
            '$' | '`' if double => return None,
            '\\' if double => {
                word.push('\\');
                word.push(chars.next()?);
            }
            inner => word.push(inner),
        }
    }
}

/// `NAME=…` or `NAME+=…`: a variable assignment, not a command name.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let name = name.strip_suffix('+').unwrap_or(name);
    let mut name_chars = name.chars();
    name_chars
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && name_chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;
    use serde_json::json;

    fn words(text: &[&str]) -> Vec<String> {
        text.iter().map(|w| w.to_string()).collect()
    }

    fn bash_lc(script: &str) -> Vec<String> {
        words(&["/bin/bash", "-lc", script])
    }

    #[rstest]
    #[case::untrusted(json!("untrusted"), true)]
    #[case::on_request(json!("on-request"), false)]
    #[case::never(json!("never"), false)]
    #[case::granular(json!({"granular": {"sandbox_approval": true}}), false)]
    #[case::absent(Value::Null, false)]
    fn only_untrusted_asks_before_every_action(#[case] policy: Value, #[case] asks: bool) {
        assert_eq!(asks_before_every_action(&policy), asks);
    }

    // Formerly known safe, each measured asked under `untrusted` with 0.169: no command is
    // exempt, so each proposes its own words.
    #[rstest]
    #[case::ls("ls", &["ls"])]
    #[case::pwd("pwd", &["pwd"])]
    #[case::cat("cat /dev/null", &["cat", "/dev/null"])]
    #[case::sed_n("sed -n 1p /dev/null", &["sed", "-n", "1p", "/dev/null"])]
    #[case::git_status("git status", &["git", "status"])]
    #[case::echo("echo untrusted-safe", &["echo", "untrusted-safe"])]
    #[case::not_safe("sleep 0", &["sleep", "0"])]
    #[case::pipe("ls | wc -l", &["ls"])]
    #[case::and_chain("echo untrusted-chain && sleep 0", &["echo", "untrusted-chain"])]
    #[case::or_chain("false || rm -rf x", &["false"])]
    #[case::semicolon("cd src; ls", &["cd", "src"])]
    #[case::newline("pwd\nls", &["pwd"])]
    #[case::operator_then_newline("ls &&\n  pwd", &["ls"])]
    #[case::single_quotes("grep -n 'a b' f", &["grep", "-n", "a b", "f"])]
    #[case::double_quotes("echo \"a b\"", &["echo", "a b"])]
    #[case::concatenation("rg -g\"*.py\" x", &["rg", "-g*.py", "x"])]
    fn a_plain_script_proposes_its_first_command(#[case] script: &str, #[case] first: &[&str]) {
        assert_eq!(proposed_amendment(&bash_lc(script)), words(first));
    }

    // Not plain word commands: judged whole, so the whole argv is proposed (measured with
    // 0.169 for the redirection).
    #[rstest]
    #[case::redirection("printf x > untrusted-write.txt")]
    #[case::input_redirection("wc -l < f")]
    #[case::command_substitution("echo $(pwd)")]
    #[case::backticks("echo `pwd`")]
    #[case::variable("echo $HOME")]
    #[case::expansion_in_double_quotes("echo \"hi $USER\"")]
    #[case::subshell("(ls)")]
    #[case::nested_subshell("ls || (pwd && echo hi)")]
    #[case::background("echo hi & echo bye")]
    #[case::assignment_prefix("FOO=bar ls")]
    #[case::quoted_command_name("'git status'")]
    #[case::comment("ls # list")]
    #[case::control_flow("if true; then ls; fi")]
    #[case::trailing_operator("ls &&")]
    #[case::leading_operator("&& ls")]
    #[case::double_separator("ls ;; pwd")]
    #[case::empty_pipeline_segment("ls | | wc")]
    #[case::pipe_stderr("ls |& wc")]
    #[case::unterminated_quote("echo 'a")]
    #[case::empty("")]
    fn any_other_script_proposes_the_whole_argv(#[case] script: &str) {
        assert_eq!(proposed_amendment(&bash_lc(script)), bash_lc(script));
    }

    #[rstest]
    #[case::bash_by_name(&["bash", "-lc", "ls -1"], &["ls", "-1"])]
    #[case::zsh(&["zsh", "-lc", "ls"], &["ls"])]
    #[case::sh_c(&["/bin/sh", "-c", "pwd"], &["pwd"])]
    #[case::four_words(&["bash", "-lc", "git", "status"], &["bash", "-lc", "git", "status"])]
    #[case::other_flag(&["bash", "-x", "ls"], &["bash", "-x", "ls"])]
    #[case::other_shell(&["fish", "-c", "ls"], &["fish", "-c", "ls"])]
    #[case::no_shell(&["ls", "-la"], &["ls", "-la"])]
    fn only_a_shell_lc_wrapping_is_lowered(#[case] argv: &[&str], #[case] proposed: &[&str]) {
        assert_eq!(proposed_amendment(&words(argv)), words(proposed));
    }

    #[test]
    fn a_chain_of_plain_commands_lowers_to_each_of_them() {
        assert_eq!(
            plain_commands("ls && pwd; echo 'hi there' | wc -l"),
            Some(vec![
                words(&["ls"]),
                words(&["pwd"]),
                words(&["echo", "hi there"]),
                words(&["wc", "-l"]),
            ])
        );
        assert_eq!(plain_commands("ls;"), Some(vec![words(&["ls"])]));
    }
}
