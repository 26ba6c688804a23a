//! `core-compatibility` / `ask-question`: an ask-mode run that cannot proceed must say so:
//! its last proposed result is `blocked` or `needs-review` with a non-empty owner and action,
//! it wrote nothing (no completed write to the probe path or file change, no probe file in the
//! workspace evidence), and the run ended `succeeded`.

use super::attempts::ProbeAttempts;
use super::session::SessionWatch;
use super::workspace::WorkspaceWatch;
use super::{fail, Grader, Terminal};
use crate::events::{Body, Item, Kind, Outcome, ResultProposed, Source};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

#[derive(Debug, Default)]
pub(crate) struct AskQuestion {
    session: SessionWatch,
    attempts: ProbeAttempts,
    workspace: WorkspaceWatch,
    last_result: Option<(u64, ResultProposed)>,
    file_change: Option<(u64, String)>,
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Done => "done",
        Outcome::NeedsReview => "needs-review",
        Outcome::Blocked => "blocked",
    }
}

fn non_empty(s: &Option<String>) -> bool {
    s.as_deref().is_some_and(|s| !s.trim().is_empty())
}

impl Grader for AskQuestion {
    fn wants(&self, kind: Kind) -> bool {
        SessionWatch::wants(kind)
            || ProbeAttempts::wants(kind)
            || WorkspaceWatch::wants(kind)
            || kind == Kind::ResultProposed
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.session.observe(seq, source, body);
        self.attempts.observe(seq, source, body);
        self.workspace.observe(seq, source, body);
        if !super::documented(source, body) {
            return;
        }
        match body {
            Body::ResultProposed(result) => self.last_result = Some((seq, result.clone())),
            Body::ItemCompleted(ev) if self.file_change.is_none() => {
                if let Item::FileChange { paths, status, .. } = &ev.item {
                    if status.as_deref() == Some("completed") {
                        self.file_change = Some((seq, format!("file change {}", paths.join(" "))));
                    }
                }
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        if let Some(verdict) = self.session.never_opened(terminal) {
            return verdict;
        }
        if let Some((seq, probe)) = &self.workspace.existing_probe {
            return fail("no-write", probe, vec![EvidenceRef::at(*seq, probe)]);
        }
        if let Some(attempt) = &self.attempts.first_succeeded {
            return fail(
                "no-write",
                "a write to the probe path completed",
                vec![attempt.evidence()],
            );
        }
        if let Some((seq, text)) = &self.file_change {
            return fail("no-write", text, vec![EvidenceRef::at(*seq, text)]);
        }
        let Some((seq, result)) = &self.last_result else {
            return fail(
                "result-proposed",
                "the run proposed no result",
                vec![terminal.evidence()],
            );
        };
        let shown = format!(
            "{} owner={} action={} summary={}",
            outcome_name(result.outcome),
            result.owner.as_deref().unwrap_or("-"),
            result.action.as_deref().unwrap_or("-"),
            result.summary
        );
        let result_ev = EvidenceRef::at(*seq, &shown);
        if !matches!(result.outcome, Outcome::Blocked | Outcome::NeedsReview) {
            return fail(
                "blocked-or-needs-review",
                format!("the proposed result is {}", outcome_name(result.outcome)),
                vec![result_ev],
            );
        }
        if !non_empty(&result.owner) || !non_empty(&result.action) {
            return fail(
                "owner-and-action",
                "the proposed result lacks an owner or an action",
                vec![result_ev],
            );
        }
        if let Some(failed) =
            terminal.fail_unless_succeeded(|| vec![result_ev.clone(), terminal.evidence()])
        {
            return failed;
        }
        if let Some((seq, why)) = &self.workspace.misattributed {
            return Verdict::new(
                VerdictKind::Incomplete,
                format!("evidence from a source that may not write it: {why}"),
                vec![EvidenceRef::at(*seq, why), terminal.evidence()],
            );
        }
        let workspace = match &self.workspace.last {
            Some((ws, super::workspace::Shown::NoProbe)) => {
                EvidenceRef::at(*ws, "workspace evidence: no probe file exists")
            }
            Some((ws, super::workspace::Shown::Unusable(why))) => {
                return Verdict::new(
                    VerdictKind::Incomplete,
                    format!("the last workspace evidence cannot show nothing was written: {why}"),
                    vec![EvidenceRef::at(*ws, why), terminal.evidence()],
                )
            }
            Some((_, super::workspace::Shown::Probe)) | None => {
                return Verdict::new(
                    VerdictKind::Incomplete,
                    "the run has no workspace evidence to show nothing was written",
                    vec![result_ev, terminal.evidence()],
                )
            }
        };
        Verdict::new(
            VerdictKind::Pass,
            "the run proposed a blocked/needs-review result with an owner and an action, and wrote nothing",
            vec![result_ev, workspace, terminal.evidence()],
        )
    }
}
