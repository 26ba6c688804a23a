//! `result-idempotence`: the semantic result tools (`paperclip_finish`, `paperclip_block`) are
//! answered by one binding. The model reports a result, reports a canonically identical one again
//! under a new call id, then a different one; the driver acknowledges the first
//! (`first-acknowledged`), acknowledges the identical retry — the first binding kept
//! (`identical-retry-acknowledged`) — and refuses the changed one (`conflict-refused`); the
//! session goes on. What each call carried is what the model sent (`model.tool-call`, matched to
//! the `item/tool/call` request by call id); an answer is an acknowledgement when its result
//! says `success: true`, and a refusal when it says `success: false` or is an error.

use super::super::protocol::{incomplete, pass, Exchange, ProtocolCase};
use crate::events::Capability;
use crate::events::{Body, Kind, ModelToolCall, Source};
use crate::grade::{documented, fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};
use serde_json::Value;

const RULE: &str = "runner contract, semantic completion: the first valid result is proposed; a canonically identical retry under a new call id is acknowledged (the first binding kept), a changed one rejected";
const RESULT_TOOLS: &[&str] = &["paperclip_finish", "paperclip_block"];

pub(crate) struct IdempotentResult {
    ex: Exchange,
    calls: Vec<(u64, ModelToolCall)>,
}

impl IdempotentResult {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
            calls: Vec::new(),
        }
    }
}

/// One result call as the driver was asked it and answered it.
struct Answered {
    seq: u64,
    call_id: String,
    tool: String,
    arguments: Value,
    /// `Some(true)`: acknowledged; `Some(false)`: refused; `None`: the answer cannot be read.
    acknowledged: Option<bool>,
}

impl IdempotentResult {
    fn answered(&self) -> Vec<Answered> {
        let mut out = Vec::new();
        for (seq, request) in &self.ex.server_requests {
            if request.method != "item/tool/call" {
                continue;
            }
            let Some(call_id) = request.item_id.as_deref() else {
                continue;
            };
            let Some((_, call)) = self.calls.iter().find(|(_, c)| c.call_id == call_id) else {
                continue;
            };
            if !RESULT_TOOLS.contains(&call.name.as_str()) {
                continue;
            }
            let Some((_, answer)) = self.ex.answers_to(request).next() else {
                continue;
            };
            let acknowledged = match &answer.error {
                Some(_) => Some(false),
                None => answer
                    .result_excerpt
                    .as_deref()
                    .and_then(|text| serde_json::from_str::<Value>(text).ok())
                    .and_then(|result| result["success"].as_bool()),
            };
            out.push(Answered {
                seq: *seq,
                call_id: call_id.to_string(),
                tool: call.name.clone(),
                arguments: serde_json::from_str(&call.arguments).unwrap_or(Value::Null),
                acknowledged,
            });
        }
        out
    }
}

impl ProtocolCase for IdempotentResult {
    fn exchange(&self) -> &Exchange {
        &self.ex
    }

    fn exchange_mut(&mut self) -> &mut Exchange {
        &mut self.ex
    }

    fn needs(&self) -> &[Capability] {
        &[Capability::DynamicTools]
    }

    fn wants_more(&self, kind: Kind) -> bool {
        kind == Kind::ModelToolCall
    }

    fn observe_more(&mut self, seq: u64, source: Source, body: &Body) {
        if let Body::ModelToolCall(call) = body {
            if documented(source, body) {
                self.calls.push((seq, call.clone()));
            }
        }
    }

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let calls = self.answered();
        let at = |c: &Answered, what: &str| {
            EvidenceRef::at(
                c.seq,
                &format!("{} {} ({what}): {}", c.tool, c.call_id, c.arguments),
            )
        };
        let Some(first) = calls.first() else {
            return incomplete(
                "the model reported no result through the result tools that the driver answered, so the case shows nothing".into(),
                vec![terminal.evidence()],
            );
        };
        if let Some(unreadable) = calls.iter().find(|c| c.acknowledged.is_none()) {
            return incomplete(
                format!("the driver's answer to {} {} cannot be read as an acknowledgement or a refusal (no `success` in its result excerpt)", unreadable.tool, unreadable.call_id),
                vec![at(unreadable, "answer unreadable")],
            );
        }
        if first.acknowledged != Some(true) {
            return fail(
                "first-acknowledged",
                format!(
                    "the driver refused the model's first result ({}): {RULE}",
                    first.arguments
                ),
                vec![at(first, "refused")],
            );
        }
        let same = |c: &&Answered| c.tool == first.tool && c.arguments == first.arguments;
        let later = &calls[1..];
        let Some(retry) = later.iter().find(|c| same(c) && c.call_id != first.call_id) else {
            return incomplete(
                "the model never retried its first result under a new call id, so the case shows nothing about a retry".into(),
                vec![at(first, "first")],
            );
        };
        if retry.acknowledged != Some(true) {
            return fail(
                "identical-retry-acknowledged",
                format!("the model reported the same result again under the new call id {} and the driver refused it: {RULE}", retry.call_id),
                vec![at(first, "first"), at(retry, "retry refused")],
            );
        }
        let Some(conflict) = later.iter().find(|c| !same(c)) else {
            return incomplete(
                "the model never reported a changed result, so the case shows nothing about a conflict".into(),
                vec![at(first, "first"), at(retry, "retry")],
            );
        };
        if conflict.acknowledged != Some(false) {
            return fail(
                "conflict-refused",
                format!("the model reported a changed result ({}) after the first ({}) and the driver acknowledged it: two bindings for one run — {RULE}", conflict.arguments, first.arguments),
                vec![at(first, "first"), at(conflict, "conflict acknowledged")],
            );
        }
        let what = "the driver acknowledged the first result and its identical retry under a new call id, and refused the changed one";
        match self.ex.session_went_on() {
            Ok(went_on) => {
                let mut evidence = vec![
                    at(first, "acknowledged"),
                    at(retry, "acknowledged"),
                    at(conflict, "refused"),
                ];
                evidence.extend(went_on.evidence());
                pass(format!("{what}; {}", went_on.describe()), evidence)
            }
            Err(fault) => fault.verdict(what, terminal),
        }
    }
}
