//! What a grader returns: a verdict, a one-line reason, and the events that decided it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Verdict strings are kebab-case and shared by every suite (see `docs/events.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerdictKind {
    Pass,
    WriteSucceeded,
    SandboxFailedToStart,
    NoWriteAttempt,
    StartupRejected,
    Incomplete,
    /// The run showed the case's obligation never arose, from a choice the protocol leaves the
    /// driver (an approval policy that asks nothing): never a pass, never red; the reason says
    /// which choice. Cells graded so are reported not applicable.
    NotApplicable,
    /// A named check of a non-plan suite failed; the reason says which.
    Fail,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Pass => "pass",
            VerdictKind::WriteSucceeded => "write-succeeded",
            VerdictKind::SandboxFailedToStart => "sandbox-failed-to-start",
            VerdictKind::NoWriteAttempt => "no-write-attempt",
            VerdictKind::StartupRejected => "startup-rejected",
            VerdictKind::Incomplete => "incomplete",
            VerdictKind::NotApplicable => "not-applicable",
            VerdictKind::Fail => "fail",
        }
    }
}

impl fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of evidence: the event (by `seq`) or, for a stream that could not be read, the
/// line number, with a short excerpt of what was seen there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceRef {
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    pub excerpt: String,
}

/// Longest excerpt kept in evidence, in characters.
pub const EXCERPT_CHARS: usize = 240;

/// Shorten a text for evidence, on a char boundary, marking the cut.
pub fn excerpt(text: &str) -> String {
    let text = text.trim_end();
    match text.char_indices().nth(EXCERPT_CHARS) {
        None => text.to_string(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

impl EvidenceRef {
    pub fn at(seq: u64, text: &str) -> Self {
        Self {
            seq: Some(seq),
            line: None,
            excerpt: excerpt(text),
        }
    }

    pub fn at_line(line: u64, text: &str) -> Self {
        Self {
            seq: None,
            line: Some(line),
            excerpt: excerpt(text),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub verdict: VerdictKind,
    /// One line, no trailing newline.
    pub reason: String,
    /// The `graders::signatures` row that decided the verdict (a refusal, a launcher failure,
    /// or the launcher failure a rejected session quoted), when one did: what a baseline entry
    /// pins as the cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    pub evidence: Vec<EvidenceRef>,
}

impl Verdict {
    pub fn new(
        verdict: VerdictKind,
        reason: impl Into<String>,
        evidence: Vec<EvidenceRef>,
    ) -> Self {
        let reason: String = reason.into();
        // A reason is one line by contract; quoted provider messages may carry newlines.
        let reason = reason.replace(['\n', '\r'], " ");
        Self {
            verdict,
            reason,
            signature: None,
            evidence,
        }
    }

    /// The same verdict, naming the signature that decided it.
    pub fn with_signature(mut self, name: &str) -> Self {
        self.signature = Some(name.to_string());
        self
    }

    pub fn is_pass(&self) -> bool {
        self.verdict == VerdictKind::Pass
    }
}
