//! `protocol-control` (obligation 7): interrupting and steering a live turn, and recovering
//! from an app-server crash. Each needs the driver's declaration of how it is told to do so.
//!
//! - `interrupt`: `interrupt-sent` (the driver sent `turn/interrupt` at all),
//!   `interrupt-is-request` (as a request, with an id: a notification is answered by nothing),
//!   `interrupt-ids` (`threadId` and `turnId` of the live turn), `interrupt-answered` (the
//!   app-server did not refuse it), `session-kept` (neither stdin closed nor the app-server gone
//!   before the interrupted turn's `turn/completed`), `ended-on-its-own`.
//! - `steer`: `steer-sent`, `steer-is-request`, `steer-expected-turn-id` (`expectedTurnId` is the
//!   live turn: the schema requires it and the real Codex refuses a steer without it),
//!   `steer-answered`, then the session goes on.
//! - `crash-resume`: evidence (the app-server went away on its own while the driver's turn was
//!   open), `relaunched` (a later launch), `resumed-exact-thread` (`thread/resume` of the crashed
//!   session's thread, not a new thread), `recovery-outcome` (a resume answered with another
//!   thread id, or an error, must end the run as a failure — never go on there, never exit 0
//!   with a declared outcome; a resume of the same thread goes on to a completed turn).

use super::{incomplete, pass, End, Exchange, ProtocolCase};
use crate::events::Capability;
use crate::events::ClientRequest;
use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};

fn request_evidence(seq: u64, r: &ClientRequest) -> EvidenceRef {
    EvidenceRef::at(
        seq,
        &format!(
            "{} id {} threadId {} turnId {} expectedTurnId {}",
            r.method,
            r.id,
            r.thread_id.as_deref().unwrap_or("-"),
            r.turn_id.as_deref().unwrap_or("-"),
            r.expected_turn_id.as_deref().unwrap_or("-")
        ),
    )
}

/// The driver's first request of `method` and the live turn it was sent in; else the failure
/// `<what>-sent` (never sent), `<what>-is-request` (sent as a notification), or `incomplete`
/// (no turn of the driver was running).
fn live_turn_request<'a>(
    ex: &'a Exchange,
    method: &str,
    what: &str,
    schema: &str,
    terminal: &Terminal,
) -> Result<(u64, &'a ClientRequest, &'a str), Verdict> {
    if let Some((seq, request)) = ex.client_requests.iter().find(|(_, r)| r.method == method) {
        let live = ex.live_own_turns_at(*seq);
        return match live.first() {
            Some(turn) => Ok((*seq, request, turn)),
            None => Err(incomplete(
                format!("the driver sent {method} when none of its turns was running, so the case shows nothing about a live turn"),
                vec![request_evidence(*seq, request)],
            )),
        };
    }
    if let Some((seq, _)) = ex
        .client_notifications
        .iter()
        .find(|(_, n)| n.method == method)
    {
        return Err(fail(
            &format!("{what}-is-request"),
            format!("the driver sent `{method}` as a notification (no id): the app-server answers nothing and acts on nothing it cannot answer; `{method}` is a request ({schema})"),
            vec![EvidenceRef::at(*seq, &format!("notification {method}"))],
        ));
    }
    Err(fail(
        &format!("{what}-sent"),
        format!(
            "the harness asked the driver (as it declares) to {what} its running turn, and the driver never sent `{method}` (the run ended {})",
            terminal.ending_with_cause()
        ),
        vec![terminal.evidence()],
    ))
}

pub(crate) struct Interrupt {
    ex: Exchange,
}

impl Interrupt {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
        }
    }
}

impl ProtocolCase for Interrupt {
    fn needs(&self) -> &[Capability] {
        &[Capability::Interrupt]
    }

    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let ex = &self.ex;
        let schema = "ClientRequest.json#turn/interrupt, TurnInterruptParams {threadId, turnId}";
        let (seq, request, turn) =
            match live_turn_request(ex, "turn/interrupt", "interrupt", schema, terminal) {
                Ok(found) => found,
                Err(v) => return v,
            };
        let threads = ex.own_threads();
        let own_thread = threads
            .iter()
            .any(|(_, a)| a.thread_id.as_deref() == request.thread_id.as_deref());
        if request.thread_id.is_none() || !own_thread || request.turn_id.as_deref() != Some(turn) {
            let live_thread = threads
                .last()
                .and_then(|(_, a)| a.thread_id.as_deref())
                .unwrap_or("-");
            return fail(
                "interrupt-ids",
                format!(
                    "the driver's turn/interrupt carried threadId {} and turnId {}, while its live turn is {turn} on thread {live_thread}: a turn/interrupt without the live ids interrupts nothing ({schema}; observed: a driver that omitted threadId never interrupted)",
                    request.thread_id.as_deref().unwrap_or("(none)"),
                    request.turn_id.as_deref().unwrap_or("(none)")
                ),
                vec![request_evidence(seq, request)],
            );
        }
        let Some((answer_seq, answer)) = ex.answer_of(request) else {
            return incomplete(
                "the app-server never answered the driver's turn/interrupt, so the case shows nothing about what the driver did next".into(),
                vec![request_evidence(seq, request)],
            );
        };
        if let Some(error) = &answer.error {
            return fail(
                "interrupt-answered",
                format!(
                    "the app-server refused the driver's turn/interrupt: {}",
                    error.message
                ),
                vec![
                    request_evidence(seq, request),
                    EvidenceRef::at(answer_seq, &error.message),
                ],
            );
        }
        let Some((done_seq, done)) = ex.completion_of(turn) else {
            return incomplete(
                format!("turn {turn} never completed after the interrupt, so the case cannot show the session kept"),
                vec![request_evidence(seq, request), terminal.evidence()],
            );
        };
        let launch = request.launch;
        let dropped = ex
            .stdin_closed_before(launch, done_seq)
            .filter(|closed| *closed > seq)
            .or_else(|| {
                ex.app_server_gone_before(launch, done_seq)
                    .filter(|gone| *gone > seq)
            });
        if let Some(dropped) = dropped {
            return fail(
                "session-kept",
                format!("after its turn/interrupt the driver closed or lost the app-server before the interrupted turn {turn} completed: an interrupt ends the turn, not the session (the app-server answers it with turn/completed status `interrupted`)"),
                vec![request_evidence(seq, request), EvidenceRef::at(dropped, "stdin closed / app-server gone")],
            );
        }
        if let Some(v) = ex.end().verdict("the driver interrupted its turn") {
            return v;
        }
        pass(
            format!(
                "the driver sent turn/interrupt as a request with its live thread and turn {turn}, the app-server accepted it, the turn ended `{}` with the session kept, and the driver then ended on its own",
                done.status
            ),
            vec![
                request_evidence(seq, request),
                EvidenceRef::at(answer_seq, "answered"),
                EvidenceRef::at(done_seq, &format!("turn.completed {turn} {}", done.status)),
            ],
        )
    }
}

pub(crate) struct Steer {
    ex: Exchange,
}

impl Steer {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
        }
    }
}

impl ProtocolCase for Steer {
    fn needs(&self) -> &[Capability] {
        &[Capability::Steer]
    }

    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let ex = &self.ex;
        let schema = "ClientRequest.json#turn/steer, TurnSteerParams {threadId, input, expectedTurnId} all required";
        let (seq, request, turn) =
            match live_turn_request(ex, "turn/steer", "steer", schema, terminal) {
                Ok(found) => found,
                Err(v) => return v,
            };
        if request.expected_turn_id.as_deref() != Some(turn) {
            return fail(
                "steer-expected-turn-id",
                format!(
                    "the driver's turn/steer carried expectedTurnId {}, not its live turn {turn}: the precondition is required and the real Codex refuses a steer without it ({schema}; observed: a steer that passed against a lenient fake and never worked on the real Codex)",
                    request.expected_turn_id.as_deref().unwrap_or("(none)")
                ),
                vec![request_evidence(seq, request)],
            );
        }
        match ex.answer_of(request) {
            None => {
                return incomplete(
                    "the app-server never answered the driver's turn/steer".into(),
                    vec![request_evidence(seq, request)],
                )
            }
            Some((answer_seq, answer)) => {
                if let Some(error) = &answer.error {
                    return fail(
                        "steer-answered",
                        format!(
                            "the app-server refused the driver's turn/steer: {}",
                            error.message
                        ),
                        vec![
                            request_evidence(seq, request),
                            EvidenceRef::at(answer_seq, &error.message),
                        ],
                    );
                }
            }
        }
        match ex.session_went_on() {
            Ok(went_on) => {
                let mut evidence = vec![request_evidence(seq, request)];
                evidence.extend(went_on.evidence());
                pass(
                    format!("the driver steered its live turn {turn} with expectedTurnId set, the app-server accepted it, and the session went on: {}", went_on.describe()),
                    evidence,
                )
            }
            Err(fault) => fault.verdict("the driver steered its turn", terminal),
        }
    }
}

pub(crate) struct CrashResume {
    ex: Exchange,
}

impl CrashResume {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
        }
    }

    /// The resume was refused or landed on another thread: the driver must not go on elsewhere,
    /// and ends its run as a failed recovery.
    fn failed_resume(
        &self,
        thread: &str,
        answer_seq: u64,
        what: String,
        crash_evidence: EvidenceRef,
    ) -> Verdict {
        let ex = &self.ex;
        let went_on_elsewhere = ex.client_requests.iter().find(|(seq, r)| {
            *seq > answer_seq && r.method == "turn/start" && r.thread_id.as_deref() != Some(thread)
        });
        if let Some((seq, r)) = went_on_elsewhere {
            return fail(
                "recovery-outcome",
                format!("{what}, and the driver went on with turn/start on thread {}: a recovery that lands on another thread has lost the session and must fail (observed: openai/codex#34972)", r.thread_id.as_deref().unwrap_or("(none)")),
                vec![crash_evidence, EvidenceRef::at(answer_seq, &what), request_evidence(*seq, r)],
            );
        }
        match ex.end() {
            End::OnItsOwn { code: 0, seq } if ex.outcome_declared() => fail(
                "recovery-outcome",
                format!("{what}, yet the driver exited with status 0: recovery failed, so with `outcome = \"exit-status\"` the run must end non-zero"),
                vec![crash_evidence, EvidenceRef::at(answer_seq, &what), EvidenceRef::at(seq, "driver.ended exited 0")],
            ),
            End::OnItsOwn { code, seq } => pass(
                format!("{what}; the driver ended its run on its own with status {code}, as a failed recovery"),
                vec![crash_evidence, EvidenceRef::at(answer_seq, &what), EvidenceRef::at(seq, &format!("driver.ended exited {code}"))],
            ),
            end => end.verdict(&what).unwrap_or_else(|| incomplete(what, vec![])),
        }
    }
}

impl ProtocolCase for CrashResume {
    fn needs(&self) -> &[Capability] {
        &[Capability::Resume]
    }

    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let ex = &self.ex;
        let crash = ex
            .exits
            .iter()
            .find(|(seq, e)| !e.ended_by_the_driver() && !ex.live_own_turns_at(*seq).is_empty());
        let Some((crash_seq, crash)) = crash else {
            return incomplete(
                "the app-server did not go away on its own while the driver's turn was running, so the case shows nothing about recovery".into(),
                vec![terminal.evidence()],
            );
        };
        let Some(thread) = ex
            .own_threads()
            .into_iter()
            .rfind(|(seq, a)| a.launch == crash.launch && seq < crash_seq)
            .and_then(|(_, a)| a.thread_id.clone())
        else {
            return incomplete(
                "no session of the crashed launch is known, so the thread to resume is not".into(),
                vec![EvidenceRef::at(*crash_seq, "protocol.app-server-exited")],
            );
        };
        let crash_evidence = EvidenceRef::at(
            *crash_seq,
            &format!(
                "launch {} exited on its own (status {}, signal {}) mid-turn",
                crash.launch,
                crash.status.map_or("-".into(), |s| s.to_string()),
                crash.signal.map_or("-".into(), |s| s.to_string())
            ),
        );
        let later = |(seq, r): &&(u64, ClientRequest)| *seq > *crash_seq && r.launch > crash.launch;
        let opened = ex.client_requests.iter().filter(later).find(|(_, r)| {
            matches!(
                r.method.as_str(),
                "thread/resume" | "thread/start" | "thread/fork"
            )
        });
        let Some((resume_seq, resume)) = opened else {
            return fail(
                "relaunched",
                format!("the app-server crashed mid-turn and the driver, which declares `resume = \"relaunch\"`, never relaunched it and resumed thread {thread} (the run ended {})", terminal.ending_with_cause()),
                vec![crash_evidence, terminal.evidence()],
            );
        };
        if resume.method != "thread/resume" || resume.thread_id.as_deref() != Some(&thread) {
            return fail(
                "resumed-exact-thread",
                format!(
                    "after the crash the driver sent `{}` with threadId {}, not thread/resume of its thread {thread}: recovery resumes the exact thread, or the conversation is lost (observed: openai/codex#34972, a resume that forks a new thread id)",
                    resume.method,
                    resume.thread_id.as_deref().unwrap_or("(none)")
                ),
                vec![crash_evidence, request_evidence(*resume_seq, resume)],
            );
        }
        let Some((answer_seq, answer)) = ex.answer_of(resume) else {
            return incomplete(
                "the app-server never answered the driver's thread/resume".into(),
                vec![crash_evidence, request_evidence(*resume_seq, resume)],
            );
        };
        let resumed_other = answer.error.is_none() && answer.thread_id.as_deref() != Some(&thread);
        if answer.error.is_some() || resumed_other {
            let what = match &answer.error {
                Some(e) => format!(
                    "the app-server refused the resume of thread {thread}: {}",
                    e.message
                ),
                None => format!(
                    "the app-server answered the resume of thread {thread} with another thread, {}",
                    answer.thread_id.as_deref().unwrap_or("(none)")
                ),
            };
            return self.failed_resume(&thread, answer_seq, what, crash_evidence);
        }
        match ex.session_went_on() {
            Ok(went_on) if went_on.completed_at > answer_seq => {
                let mut evidence = vec![crash_evidence, request_evidence(*resume_seq, resume)];
                evidence.extend(went_on.evidence());
                pass(
                    format!("after the app-server crashed mid-turn the driver relaunched it, resumed its thread {thread} by id, and the session went on: {}", went_on.describe()),
                    evidence,
                )
            }
            Ok(went_on) => fail(
                "recovery-outcome",
                format!("the driver resumed thread {thread} after the crash, but no turn of it completed after the resume (its last completed turn is {}, before the crash)", went_on.turn),
                vec![crash_evidence, request_evidence(*resume_seq, resume)],
            ),
            Err(fault) => {
                let mut v = fault.verdict(&format!("the driver resumed thread {thread} after the crash"), terminal);
                v.reason = v.reason.replacen("`session-continued`", "`recovery-outcome`", 1);
                v
            }
        }
    }
}
