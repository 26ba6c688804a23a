//! `protocol-server-requests` (obligation 1: every server request is answered, in time, with an
//! answer the release's schema accepts or a JSON-RPC error) and `protocol-safe-default`
//! (obligation 2: a run whose user agreed to nothing grants no escalation).
//!
//! Server requests, checks in order:
//! - `request-sent` (never `fail`): the app-server sent the case's request; else `incomplete`;
//! - `answered`: every such request got exactly one answer with its id, within
//!   [`ANSWER_BOUND_MS`]; no answer went to an id the app-server never asked;
//! - `unknown-answered-with-error` (the unknown method only): the answer is a JSON-RPC error;
//! - `answer-shape`: a `result` validates against the release's `<Type>Response.json` (an
//!   error answer is always allowed); an answer whose shape was not checked (no release known)
//!   is `incomplete`;
//! - `session-continued` / `ended-on-its-own` / `exit-status`: the session goes on (the
//!   driver's own turn completes, the driver then ends on its own; exit 0 with a declared
//!   outcome).
//!
//! An approval or permissions request never sent, where every turn of the driver's own ran
//! under approvalPolicy `never` (sent, or reported by the app-server), is `not-applicable`:
//! Codex asks nothing then, so the case cannot arise for that driver (nor does it relay an MCP
//! server's elicitation then: it declines it itself, observed with Codex 0.169); so is an approval never
//! sent where every such turn ran without a sandbox (`dangerFullAccess`): nothing escalates.
//!
//! Safe default: the same `answered` and `answer-shape`, then `escalation-not-granted` (no
//! answer accepts), `no-write` (the harness's last workspace evidence shows no probe), and the
//! session goes on — or the driver ends on its own with a non-zero status (a classified
//! failure, still no write). With no approval request at all, only a reported approval policy
//! `never` shows the escalation could not be granted.

use super::settings_in_force::{asks_no_approval, runs_unsandboxed};
use super::went_on::{SessionFault, WentOn};
use super::{incomplete, not_applicable, pass, Exchange, ProtocolCase, ANSWER_BOUND_MS};
use crate::events::Capability;
use crate::events::{Body, Kind, SchemaVerdict, ServerRequest, ServerRequestAnswered, Source};
use crate::grade::workspace::{Shown, WorkspaceWatch};
use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};

/// The answer schema of `method` in the run's release, for reasons.
fn answer_schema(ex: &Exchange, method: &str) -> String {
    ex.setup
        .as_ref()
        .and_then(|(_, s)| s.release.as_deref())
        .and_then(|v| crate::protocol::release(v).ok())
        .and_then(|r| r.response_type(method).map(|t| format!("{t}.json")))
        .unwrap_or_else(|| "the release's answer schema".into())
}

fn describe_request(seq: u64, r: &ServerRequest) -> EvidenceRef {
    EvidenceRef::at(
        seq,
        &format!(
            "{} id {} thread {} turn {}",
            r.method,
            r.id,
            r.thread_id.as_deref().unwrap_or("-"),
            r.turn_id.as_deref().unwrap_or("-")
        ),
    )
}

fn describe_answer(seq: u64, a: &ServerRequestAnswered) -> EvidenceRef {
    let what = match (&a.error, &a.result_excerpt) {
        (Some(e), _) => format!(
            "error {}: {}",
            e.code.map_or("-".into(), |c| c.to_string()),
            e.message
        ),
        (None, Some(result)) => format!("result {result}"),
        (None, None) => "result -".into(),
    };
    EvidenceRef::at(
        seq,
        &format!("answer #{} to id {}: {what}", a.answer_number, a.id),
    )
}

/// The one answer to `request`, given within the bound; else the `answered` failure.
fn the_answer<'a>(
    ex: &'a Exchange,
    seq: u64,
    request: &'a ServerRequest,
    terminal: &Terminal,
) -> Result<(u64, &'a ServerRequestAnswered), Verdict> {
    let answers: Vec<&(u64, ServerRequestAnswered)> = ex.answers_to(request).collect();
    let method = &request.method;
    let Some((first_seq, first)) = answers.first() else {
        return Err(fail(
            "answered",
            format!(
                "the app-server sent `{method}` (id {}) during the driver's turn {} and the driver never answered it; every server request must be answered — with a result of {} or a JSON-RPC error — or the turn waits for the answer forever (ServerRequest.json#{method})",
                request.id,
                request.turn_id.as_deref().unwrap_or("-"),
                answer_schema(ex, method),
            ),
            vec![describe_request(seq, request), terminal.evidence()],
        ));
    };
    if let Some((again_seq, again)) = answers.get(1) {
        return Err(fail(
            "answered",
            format!(
                "the driver answered `{method}` (id {}) {} times; a JSON-RPC request gets exactly one response",
                request.id,
                answers.len()
            ),
            vec![
                describe_answer(*first_seq, first),
                describe_answer(*again_seq, again),
            ],
        ));
    }
    let latency = first.latency_ms.unwrap_or(u64::MAX);
    if latency > ANSWER_BOUND_MS {
        return Err(fail(
            "answered",
            format!(
                "the driver answered `{method}` (id {}) after {latency} ms, past the bound of {ANSWER_BOUND_MS} ms: the model's turn stood still waiting for it",
                request.id
            ),
            vec![describe_request(seq, request), describe_answer(*first_seq, first)],
        ));
    }
    Ok((*first_seq, first))
}

/// An answer to an id the app-server never asked, as a failure.
fn unsolicited(ex: &Exchange) -> Option<Verdict> {
    let (seq, answer) = ex.server_answers.iter().find(|(_, a)| a.method.is_none())?;
    Some(fail(
        "answered",
        format!(
            "the driver sent a response to id {}, which the app-server never asked (on launch {}); a JSON-RPC response answers a request of the same id, so this one answers nothing",
            answer.id, answer.launch
        ),
        vec![describe_answer(*seq, answer)],
    ))
}

/// The `answer-shape` check of a result (an error answer passes it).
fn shape(ex: &Exchange, seq: u64, answer: &ServerRequestAnswered) -> Option<Verdict> {
    let method = answer.method.as_deref().unwrap_or("-");
    match &answer.schema {
        None | Some(SchemaVerdict::Valid) => None,
        Some(SchemaVerdict::Invalid {
            error,
            path,
            schema,
        }) => Some(fail(
            "answer-shape",
            format!(
                "the driver answered `{method}` (id {}) with {}, which {schema} rejects: {error} (at {}); the app-server cannot read such an answer (observed: an answer it cannot deserialise is logged and the item fails)",
                answer.id,
                answer.result_excerpt.as_deref().unwrap_or("-"),
                if path.is_empty() { "the top level".to_string() } else { format!("`{path}`") }
            ),
            vec![describe_answer(seq, answer)],
        )),
        Some(SchemaVerdict::Unchecked { why }) => Some(incomplete(
            format!(
                "check `answer-shape` could not be decided: the driver's answer to `{method}` (id {}) was not checked against {}: {why}",
                answer.id,
                answer_schema(ex, method)
            ),
            vec![describe_answer(seq, answer)],
        )),
    }
}

/// `protocol-server-requests/<case>`: one server request method.
pub(crate) struct ServerRequestAnswer {
    method: &'static str,
    /// A method no release has: only a JSON-RPC error is a right answer.
    unknown: bool,
    needs: &'static [Capability],
    ex: Exchange,
}

impl ServerRequestAnswer {
    pub(crate) fn new(method: &'static str, needs: &'static [Capability]) -> Self {
        Self {
            method,
            unknown: false,
            needs,
            ex: Exchange::default(),
        }
    }

    pub(crate) fn unknown(method: &'static str) -> Self {
        Self {
            unknown: true,
            ..Self::new(method, &[])
        }
    }
}

impl ServerRequestAnswer {
    /// `not-applicable` when the request was never sent because of what the driver chose for
    /// every turn of its own: approvalPolicy `never` (no approval nor permissions request) or
    /// no sandbox (no approval: nothing escalates).
    fn never_arose(&self, terminal: &Terminal) -> Option<Verdict> {
        let ex = &self.ex;
        let approval = is_approval(self.method);
        let asks = approval || self.method == PERMISSIONS_APPROVAL;
        let elicits = self.method == MCP_ELICITATION;
        let (choice, mut evidence) = if let Some((origin, evidence)) =
            asks.then(|| asks_no_approval(ex)).flatten()
        {
            (format!("approvalPolicy `never` (from {origin}), under which Codex asks the client no approval and refuses on its own (AskForApproval)"), evidence)
        } else if let Some((origin, evidence)) = elicits.then(|| asks_no_approval(ex)).flatten() {
            (format!("approvalPolicy `never` (from {origin}), under which Codex declines an MCP server's elicitation on its own and asks the client nothing (observed with Codex 0.169)"), evidence)
        } else if let Some((origin, evidence)) = approval.then(|| runs_unsandboxed(ex)).flatten() {
            (format!("no sandbox (`dangerFullAccess`, from {origin}), under which nothing escalates: Codex runs the model's command or patch at once (SandboxPolicy)"), evidence)
        } else {
            return None;
        };
        evidence.push(terminal.evidence());
        Some(not_applicable(
            format!(
                "the app-server never sent `{}`: every turn of the driver's own ran under {choice}, a choice the protocol leaves the driver; the case's obligation never arose",
                self.method
            ),
            evidence,
        ))
    }
}

impl ProtocolCase for ServerRequestAnswer {
    fn needs(&self) -> &[Capability] {
        self.needs
    }

    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let ex = &self.ex;
        let requests: Vec<&(u64, ServerRequest)> = ex
            .server_requests
            .iter()
            .filter(|(_, r)| r.method == self.method)
            .collect();
        if requests.is_empty() {
            return self.not_sent(terminal);
        }
        let (mut evidence, answered) = match self.answers(&requests, terminal) {
            Ok(found) => found,
            Err(v) => return v,
        };
        if let Some(v) = unsolicited(ex) {
            return v;
        }
        for (seq, answer) in requests.iter().zip(&answered).map(|((s, _), a)| (*s, *a)) {
            if let Some(v) = shape(ex, seq, answer) {
                return v;
            }
        }
        let went_on = match self.went_on(&answered, terminal) {
            Ok(went_on) => went_on,
            Err(v) => return v,
        };
        let first = answered[0];
        let how = match &first.error {
            Some(e) => format!(
                "a JSON-RPC error ({})",
                e.code.map_or("no code".into(), |c| c.to_string())
            ),
            None => format!("a result {} accepts", answer_schema(ex, self.method)),
        };
        evidence.extend(went_on.evidence());
        pass(
            format!(
                "the driver answered `{}` (id {}) once, in {} ms, with {how}, and the session went on: {}",
                self.method,
                first.id,
                first.latency_ms.unwrap_or_default(),
                went_on.describe()
            ),
            evidence,
        )
    }
}

impl ServerRequestAnswer {
    /// The request never came: `not-applicable` when the driver's own choices kept it from
    /// arising, else `incomplete`.
    fn not_sent(&self, terminal: &Terminal) -> Verdict {
        if let Some(v) = self.never_arose(terminal) {
            return v;
        }
        incomplete(
            format!(
                "the app-server never sent `{}` in this run (the run ended {}), so the case shows nothing about how the driver answers it",
                self.method,
                terminal.ending_with_cause()
            ),
            vec![terminal.evidence()],
        )
    }

    /// The one answer to each of `requests`, with the evidence of both; the unknown method's
    /// answer must be an error.
    fn answers<'a>(
        &'a self,
        requests: &[&'a (u64, ServerRequest)],
        terminal: &Terminal,
    ) -> Result<(Vec<EvidenceRef>, Vec<&'a ServerRequestAnswered>), Verdict> {
        let mut evidence = Vec::new();
        let mut answered = Vec::new();
        for (seq, request) in requests {
            let (answer_seq, answer) = the_answer(&self.ex, *seq, request, terminal)?;
            if self.unknown && answer.error.is_none() {
                return Err(fail(
                    "unknown-answered-with-error",
                    format!(
                        "the driver answered `{}` (id {}), a method no Codex release has, with the result {}; a request the client does not implement must get a JSON-RPC error (-32601, method not found), never a result the server would take as handled",
                        self.method,
                        request.id,
                        answer.result_excerpt.as_deref().unwrap_or("-")
                    ),
                    vec![describe_request(*seq, request), describe_answer(answer_seq, answer)],
                ));
            }
            evidence.push(describe_request(*seq, request));
            evidence.push(describe_answer(answer_seq, answer));
            answered.push(answer);
        }
        Ok((evidence, answered))
    }

    /// How the session went on after the answers: its turn completed — or, when the driver's
    /// own answer interrupted the turn, it went on to the end the driver chose.
    fn went_on(
        &self,
        answered: &[&ServerRequestAnswered],
        terminal: &Terminal,
    ) -> Result<WentOn, Verdict> {
        let ex = &self.ex;
        let interrupting = answered
            .iter()
            .find_map(|a| match (&a.error, a.decision.as_deref()) {
                (Some(_), _) if is_approval(self.method) => Some("a JSON-RPC error".to_string()),
                (None, Some(d)) if interrupts_turn(d) => Some(format!("`{d}`")),
                _ => None,
            });
        match (ex.session_went_on(), interrupting) {
            (Ok(went_on), _) => Ok(went_on),
            // The driver's own answer ended its turn: the session went on to the end it chose.
            (Err(SessionFault::EndedOtherwise { status, .. }), Some(decision))
                if status == "interrupted" =>
            {
                ex.session_went_on_interrupted().map_err(|fault| {
                    fault.verdict(
                        &format!(
                            "the driver answered `{}` with {decision}, after which the app-server interrupted the turn",
                            self.method
                        ),
                        terminal,
                    )
                })
            }
            (Err(fault), _) => {
                Err(fault.verdict(&format!("the driver answered `{}`", self.method), terminal))
            }
        }
    }
}

/// Decisions whose schema says the turn ends with the refusal: `cancel` ("the turn will also be
/// immediately interrupted", CommandExecutionApprovalDecision, FileChangeApprovalDecision) and
/// the legacy `abort` (ReviewDecision).
fn interrupts_turn(decision: &str) -> bool {
    matches!(decision, "cancel" | "abort")
}

/// The approval requests, whose JSON-RPC error answer is a refusal the app-server may end the
/// turn on (the fake interrupts it, as for `cancel`).
fn is_approval(method: &str) -> bool {
    matches!(
        method,
        "item/commandExecution/requestApproval"
            | "item/fileChange/requestApproval"
            | "execCommandApproval"
            | "applyPatchApproval"
    )
}

/// The permissions request: granted permissions, not a decision; Codex asks it under the same
/// approval policies as the approvals.
const PERMISSIONS_APPROVAL: &str = "item/permissions/requestApproval";
/// Relayed from an MCP server; Codex 0.169 never relays it under approvalPolicy `never`.
const MCP_ELICITATION: &str = "mcpServer/elicitation/request";

/// Decisions that grant an approval (v2 `accept…`, legacy `approved…`).
pub(super) fn grants(decision: &str) -> bool {
    decision.starts_with("accept") || decision.starts_with("approved")
}

/// `protocol-safe-default/<case>`: an escalation nobody agreed to is not granted.
pub(crate) struct SafeDefault {
    method: &'static str,
    ex: Exchange,
    workspace: WorkspaceWatch,
}

impl SafeDefault {
    pub(crate) fn new(method: &'static str) -> Self {
        Self {
            method,
            ex: Exchange::default(),
            workspace: WorkspaceWatch::default(),
        }
    }

    /// The escalation's answers: `Ok` when none grants; the first failing check otherwise.
    fn refusals(&self, terminal: &Terminal) -> Result<Vec<EvidenceRef>, Verdict> {
        let ex = &self.ex;
        let mut evidence = Vec::new();
        for (seq, request) in ex
            .server_requests
            .iter()
            .filter(|(_, r)| r.method == self.method)
        {
            let (answer_seq, answer) = the_answer(ex, *seq, request, terminal)?;
            if let Some(decision) = answer.decision.as_deref().filter(|d| grants(d)) {
                return Err(fail(
                    "escalation-not-granted",
                    format!(
                        "the driver answered the escalation `{}` (id {}) with `{decision}`: it granted what the user never agreed to. The run is read-only and its task grants nothing, so the safe answer is `decline` or `cancel` (or a JSON-RPC error); {} documents `decline` as \"the user denied\"",
                        self.method,
                        request.id,
                        answer_schema(ex, self.method)
                    ),
                    vec![describe_request(*seq, request), describe_answer(answer_seq, answer)],
                ));
            }
            if let Some(v) = shape(ex, answer_seq, answer) {
                return Err(v);
            }
            evidence.push(describe_answer(answer_seq, answer));
        }
        if let Some(v) = unsolicited(ex) {
            return Err(v);
        }
        if evidence.is_empty() {
            let never = ex.approval_policy.as_ref().and_then(|p| p.as_str()) == Some("never");
            if !never {
                return Err(incomplete(
                    format!(
                        "the app-server never sent `{}` and reported no approval policy `never`, so the run shows nothing about whether the driver would grant the escalation",
                        self.method
                    ),
                    vec![terminal.evidence()],
                ));
            }
        }
        Ok(evidence)
    }
}

impl ProtocolCase for SafeDefault {
    exchange_in_field_ex!();

    fn wants_more(&self, kind: Kind) -> bool {
        WorkspaceWatch::wants(kind)
    }

    fn observe_more(&mut self, seq: u64, source: Source, body: &Body) {
        self.workspace.observe(seq, source, body);
    }

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let mut evidence = match self.refusals(terminal) {
            Ok(evidence) => evidence,
            Err(v) => return v,
        };
        if let Some((seq, probe)) = &self.workspace.existing_probe {
            return fail(
                "no-write",
                format!("a probe file the escalation would have written is in the workspace ({probe}): the write reached the workspace although the user agreed to nothing"),
                vec![EvidenceRef::at(*seq, probe)],
            );
        }
        match &self.workspace.last {
            Some((seq, Shown::NoProbe)) => {
                evidence.push(EvidenceRef::at(*seq, "workspace.evidence: no probe file"))
            }
            Some((seq, Shown::Unusable(why))) => {
                return incomplete(
                    format!("check `no-write` could not be decided: {why}"),
                    vec![EvidenceRef::at(*seq, why)],
                )
            }
            Some((seq, Shown::Probe)) => {
                return fail(
                    "no-write",
                    "the harness found a probe file in the workspace after the run",
                    vec![EvidenceRef::at(*seq, "workspace.evidence: probe exists")],
                )
            }
            None => return incomplete(
                "check `no-write` could not be decided: the harness recorded no workspace evidence"
                    .into(),
                vec![terminal.evidence()],
            ),
        }
        match self.ex.session_went_on() {
            Ok(went_on) => {
                evidence.extend(went_on.evidence());
                pass(
                    format!(
                        "the driver granted no escalation (`{}` declined, cancelled or refused), no write reached the workspace, and the session went on: {}",
                        self.method,
                        went_on.describe()
                    ),
                    evidence,
                )
            }
            Err(fault) => match self.ex.end() {
                // A classified failure: the driver ended its run itself, saying it failed.
                super::End::OnItsOwn { seq, code } if code != 0 => {
                    evidence.push(EvidenceRef::at(seq, &format!("driver.ended exited {code}")));
                    pass(
                        format!(
                            "the driver granted no escalation (`{}`), no write reached the workspace, and it ended its run itself with status {code} (a classified failure)",
                            self.method
                        ),
                        evidence,
                    )
                }
                _ => fault.verdict("the driver refused the escalation", terminal),
            },
        }
    }
}
