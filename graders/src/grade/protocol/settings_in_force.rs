//! The thread settings a turn of the driver's own ran with, from the driver's requests: Codex
//! takes a thread setting from the last request that set it (`turn/start` and
//! `thread/settings/update` set it "for this turn and subsequent turns", TurnStartParams /
//! ThreadSettingsUpdateParams), else from the request that opened the thread — as its answer
//! reports it — else from the launch.

use super::Exchange;
use crate::events::{ClientRequest, ClientRequestAnswered, SettingsSent};
use crate::verdict::EvidenceRef;
use serde_json::Value;

pub(super) const TURN_START: &str = "turn/start";
const SETTINGS_UPDATE: &str = "thread/settings/update";
const OPENERS: &[&str] = &["thread/start", "thread/resume", "thread/fork"];

/// Where a turn's setting came from.
pub(super) enum Origin<'a> {
    /// A request that set it.
    Sent(u64, &'a ClientRequest),
    /// The app-server's answer to the request that opened the thread.
    Reported(u64, &'a ClientRequestAnswered),
    /// Nothing set it: the launch's (its folder, its configuration, Codex's default).
    Launch,
}

impl Origin<'_> {
    pub(super) fn describe(&self) -> String {
        match self {
            Origin::Sent(_, r) => format!("its `{}` (request {})", r.method, r.id),
            Origin::Reported(_, a) => format!(
                "the app-server's answer to its `{}` (request {})",
                a.method, a.id
            ),
            Origin::Launch => "the launch (no request set it)".into(),
        }
    }

    pub(super) fn evidence(&self, what: &str) -> Vec<EvidenceRef> {
        match self {
            Origin::Sent(seq, _) | Origin::Reported(seq, _) => vec![EvidenceRef::at(*seq, what)],
            Origin::Launch => Vec::new(),
        }
    }
}

/// A turn of the driver's own and the requests that shaped its thread.
pub(super) struct TurnRequests<'a> {
    pub turn: &'a str,
    /// Its `turn/start`.
    pub seq: u64,
    /// The requests on its thread, from the one that opened it (last first), up to the
    /// turn's own `turn/start`.
    pub chain: Vec<(u64, &'a ClientRequest)>,
    /// The thread's opening request and its answer.
    pub opener: Option<(u64, &'a ClientRequest, u64, &'a ClientRequestAnswered)>,
    pub launch: u64,
}

impl<'a> TurnRequests<'a> {
    /// The last setting `pick` finds: in a request on the thread, else in the opener's answer
    /// (`reported`), else in the opener's request.
    pub(super) fn setting<T>(
        &self,
        sent: impl Fn(&'a ClientRequest) -> Option<T>,
        reported: impl Fn(&'a ClientRequestAnswered) -> Option<T>,
    ) -> Option<(T, Origin<'a>)> {
        for (seq, request) in &self.chain {
            if let Some(value) = sent(request) {
                return Some((value, Origin::Sent(*seq, request)));
            }
        }
        let (seq, request, answered_at, answer) = self.opener?;
        if let Some(value) = reported(answer) {
            return Some((value, Origin::Reported(answered_at, answer)));
        }
        sent(request).map(|value| (value, Origin::Sent(seq, request)))
    }
}

pub(super) fn settings(r: &ClientRequest) -> &SettingsSent {
    &r.settings
}

/// An `AskForApproval` by its name: a string value, or the key of an object one
/// (`{"granular": …}`).
pub(super) fn policy_name(policy: &Value) -> String {
    match policy {
        Value::String(s) => s.clone(),
        Value::Object(map) => map.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    }
}

/// The approval policy `turn` ran with, when a request or the opener's answer shows it.
pub(super) fn approval_policy<'a>(turn: &TurnRequests<'a>) -> Option<(String, Origin<'a>)> {
    turn.setting(
        |r| settings(r).approval_policy.as_ref().map(policy_name),
        |a| a.approval_policy.as_ref().map(policy_name),
    )
}

/// `never`: Codex asks the client nothing and refuses what would need an approval (observed,
/// 0.169: no `item/commandExecution/requestApproval`, `item/fileChange/requestApproval` or
/// `item/permissions/requestApproval`; the model is told the escalation, the patch or the
/// permissions were refused).
pub(super) const NEVER: &str = "never";

/// Where `in_force` shows `what` for every turn of the driver's own, the origin of the first's;
/// `None` without a turn of its own, or when `in_force` does not show it for one.
fn every_own_turn<'a>(
    ex: &'a Exchange,
    what: &str,
    in_force: impl Fn(&TurnRequests<'a>) -> Option<Origin<'a>>,
) -> Option<(String, Vec<EvidenceRef>)> {
    let mut first = None;
    for turn in &own_turn_requests(ex) {
        let origin = in_force(turn)?;
        first.get_or_insert_with(|| {
            let mut evidence = origin.evidence(what);
            evidence.push(EvidenceRef::at(turn.seq, TURN_START));
            (origin.describe(), evidence)
        });
    }
    first
}

/// Where every turn of the driver's own ran under approvalPolicy `never` (the app-server asked
/// no approval in the whole run), the origin of the first's.
pub(super) fn asks_no_approval(ex: &Exchange) -> Option<(String, Vec<EvidenceRef>)> {
    every_own_turn(ex, "approvalPolicy `never`", |turn| {
        approval_policy(turn)
            .filter(|(policy, _)| policy == NEVER)
            .map(|(_, origin)| origin)
    })
}

/// The driver's own turns, each with the requests on its thread before it.
pub(super) fn own_turn_requests(ex: &Exchange) -> Vec<TurnRequests<'_>> {
    let thread_of = |r: &ClientRequest| -> Option<String> {
        if OPENERS.contains(&r.method.as_str()) {
            ex.answer_of(r)
                .filter(|(_, a)| a.error.is_none())
                .and_then(|(_, a)| a.thread_id.clone())
        } else {
            r.thread_id.clone()
        }
    };
    ex.own_turns()
        .into_iter()
        .filter_map(|own| {
            let (_, answer) = ex
                .client_answers
                .iter()
                .find(|(seq, _)| *seq == own.answered_at)?;
            let (seq, request) = ex
                .client_requests
                .iter()
                .find(|(_, r)| r.launch == answer.launch && r.id == answer.id)?;
            let thread = request.thread_id.clone();
            let mut chain = Vec::new();
            let mut opener = None;
            for (at, r) in ex.client_requests.iter().rev() {
                if *at > *seq || r.launch != own.launch || thread_of(r) != thread {
                    continue;
                }
                if OPENERS.contains(&r.method.as_str()) {
                    opener = ex
                        .answer_of(r)
                        .map(|(answered_at, a)| (*at, r, answered_at, a));
                    break;
                }
                if r.method == TURN_START || r.method == SETTINGS_UPDATE {
                    chain.push((*at, r));
                }
            }
            Some(TurnRequests {
                turn: own.id,
                seq: *seq,
                chain,
                opener,
                launch: own.launch,
            })
        })
        .collect()
}

/// Where every turn of the driver's own ran without a sandbox — a `dangerFullAccess` policy the
/// turn sent, else the one the thread opener's answer reports — the origin of the first's:
/// nothing escalates then (observed: Codex 0.169 under danger-full-access runs a command the
/// model asked to escalate at once, asking nobody). `None` without a turn of its own, or when
/// one turn's sandbox is another, a permission profile, or not shown.
pub(super) fn runs_unsandboxed(ex: &Exchange) -> Option<(String, Vec<EvidenceRef>)> {
    let full_access =
        |policy: &Value| policy.get("type").and_then(Value::as_str) == Some("dangerFullAccess");
    every_own_turn(ex, "sandbox `dangerFullAccess`", |turn| {
        let overridden = turn
            .chain
            .iter()
            .find(|(_, r)| r.sandbox_policy.is_some() || settings(r).permissions.is_some());
        let (policy, origin) = match overridden {
            Some((seq, r)) => (r.sandbox_policy.as_ref()?, Origin::Sent(*seq, r)),
            None => {
                let (_, _, answered_at, answer) = turn.opener?;
                (
                    answer.sandbox.as_ref()?,
                    Origin::Reported(answered_at, answer),
                )
            }
        };
        full_access(policy).then_some(origin)
    })
}
