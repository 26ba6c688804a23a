//! `core-compatibility` / `plan-revise-accept`: a plan is proposed, sent back for revision, a
//! second plan is proposed and accepted, and the run proposes `done`.
//!
//! The steps must happen in this order: a completed `plan` item; an `approval.resolved` with
//! decision `revise` for a plan approval request (`approval.requested` of kind `plan`); another
//! completed `plan` item; an `approval.resolved` with decision `accept` (or `approve`) for a plan
//! approval request; a `result.proposed` with outcome `done`; and the run ended `succeeded`.

use super::session::SessionWatch;
use super::{fail, Grader, Terminal};
use crate::events::{ApprovalKind, Body, Item, Kind, Outcome, Source};
use crate::verdict::{EvidenceRef, Verdict};
use std::collections::HashSet;

/// Bound on remembered plan approval request ids.
const MAX_PLAN_REQUESTS: usize = 1024;

const STEPS: [&str; 5] = [
    "first-plan-proposed",
    "revise-decision",
    "second-plan-proposed",
    "accept-decision",
    "result-done",
];

#[derive(Debug, Default)]
pub(crate) struct PlanReviseAccept {
    session: SessionWatch,
    plan_requests: HashSet<String>,
    /// Evidence of each step reached, in `STEPS` order.
    reached: Vec<EvidenceRef>,
}

impl PlanReviseAccept {
    fn advance(&mut self, step: usize, seq: u64, excerpt: &str) {
        if self.reached.len() == step {
            self.reached.push(EvidenceRef::at(seq, excerpt));
        }
    }
}

impl Grader for PlanReviseAccept {
    fn wants(&self, kind: Kind) -> bool {
        SessionWatch::wants(kind)
            || matches!(
                kind,
                Kind::ItemCompleted
                    | Kind::ApprovalRequested
                    | Kind::ApprovalResolved
                    | Kind::ResultProposed
            )
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.session.observe(seq, source, body);
        if !super::documented(source, body) {
            return;
        }
        match body {
            Body::ItemCompleted(ev) => {
                if let Item::Plan { text, .. } = &ev.item {
                    let step = if self.reached.is_empty() { 0 } else { 2 };
                    self.advance(step, seq, &format!("plan: {text}"));
                }
            }
            Body::ApprovalRequested(req)
                if req.kind == ApprovalKind::Plan
                    && self.plan_requests.len() < MAX_PLAN_REQUESTS =>
            {
                self.plan_requests.insert(req.request_id.clone());
            }
            Body::ApprovalResolved(res) if self.plan_requests.contains(&res.request_id) => {
                let text = format!("plan decision `{}` ({})", res.decision, res.request_id);
                match res.decision.as_str() {
                    "revise" => self.advance(1, seq, &text),
                    "accept" | "approve" => self.advance(3, seq, &text),
                    _ => {}
                }
            }
            Body::ResultProposed(result) if result.outcome == Outcome::Done => {
                self.advance(4, seq, &format!("result done: {}", result.summary));
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        if let Some(verdict) = self.session.never_opened(terminal) {
            return verdict;
        }
        let mut evidence = self.reached.clone();
        if let Some(missing) = STEPS.get(self.reached.len()) {
            evidence.push(terminal.evidence());
            let after = match self.reached.len() {
                0 => String::new(),
                n => format!(" after `{}`", STEPS[n - 1]),
            };
            return fail(missing, format!("no `{missing}` step{after}"), evidence);
        }
        evidence.push(terminal.evidence());
        if let Some(failed) = terminal.fail_unless_succeeded(|| evidence.clone()) {
            return failed;
        }
        Verdict::new(
            crate::verdict::VerdictKind::Pass,
            "a plan was proposed, revised, proposed again, accepted, and the run finished done",
            evidence,
        )
    }
}
