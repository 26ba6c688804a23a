//! `protocol-binding` (obligation 4): notifications and requests of another thread or turn, or
//! of a turn already over, do not end or alter the driver's turn; events may come before the
//! `turn/start` answer; the server may start a turn itself.
//!
//! Checks, after the case's evidence is on the wire (else `incomplete`):
//! - `own-turn-awaited` (foreign thread/turn events): the driver neither closed the app-server's
//!   stdin nor sent its next `turn/start` between another turn's `turn/completed` and its own;
//! - `early-events-kept` (events before the answer): a driver that dropped them never sees its
//!   turn end: it is killed at the bound;
//! - `stale-not-accepted` (stale request): an approval request of a finished turn is not
//!   answered `accept`;
//! - then the session goes on (`session-continued`, `ended-on-its-own`, `exit-status`).

use super::{incomplete, pass, Exchange, ProtocolCase, SessionFault};
use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BindingCase {
    ForeignThreadEvents,
    ForeignTurnEvents,
    EventsBeforeAnswer,
    PostTurnEvents,
    ServerStartedTurn,
    StaleRequestAfterTurn,
}

pub(crate) struct Binding {
    case: BindingCase,
    ex: Exchange,
}

impl Binding {
    pub(crate) fn new(case: BindingCase) -> Self {
        Self {
            case,
            ex: Exchange::default(),
        }
    }

    /// The last own turn's id, launch and completion (if any).
    fn own_turn(&self) -> Option<(String, u64, Option<u64>)> {
        let turn = *self.ex.own_turns().last()?;
        let done = self.ex.completion_of(turn.id).map(|(seq, _)| seq);
        Some((turn.id.to_string(), turn.launch, done))
    }

    /// Another turn's `turn/completed` before the driver's own, and whether the driver then
    /// ended or moved on early.
    fn foreign(&self, whose: &str, terminal: &Terminal) -> Result<String, Verdict> {
        let ex = &self.ex;
        let own = self.own_turn();
        let own_done = own
            .as_ref()
            .and_then(|(_, _, done)| *done)
            .unwrap_or(u64::MAX);
        let Some((foreign_seq, foreign)) = ex
            .turns_completed
            .iter()
            .find(|(seq, t)| *seq < own_done && !ex.is_own_turn(&t.turn_id))
        else {
            return Err(incomplete(
                format!("the app-server sent no turn/completed of {whose} before the driver's own turn ended, so the case shows nothing"),
                vec![terminal.evidence()],
            ));
        };
        let context = format!(
            "the app-server sent turn/completed of {whose} (turn {}) while the driver's turn was running",
            foreign.turn_id
        );
        let Some((own_id, launch, _)) = own else {
            return Err(SessionFault::NoTurn.verdict(&context, terminal));
        };
        let closed = ex
            .stdin_closed
            .iter()
            .find(|(seq, c)| c.launch == launch && *seq > *foreign_seq && *seq < own_done);
        if let Some((closed_seq, _)) = closed {
            return Err(fail(
                "own-turn-awaited",
                format!("{context}, and the driver then closed the app-server's stdin before its own turn {own_id} completed: it took another turn's completion for its own; a driver ends on the turn/completed whose thread and turn ids are its own (observed: drivers that end on the first turn/completed of any thread)"),
                vec![
                    EvidenceRef::at(*foreign_seq, &format!("turn.completed {}", foreign.turn_id)),
                    EvidenceRef::at(*closed_seq, "protocol.stdin-closed"),
                ],
            ));
        }
        let early = ex
            .client_requests
            .iter()
            .find(|(seq, r)| r.method == "turn/start" && *seq > *foreign_seq && *seq < own_done);
        if let Some((early_seq, request)) = early {
            return Err(fail(
                "own-turn-awaited",
                format!("{context}, and the driver then sent its next turn/start (id {}) before its own turn {own_id} completed: it took another turn's completion for its own", request.id),
                vec![
                    EvidenceRef::at(*foreign_seq, &format!("turn.completed {}", foreign.turn_id)),
                    EvidenceRef::at(*early_seq, "turn/start"),
                ],
            ));
        }
        Ok(context)
    }

    fn events_before_answer(&self, terminal: &Terminal) -> Result<String, Verdict> {
        let ex = &self.ex;
        let early = ex.own_turns().into_iter().find_map(|turn| {
            ex.completion_of(turn.id)
                .filter(|(done, _)| *done < turn.answered_at)
                .map(|(done, _)| (turn, done))
        });
        let Some((turn, done)) = early else {
            return Err(incomplete(
                "no turn of the driver completed before the app-server's answer to its turn/start, so the case shows nothing".into(),
                vec![terminal.evidence()],
            ));
        };
        let context = format!(
            "the driver got turn {}'s turn/started … turn/completed before the answer to its turn/start — legal: notifications and responses are not ordered",
            turn.id
        );
        if let Err(SessionFault::NotOnItsOwn(super::End::Not { detail, evidence })) =
            ex.session_went_on()
        {
            return Err(fail(
                "early-events-kept",
                format!("{context}. Then {detail}. A driver that drops the events coming before the answer waits for a turn/completed that has already come (observed: openai/codex#41078)"),
                vec![EvidenceRef::at(done, &format!("turn.completed {}", turn.id)), evidence],
            ));
        }
        Ok(context)
    }

    fn post_turn(&self, terminal: &Terminal) -> Result<String, Verdict> {
        let Some((turn, _, Some(done))) = self.own_turn() else {
            return Err(incomplete(
                "the driver's turn never completed, so no event could come after it".into(),
                vec![terminal.evidence()],
            ));
        };
        let stray = self
            .ex
            .items
            .iter()
            .any(|(seq, item_turn)| *seq > done && item_turn.as_deref() == Some(turn.as_str()));
        if !stray {
            return Err(incomplete(
                format!("the app-server sent no item notification for turn {turn} after it completed, so the case shows nothing"),
                vec![terminal.evidence()],
            ));
        }
        Ok(format!(
            "after the driver's turn {turn} completed, the app-server sent stray item notifications for it"
        ))
    }

    fn server_started(&self, terminal: &Terminal) -> Result<String, Verdict> {
        let ex = &self.ex;
        let first_done = ex
            .own_turns()
            .iter()
            .filter_map(|t| ex.completion_of(t.id).map(|(seq, _)| seq))
            .min()
            .unwrap_or(u64::MAX);
        let Some((_, turn)) = ex
            .turns_started
            .iter()
            .find(|(seq, id)| *seq > first_done && !ex.is_own_turn(id))
        else {
            return Err(incomplete(
                "the app-server started no turn of its own after the driver's turn, so the case shows nothing".into(),
                vec![terminal.evidence()],
            ));
        };
        // A driver may end its session when its own turn is over; one that does never meets the
        // server's turn whole, and whether it saw that turn start at all is a race with the
        // server (the real Codex starts it 8 to 65 ms after turn/completed): judged only when
        // the driver stayed until that turn completed.
        let launch = ex.own_turns().last().map_or(1, |t| t.launch);
        let server_done = ex.completion_of(turn).map_or(u64::MAX, |(seq, _)| seq);
        if let Some(closed) = ex.stdin_closed_before(launch, server_done) {
            return Err(incomplete(
                format!("the driver ended its session (closed the app-server's stdin) before turn {turn}, which the app-server started on its own after the driver's turn, completed; a driver may end when its own turn is over, so the case shows nothing about how it handles a turn it did not start"),
                vec![EvidenceRef::at(closed, "protocol.stdin-closed")],
            ));
        }
        Ok(format!(
            "after the driver's turn, the app-server started turn {turn} on its own (no turn/start, as after a goal tool call), and the driver stayed until it completed"
        ))
    }

    fn stale_request(&self, terminal: &Terminal) -> Result<String, Verdict> {
        let ex = &self.ex;
        let stale = ex.server_requests.iter().find(|(seq, r)| {
            r.method.ends_with("requestApproval")
                && r.turn_id.as_deref().is_some_and(|t| {
                    ex.is_own_turn(t) && ex.completion_of(t).is_some_and(|(done, _)| done < *seq)
                })
        });
        let Some((seq, request)) = stale else {
            return Err(incomplete(
                "the app-server sent no approval request of a finished turn, so the case shows nothing".into(),
                vec![terminal.evidence()],
            ));
        };
        let turn = request.turn_id.as_deref().unwrap_or("-");
        if let Some((answer_seq, answer)) = ex.answers_to(request).find(|(_, a)| {
            a.decision
                .as_deref()
                .is_some_and(|d| d.starts_with("accept") || d.starts_with("approved"))
        }) {
            return Err(fail(
                "stale-not-accepted",
                format!(
                    "after the driver's turn {turn} completed, the app-server sent `{}` (id {}) of that finished turn, and the driver answered `{}`: it granted a stale request as if it were live; a request of a turn that is over is declined or answered with an error (observed: openai/codex#15134)",
                    request.method,
                    request.id,
                    answer.decision.as_deref().unwrap_or("-")
                ),
                vec![
                    EvidenceRef::at(*seq, &request.method),
                    EvidenceRef::at(*answer_seq, answer.result_excerpt.as_deref().unwrap_or("-")),
                ],
            ));
        }
        Ok(format!(
            "after the driver's turn {turn} completed, the app-server sent `{}` of that turn and the driver did not accept it",
            request.method
        ))
    }
}

impl ProtocolCase for Binding {
    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let context = match self.case {
            BindingCase::ForeignThreadEvents => self.foreign("another thread", terminal),
            BindingCase::ForeignTurnEvents => self.foreign("another turn of its thread", terminal),
            BindingCase::EventsBeforeAnswer => self.events_before_answer(terminal),
            BindingCase::PostTurnEvents => self.post_turn(terminal),
            BindingCase::ServerStartedTurn => self.server_started(terminal),
            BindingCase::StaleRequestAfterTurn => self.stale_request(terminal),
        };
        let context = match context {
            Ok(context) => context,
            Err(v) => return v,
        };
        match self.ex.session_went_on() {
            Ok(went_on) => {
                let evidence = went_on.evidence();
                pass(
                    format!(
                        "{context}; the driver kept to its own turn: {}",
                        went_on.describe()
                    ),
                    evidence,
                )
            }
            Err(fault @ (SessionFault::NotCompleted { .. } | SessionFault::ClosedEarly { .. }))
                if matches!(
                    self.case,
                    BindingCase::ForeignThreadEvents | BindingCase::ForeignTurnEvents
                ) =>
            {
                let mut v = fault.verdict(&context, terminal);
                v.reason = v
                    .reason
                    .replacen("`session-continued`", "`own-turn-awaited`", 1);
                v
            }
            Err(fault) => fault.verdict(&context, terminal),
        }
    }
}
