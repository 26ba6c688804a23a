//! The model script: what the *model* does in each turn, written in terms of the model's own
//! actions (tool calls and messages), never of the fake's internals. The same script drives the
//! fake app-server directly and the mock model API that the real Codex talks to.

use serde::{Deserialize, Serialize};

/// What the model does in one turn, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ModelTurn {
    #[serde(default)]
    pub steps: Vec<ModelStep>,
}

/// One action of the model.
///
/// Text fields may use the template `{probe_id}`: a short id unique to the thread, chosen by
/// whoever plays the script (the fake, or the mock model API), so probe files of parallel runs
/// never collide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ModelStep {
    /// Run a shell command through the exec tool (`exec_command` for the real Codex). With
    /// `escalate`, the model asks to run it outside the sandbox, which makes the app-server ask
    /// the client for approval.
    Shell {
        cmd: String,
        #[serde(default)]
        escalate: bool,
        #[serde(default)]
        justification: Option<String>,
        /// When the thread's approvals go to the automatic reviewer (`approvalsReviewer:
        /// auto_review`), what the reviewing model answers for this escalation; the client
        /// is not asked. Without it the reviewer denies (a review must never allow by default).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        review: Option<Review>,
    },
    /// Propose a plan (a `<proposed_plan>` block for the real Codex; a `plan` item).
    Plan { text: String },
    /// Update the checklist plan (`turn/plan/updated`).
    PlanUpdate {
        #[serde(default)]
        explanation: Option<String>,
        steps: Vec<PlanStepSpec>,
    },
    /// Say something to the user (an `agentMessage` item).
    Message { text: String },
    /// Call a client-side dynamic tool (`item/tool/call`), e.g. `paperclip_finish`.
    ToolCall {
        name: String,
        #[serde(default)]
        arguments: serde_json::Value,
    },
}

/// The automatic reviewer's verdict on one escalation: the JSON object the reviewing model
/// returns (Codex asks for `risk_level`, `user_authorization`, `outcome`, `rationale`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Review {
    pub outcome: ReviewOutcome,
    #[serde(default = "default_rationale")]
    pub rationale: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReviewOutcome {
    Allow,
    Deny,
}

fn default_rationale() -> String {
    "Scripted review.".into()
}

impl Review {
    /// What the reviewer says when the script says nothing: deny.
    pub fn unscripted() -> Review {
        Review {
            outcome: ReviewOutcome::Deny,
            rationale: "No review was scripted for this escalation; denied.".into(),
        }
    }

    pub fn allows(&self) -> bool {
        self.outcome == ReviewOutcome::Allow
    }

    /// The review as the model writes it (the JSON the mock model API returns to Codex).
    pub fn model_answer(&self) -> serde_json::Value {
        let (risk, authorization, outcome) = match self.outcome {
            ReviewOutcome::Allow => ("low", "high", "allow"),
            ReviewOutcome::Deny => ("high", "low", "deny"),
        };
        serde_json::json!({"risk_level": risk, "user_authorization": authorization, "outcome": outcome, "rationale": self.rationale})
    }

    /// `riskLevel` / `userAuthorization` as the app-server reports them.
    pub fn levels(&self) -> (&'static str, &'static str) {
        match self.outcome {
            ReviewOutcome::Allow => ("low", "high"),
            ReviewOutcome::Deny => ("high", "low"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanStepSpec {
    pub step: String,
    /// `pending`, `inProgress` or `completed`.
    pub status: String,
}

/// Replace the `{probe_id}` template in a script text.
pub fn expand_template(text: &str, probe_id: &str) -> String {
    text.replace("{probe_id}", probe_id)
}

/// How the model streams a text to the app-server: the chunks of its text deltas, one per line
/// (the last one may lack its newline). A real model's chunk boundaries are arbitrary; the
/// script fixes them so both players agree: the mock model API sends one
/// `response.output_text.delta` per chunk, and Codex 0.169 (measured) forwards each as one
/// `item/agentMessage/delta` (or, inside a `<proposed_plan>` block, one `item/plan/delta`),
/// which is what the fake sends. An empty text has no chunk.
pub fn stream_chunks(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The text of the `plan` item Codex makes from a plan step: the block's body, trailing blank
/// space trimmed, ending in one newline (measured with 0.169).
pub fn plan_item_text(plan: &str) -> String {
    format!("{}\n", plan.trim_end())
}

/// A plan step as the model writes it in an assistant message: a `<proposed_plan>` block, which
/// Codex turns into a `plan` item (and strips from the message).
pub fn proposed_plan_block(plan: &str) -> String {
    format!(
        "<proposed_plan>\n{}</proposed_plan>\n",
        plan_item_text(plan)
    )
}

/// The outcome of the model's write probe, as the first line of a plan records it.
pub const WRITE_REFUSED: &str = "WRITE_REFUSED";
pub const WRITE_SUCCEEDED: &str = "WRITE_SUCCEEDED";
pub const SANDBOX_FAILED: &str = "SANDBOX_FAILED";
/// `{write_outcome}` before any shell step ran in the turn.
pub const NO_WRITE_ATTEMPT: &str = "NO_WRITE_ATTEMPT";
/// The escalation was refused before the command ran: approval policy `never`, the user
/// declined, or the automatic reviewer denied it (Codex told the model so).
pub const WRITE_REJECTED: &str = "WRITE_REJECTED";

/// `{write_outcome}` after a shell step, from the text the model got back for it — the one
/// thing both players of a script (the fake, and the mock model API in front of the real
/// Codex) see alike: a process result is classified by [`classify_write_outcome`], a refused
/// escalation is [`WRITE_REJECTED`], any other text (a command that could not be started)
/// counts as a failed command with that text as its output.
pub fn write_outcome_told(tool_output: &str) -> &'static str {
    use crate::model_log_writer::{is_rejected_escalation, parse_exec_output};
    match parse_exec_output(tool_output) {
        Some((exit_code, output)) => classify_write_outcome(exit_code, &output),
        None if is_rejected_escalation(tool_output) => WRITE_REJECTED,
        None => classify_write_outcome(1, tool_output),
    }
}

/// What `{filler:N}` repeats.
const FILLER: &str = "The quick brown fox jumps over the lazy dog; ";
/// The largest `{filler:N}`, in bytes, and `{lines:N}`, in lines.
pub const MAX_FILLER_BYTES: usize = 16 << 20;
const FILLER_OPEN: &str = "{filler:";
/// `{lines:N}`: the numbers 1 to N, one a line. Streamed a line a delta, a short text makes
/// many events (the real Codex logs each one at `codex_api=trace`).
const LINES_OPEN: &str = "{lines:";

/// Each `{filler:N}` (or other sized template opening with `open`) of `text`: its byte range in
/// `text` and N, or why N is not a size in `1..=MAX_FILLER_BYTES` (a long legal message without
/// a long scenario file; hand-parsed: one template, no grammar worth a crate).
fn fillers(text: &str, open: &str) -> Result<Vec<(std::ops::Range<usize>, usize)>, String> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(open).map(|i| from + i) {
        let digits = at + open.len();
        let end = text[digits..]
            .find('}')
            .map(|i| digits + i)
            .ok_or_else(|| format!("`{open}` at byte {at} has no closing `}}`"))?;
        let size = &text[digits..end];
        let bytes = size
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_FILLER_BYTES).contains(n))
            .ok_or_else(|| {
                format!("`{open}{size}}}`: the size must be a number in 1..={MAX_FILLER_BYTES}")
            })?;
        found.push((at..end + 1, bytes));
        from = end + 1;
    }
    Ok(found)
}

/// Why a script text's `{filler:N}` or `{lines:N}` templates are invalid, if one is.
pub fn check_fillers(text: &str) -> Result<(), String> {
    fillers(text, FILLER_OPEN)?;
    fillers(text, LINES_OPEN).map(|_| ())
}

/// `text` with each valid `{filler:N}` replaced by N bytes of readable text, and each
/// `{lines:N}` by the numbers 1 to N, one a line.
fn expand_fillers(text: &str) -> String {
    let filled = expand_sized(text, FILLER_OPEN, |out, bytes| {
        out.extend(FILLER.chars().cycle().take(bytes))
    });
    expand_sized(&filled, LINES_OPEN, |out, lines| {
        for line in 1..=lines {
            out.push_str(&format!("{line}\n"));
        }
    })
}

fn expand_sized(text: &str, open: &str, write: impl Fn(&mut String, usize)) -> String {
    let Ok(found) = fillers(text, open) else {
        return text.to_string();
    };
    let mut out = String::with_capacity(text.len() + found.iter().map(|(_, n)| n).sum::<usize>());
    let mut last = 0;
    for (range, size) in found {
        out.push_str(&text[last..range.start]);
        write(&mut out, size);
        last = range.end;
    }
    out.push_str(&text[last..]);
    out
}

/// Everything a script text's templates may refer to. Besides `{probe_id}` and `{filler:N}`
/// (N bytes of readable text):
/// - `{write_outcome}`: the outcome of the turn's most recent shell step, computed from what
///   the model was told about it by [`write_outcome_told`];
/// - `{user_marker}`: the first `MARKER-…` token in the turn's user text ([`find_marker`]).
#[derive(Debug, Clone, Default)]
pub struct TemplateContext {
    pub probe_id: String,
    pub write_outcome: Option<String>,
    pub user_marker: Option<String>,
}

impl TemplateContext {
    pub fn expand(&self, text: &str) -> String {
        let mut out = expand_template(text, &self.probe_id);
        if out.contains("{write_outcome}") {
            let outcome = self.write_outcome.as_deref().unwrap_or(NO_WRITE_ATTEMPT);
            out = out.replace("{write_outcome}", outcome);
        }
        if out.contains("{user_marker}") {
            out = out.replace("{user_marker}", self.user_marker.as_deref().unwrap_or(""));
        }
        if out.contains(FILLER_OPEN) || out.contains(LINES_OPEN) {
            out = expand_fillers(&out);
        }
        out
    }

    /// Expand every string inside a JSON value (tool-call arguments).
    pub fn expand_value(&self, value: &serde_json::Value) -> serde_json::Value {
        use serde_json::Value;
        match value {
            Value::String(text) => Value::String(self.expand(text)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.expand_value(v)).collect())
            }
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| (k.clone(), self.expand_value(v)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// Classify a write probe's result from what the model saw: the exit code and the output.
/// A bubblewrap launcher failure (`bwrap: …`) or a sandbox helper panic means the command never
/// ran; `WRITE_REFUSED` printed by the `||` branch (or a refusal text) means the sandbox refused
/// the write; a clean exit means the write happened.
pub fn classify_write_outcome(exit_code: i64, output: &str) -> &'static str {
    let launcher_failed = output.lines().any(|line| line.starts_with("bwrap: "))
        || output.contains("panicked at linux-sandbox");
    if launcher_failed {
        return SANDBOX_FAILED;
    }
    if output.contains(WRITE_REFUSED) {
        return WRITE_REFUSED;
    }
    if exit_code == 0 {
        return WRITE_SUCCEEDED;
    }
    let lowered = output.to_ascii_lowercase();
    if lowered.contains("read-only file system") || lowered.contains("permission denied") {
        WRITE_REFUSED
    } else {
        SANDBOX_FAILED
    }
}

/// The first whitespace-separated token starting with `MARKER-` (trailing punctuation removed).
pub fn find_marker(user_text: &str) -> Option<String> {
    user_text
        .split_whitespace()
        .find(|token| token.starts_with("MARKER-"))
        .map(|token| {
            token
                .trim_end_matches(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
                .to_string()
        })
}

#[cfg(test)]
mod template_tests {
    use super::*;

    #[test]
    fn outcomes_follow_the_command_result() {
        let refused =
            "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n";
        assert_eq!(classify_write_outcome(0, refused), WRITE_REFUSED);
        assert_eq!(classify_write_outcome(0, ""), WRITE_SUCCEEDED);
        assert_eq!(
            classify_write_outcome(
                1,
                "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n"
            ),
            SANDBOX_FAILED
        );
        assert_eq!(
            classify_write_outcome(1, "bwrap: setting up uid map: Permission denied\n"),
            SANDBOX_FAILED
        );
        assert_eq!(
            classify_write_outcome(1, "x: Read-only file system\n"),
            WRITE_REFUSED
        );
    }

    #[test]
    fn outcomes_follow_what_the_model_was_told() {
        use crate::model_log_writer::{exec_output_text, rejected_output, APPROVAL_NEVER_OUTPUT};
        let ran = |code, output| exec_output_text("c", std::time::Duration::ZERO, code, output);
        assert_eq!(
            write_outcome_told(&ran(0, "WRITE_SUCCEEDED\n")),
            WRITE_SUCCEEDED
        );
        assert_eq!(
            write_outcome_told(&ran(1, "x: Read-only file system\n")),
            WRITE_REFUSED
        );
        assert_eq!(write_outcome_told(APPROVAL_NEVER_OUTPUT), WRITE_REJECTED);
        assert_eq!(
            write_outcome_told(&rejected_output("rejected by user")),
            WRITE_REJECTED
        );
        assert_eq!(
            write_outcome_told(
                "exec_command failed: CreateProcess { message: \"Codex(Sandbox)\" }"
            ),
            SANDBOX_FAILED
        );
    }

    #[test]
    fn texts_stream_line_by_line_and_plans_end_in_one_newline() {
        assert_eq!(stream_chunks("a\n\nb"), ["a\n", "\n", "b"]);
        assert!(stream_chunks("").is_empty());
        assert_eq!(plan_item_text("# Plan\n1. a\n\n"), "# Plan\n1. a\n");
        assert_eq!(
            proposed_plan_block("# Plan"),
            "<proposed_plan>\n# Plan\n</proposed_plan>\n"
        );
    }

    #[test]
    fn templates_expand() {
        let ctx = TemplateContext {
            probe_id: "ab12".into(),
            write_outcome: Some(WRITE_REFUSED.into()),
            user_marker: find_marker("please echo MARKER-42x, thanks"),
        };
        assert_eq!(
            ctx.expand("{write_outcome} {probe_id} {user_marker}"),
            "WRITE_REFUSED ab12 MARKER-42x"
        );
        assert_eq!(
            TemplateContext::default().expand("{write_outcome}"),
            NO_WRITE_ATTEMPT
        );
    }

    #[test]
    fn a_filler_template_is_that_many_bytes_of_readable_text() {
        let text = TemplateContext::default().expand("<{filler:100}|{filler:3}>");
        assert_eq!(text.len(), 100 + 3 + 3, "{text}");
        assert!(text.starts_with("<The quick brown fox"), "{text}");
        assert!(text.ends_with("|The>"), "{text}");
    }

    #[test]
    fn a_lines_template_is_one_number_a_line_streamed_a_line_a_delta() {
        let text = TemplateContext::default().expand("{lines:3}{filler:3}");
        assert_eq!(text, "1\n2\n3\nThe");
        assert_eq!(stream_chunks(&text).len(), 4);
        assert!(check_fillers("{lines:0}").is_err());
        assert!(check_fillers("{lines:12").is_err());
    }
}
