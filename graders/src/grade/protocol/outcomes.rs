//! `protocol-turn-outcomes` (obligation 3: an `error` with `willRetry: true` is not terminal; a
//! failed or interrupted turn is not success) and the classified failures of
//! `protocol-control` (obligation 7: an error answer to `initialize`, `turn/start` or
//! `thread/resume`, or a request never answered, ends the run on its own, never as success and
//! never as a hang). All need the driver's declared outcome (its exit status) to say more than
//! "it ended".
//!
//! Turn outcomes, checks:
//! - evidence (never `fail`): the case's turn ending is on the wire — a `turn.error` with
//!   `will_retry: true` then the driver's own turn completed, or the driver's own turn ended
//!   `failed` / `interrupted`; else `incomplete`;
//! - `not-terminal` (retryable error): the driver did not close the app-server's stdin between
//!   the retried error and its turn's completion, and its turn completed;
//! - `ended-on-its-own`: not killed at the run's bound, not by a signal;
//! - `exit-status`: 0 after a completed turn; non-zero after a failed or interrupted one.
//!
//! Classified failures, checks: evidence (the error answer, or the request never answered),
//! `ended-on-its-own`, and `exit-status` (non-zero, when the outcome is declared).

use super::{incomplete, pass, End, Exchange, ProtocolCase, SessionFault};
use crate::events::Capability;
use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnOutcomeCase {
    /// `error {willRetry: true}` mid-turn, then the turn completes: success.
    RetryableError,
    /// `error {willRetry: false}`, then `turn/completed {status: failed}`: not success.
    FailedTurn,
    /// The server ends the turn `interrupted` on its own: not success.
    InterruptedTurn,
    /// `turn/completed {status: failed}` with no `error` before: not success.
    FailedTurnNoError,
}

pub(crate) struct TurnOutcome {
    case: TurnOutcomeCase,
    ex: Exchange,
}

impl TurnOutcome {
    pub(crate) fn new(case: TurnOutcomeCase) -> Self {
        Self {
            case,
            ex: Exchange::default(),
        }
    }

    fn retryable(&self, terminal: &Terminal) -> Verdict {
        let ex = &self.ex;
        let retried = ex.turn_errors.iter().find(|(_, e)| {
            e.will_retry == Some(true) && e.turn_id.as_deref().is_none_or(|t| ex.is_own_turn(t))
        });
        let Some((error_seq, error)) = retried else {
            return incomplete(
                "the app-server sent no `error` with willRetry: true during the driver's turn, so the case shows nothing".into(),
                vec![terminal.evidence()],
            );
        };
        let context = format!(
            "after the app-server's `error` \"{}\" with willRetry: true (the server retries on its own; ErrorNotification.willRetry)",
            error.message
        );
        let turns = ex.own_turns();
        if let Some(turn) = turns.last() {
            let done = ex.completion_of(turn.id).map(|(seq, _)| seq);
            let closed = ex
                .stdin_closed_before(turn.launch, done.unwrap_or(u64::MAX))
                .filter(|closed| *closed > *error_seq);
            if let Some(closed) = closed {
                return fail(
                    "not-terminal",
                    format!(
                        "{context}, the driver closed the app-server's stdin before its turn {} completed: it took an error the server retries for the end of the turn",
                        turn.id
                    ),
                    vec![
                        EvidenceRef::at(*error_seq, &error.message),
                        EvidenceRef::at(closed, "protocol.stdin-closed"),
                    ],
                );
            }
        }
        match ex.session_went_on() {
            Ok(went_on) => {
                let mut evidence = vec![EvidenceRef::at(*error_seq, &error.message)];
                evidence.extend(went_on.evidence());
                pass(
                    format!("{context}, the driver kept its turn: {}", went_on.describe()),
                    evidence,
                )
            }
            Err(SessionFault::NotCompleted { turn, seq }) => fail(
                "not-terminal",
                format!(
                    "{context}, the driver's turn {turn} never completed on the wire (the run ended {}): the driver stopped at an error that was not terminal",
                    terminal.ending_with_cause()
                ),
                vec![EvidenceRef::at(*error_seq, &error.message), EvidenceRef::at(seq, turn.as_str())],
            ),
            Err(fault) => fault.verdict(&context, terminal),
        }
    }

    fn unsuccessful(&self, status: &str, terminal: &Terminal) -> Verdict {
        let ex = &self.ex;
        let ended = ex.own_turns().into_iter().find_map(|turn| {
            ex.completion_of(turn.id)
                .filter(|(_, done)| done.status == status)
                .map(|(seq, done)| (seq, done.clone()))
        });
        let Some((done_seq, done)) = ended else {
            return incomplete(
                format!(
                    "no turn of the driver ended `{status}` on the wire (the run ended {}), so the case shows nothing",
                    terminal.ending_with_cause()
                ),
                vec![terminal.evidence()],
            );
        };
        let what = match (status, self.case) {
            (_, TurnOutcomeCase::FailedTurn) => {
                "after an `error` with willRetry: false, the driver's turn ended `failed`"
            }
            ("interrupted", _) => "the app-server ended the driver's turn `interrupted` on its own",
            _ => "the driver's turn ended `failed` (turn.error set, no `error` notification before it)",
        };
        let evidence = vec![EvidenceRef::at(
            done_seq,
            &format!(
                "turn.completed {} {} {}",
                done.turn_id,
                done.status,
                done.error.as_deref().unwrap_or("")
            ),
        )];
        match ex.end() {
            End::OnItsOwn { code: 0, seq } => fail(
                "exit-status",
                format!(
                    "{what} ({}), yet the driver exited with status 0: it reported an unsuccessful turn as success; with `outcome = \"exit-status\"` status 0 says the task succeeded (TurnCompletedNotification: turn.status `{status}`)",
                    done.turn_id
                ),
                [evidence, vec![EvidenceRef::at(seq, "driver.ended exited 0")]].concat(),
            ),
            End::OnItsOwn { code, seq } => pass(
                format!(
                    "{what} ({}), and the driver ended on its own with status {code}: not success",
                    done.turn_id
                ),
                [evidence, vec![EvidenceRef::at(seq, &format!("driver.ended exited {code}"))]].concat(),
            ),
            End::Not { detail, evidence } => {
                End::failure(&detail, evidence, &format!("{what} ({})", done.turn_id))
            }
            End::Unknown(verdict) => verdict,
        }
    }
}

impl ProtocolCase for TurnOutcome {
    fn needs(&self) -> &[Capability] {
        &[Capability::Outcome]
    }

    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        match self.case {
            TurnOutcomeCase::RetryableError => self.retryable(terminal),
            TurnOutcomeCase::FailedTurn | TurnOutcomeCase::FailedTurnNoError => {
                self.unsuccessful("failed", terminal)
            }
            TurnOutcomeCase::InterruptedTurn => self.unsuccessful("interrupted", terminal),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureCase {
    /// `initialize` answered with an error.
    InitializeError,
    /// `turn/start` answered with an error.
    TurnStartError,
    /// `thread/resume` answered with an error ("no rollout found").
    ResumeError,
    /// `thread/start` never answered.
    NoAnswer,
}

impl FailureCase {
    fn method(self) -> &'static str {
        match self {
            FailureCase::InitializeError => "initialize",
            FailureCase::TurnStartError => "turn/start",
            FailureCase::ResumeError => "thread/resume",
            FailureCase::NoAnswer => "thread/start",
        }
    }
}

/// A run the app-server refuses (or leaves unanswered) must end on its own, as a failure.
pub(crate) struct ClassifiedFailure {
    case: FailureCase,
    ex: Exchange,
}

impl ClassifiedFailure {
    pub(crate) fn new(case: FailureCase) -> Self {
        Self {
            case,
            ex: Exchange::default(),
        }
    }

    /// What the app-server did to the driver's request, as evidence; `None` when it did not.
    fn refusal(&self) -> Option<(String, EvidenceRef)> {
        let method = self.case.method();
        let ex = &self.ex;
        let requests = ex
            .client_requests
            .iter()
            .filter(|(_, r)| r.method == method);
        for (seq, request) in requests {
            match (self.case, ex.answer_of(request)) {
                (FailureCase::NoAnswer, None) => {
                    return Some((
                        format!(
                            "the app-server never answered the driver's `{method}` (id {})",
                            request.id
                        ),
                        EvidenceRef::at(*seq, &format!("{method} id {}", request.id)),
                    ))
                }
                (FailureCase::NoAnswer, Some(_)) => {}
                (_, Some((answer_seq, answer))) => {
                    if let Some(error) = &answer.error {
                        return Some((
                            format!(
                                "the app-server answered the driver's `{method}` (id {}) with the error {}: {}",
                                request.id,
                                error.code.map_or("-".into(), |c| c.to_string()),
                                error.message
                            ),
                            EvidenceRef::at(answer_seq, &error.message),
                        ));
                    }
                }
                (_, None) => {}
            }
        }
        None
    }
}

impl ProtocolCase for ClassifiedFailure {
    fn needs(&self) -> &[Capability] {
        match self.case {
            FailureCase::ResumeError => &[Capability::Resume],
            _ => &[],
        }
    }

    /// A refused `initialize` or an unanswered `thread/start` never opens a session.
    fn needs_session(&self) -> bool {
        false
    }

    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let Some((what, evidence)) = self.refusal() else {
            return incomplete(
                format!(
                    "the wire shows no {} to the driver's `{}`, so the case shows nothing",
                    if self.case == FailureCase::NoAnswer {
                        "unanswered request"
                    } else {
                        "error answer"
                    },
                    self.case.method()
                ),
                vec![terminal.evidence()],
            );
        };
        match self.ex.end() {
            End::OnItsOwn { code: 0, seq } if self.ex.outcome_declared() => fail(
                "exit-status",
                format!("{what}, yet the driver exited with status 0: it reported a run that could not proceed as success; with `outcome = \"exit-status\"` the failure must be a non-zero status"),
                vec![evidence, EvidenceRef::at(seq, "driver.ended exited 0")],
            ),
            End::OnItsOwn { code, seq } => pass(
                format!("{what}, and the driver ended on its own with status {code} (a classified failure, not a hang)"),
                vec![evidence, EvidenceRef::at(seq, &format!("driver.ended exited {code}"))],
            ),
            End::Not { detail, evidence: ended } => {
                let mut verdict = End::failure(&detail, ended, &what);
                verdict.evidence.insert(0, evidence);
                verdict
            }
            End::Unknown(verdict) => verdict,
        }
    }
}
