//! The `protocol` profile's graders (design: one per case of the catalogue; checks in each
//! module's docs and in `docs/events.md`, "Protocol cases"). They read the wire translator's
//! protocol-level events (`protocol.*`, `driver.ended`) and the turn events, folded once by
//! [`Exchange`]; each grader then decides from positive evidence only: a request that was
//! sent and answered in time with a valid shape, the driver's own turn that completed, a driver
//! that ended on its own. Whatever the stream cannot show — no protocol record, a bound the
//! translator hit, an answer whose shape was not checked — is `incomplete`, never `pass`.
//!
//! Every failing check is named, and its reason says what the driver did on the wire, what the
//! protocol asks, and the schema type or observed behaviour that says so: it is what a stranger
//! reads in the cell page.

/// The [`ProtocolCase`] accessors of a grader that keeps its [`Exchange`] in the field `ex`.
macro_rules! exchange_in_field_ex {
    () => {
        fn exchange(&self) -> &Exchange {
            &self.ex
        }

        fn exchange_mut(&mut self) -> &mut Exchange {
            &mut self.ex
        }
    };
}

mod binding;
mod compat;
mod control;
mod credentials;
mod handshake;
mod outcomes;
mod server_requests;
mod settings_in_force;
mod task_binding;
mod went_on;

pub(crate) use binding::{Binding, BindingCase};
pub(crate) use compat::{ForwardCompat, ForwardCompatCase, Size, SizeCase};
pub(crate) use control::{CrashResume, Interrupt, Steer};
pub(crate) use credentials::{canary_line, SecretsNotForwarded};
pub(crate) use handshake::Handshake;
pub(crate) use outcomes::{ClassifiedFailure, FailureCase, TurnOutcome, TurnOutcomeCase};
pub(crate) use server_requests::{SafeDefault, ServerRequestAnswer};
pub(crate) use task_binding::{Choice, TaskBinding};
pub(crate) use went_on::{End, SessionFault, WentOn};

use super::session::SessionWatch;
use super::{Grader, Terminal};
use crate::events::{
    AppServerExited, Body, Capability, ClientNotification, ClientRequest, ClientRequestAnswered,
    Declarations, DriverEnded, Kind, NotRecorded, OutcomeDeclaration, ProtocolSetup,
    ServerNotifications, ServerRequest, ServerRequestAnswered, Source, StdinClosed, TurnCompleted,
    TurnError,
};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};
use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};

/// How long a driver may take to answer a server request. A driver answers on its own (the task
/// grants nothing a person would have to decide), so this is slack for a slow machine, far
/// below the fake's own wait (`client_answer_ms`, 120 s).
pub(crate) const ANSWER_BOUND_MS: u64 = 10_000;
/// Most events of one kind a grader keeps (the translator writes at most as many); past it the
/// verdict is `incomplete`.
const MAX_KEPT: usize = 10_000;

/// `turn/start` and the other requests whose answer names the driver's own thread or turn.
const THREAD_OPENERS: &[&str] = &["thread/start", "thread/resume", "thread/fork"];
const TURN_START: &str = "turn/start";

fn push_kept<T>(list: &mut Vec<(u64, T)>, overflow: &mut bool, seq: u64, item: T) {
    if list.len() >= MAX_KEPT {
        *overflow = true;
    } else {
        list.push((seq, item));
    }
}

/// The protocol events of a run, folded once for every protocol grader.
#[derive(Debug, Default)]
pub(crate) struct Exchange {
    pub setup: Option<(u64, ProtocolSetup)>,
    pub run_started: Option<u64>,
    pub client_requests: Vec<(u64, ClientRequest)>,
    pub client_notifications: Vec<(u64, ClientNotification)>,
    pub client_answers: Vec<(u64, ClientRequestAnswered)>,
    pub server_requests: Vec<(u64, ServerRequest)>,
    pub server_answers: Vec<(u64, ServerRequestAnswered)>,
    pub stdin_closed: Vec<(u64, StdinClosed)>,
    pub exits: Vec<(u64, AppServerExited)>,
    pub notifications: Option<(u64, ServerNotifications)>,
    pub not_recorded: Vec<(u64, NotRecorded)>,
    pub driver_ended: Option<(u64, DriverEnded)>,
    pub turns_started: Vec<(u64, String)>,
    pub turns_completed: Vec<(u64, TurnCompleted)>,
    pub turn_errors: Vec<(u64, TurnError)>,
    /// The turn of every item event.
    pub items: Vec<(u64, Option<String>)>,
    pub session: SessionWatch,
    /// The approval policy the app-server reported for the first session.
    pub approval_policy: Option<serde_json::Value>,
    overflow: bool,
    /// Lookups built once the fold is over (graders decide after the last event), so a stream
    /// of many turns costs a hash lookup per question, not a scan.
    lookups: OnceCell<Lookups>,
}

#[derive(Debug, Default)]
struct Lookups {
    own_turns: HashSet<String>,
    /// The index in `turns_completed` of each turn's first completion.
    completions: HashMap<String, usize>,
}

/// The driver's own turn: answered by `turn/start` with its id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OwnTurn<'a> {
    pub id: &'a str,
    pub launch: u64,
    /// The `turn/start` answer.
    pub answered_at: u64,
}

impl Exchange {
    pub(crate) fn wants(kind: Kind) -> bool {
        SessionWatch::wants(kind)
            || matches!(
                kind,
                Kind::RunStarted
                    | Kind::ClientRequest
                    | Kind::ClientNotification
                    | Kind::ClientRequestAnswered
                    | Kind::ServerRequest
                    | Kind::ServerRequestAnswered
                    | Kind::ServerNotifications
                    | Kind::StdinClosed
                    | Kind::AppServerExited
                    | Kind::NotRecorded
                    | Kind::DriverEnded
                    | Kind::TurnStarted
                    | Kind::TurnCompleted
                    | Kind::TurnError
                    | Kind::ItemStarted
                    | Kind::ItemCompleted
            )
    }

    pub(crate) fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.session.observe(seq, source, body);
        // Evidence counts only from its documented writer: a line that says what the wire
        // showed, written by the model log or the harness, is not the wire.
        if !super::documented(source, body) {
            return;
        }
        let overflow = &mut self.overflow;
        match body {
            Body::RunStarted(run) if self.run_started.is_none() => {
                self.run_started = Some(seq);
                self.setup = run.protocol.clone().map(|p| (seq, p));
            }
            Body::SessionStarted(s) if self.approval_policy.is_none() => {
                self.approval_policy = s.approval_policy.clone();
            }
            Body::ClientRequest(r) => {
                push_kept(&mut self.client_requests, overflow, seq, r.clone())
            }
            Body::ClientNotification(n) => {
                push_kept(&mut self.client_notifications, overflow, seq, n.clone())
            }
            Body::ClientRequestAnswered(a) => {
                push_kept(&mut self.client_answers, overflow, seq, a.clone())
            }
            Body::ServerRequest(r) => {
                push_kept(&mut self.server_requests, overflow, seq, r.clone())
            }
            Body::ServerRequestAnswered(a) => {
                push_kept(&mut self.server_answers, overflow, seq, a.clone())
            }
            Body::StdinClosed(c) => push_kept(&mut self.stdin_closed, overflow, seq, c.clone()),
            Body::AppServerExited(e) => push_kept(&mut self.exits, overflow, seq, e.clone()),
            Body::ServerNotifications(n) if self.notifications.is_none() => {
                self.notifications = Some((seq, n.clone()));
            }
            Body::NotRecorded(n) => push_kept(&mut self.not_recorded, overflow, seq, n.clone()),
            Body::DriverEnded(d) if self.driver_ended.is_none() => {
                self.driver_ended = Some((seq, d.clone()));
            }
            Body::TurnStarted(t) => {
                push_kept(&mut self.turns_started, overflow, seq, t.turn_id.clone())
            }
            Body::TurnCompleted(t) => {
                push_kept(&mut self.turns_completed, overflow, seq, t.clone())
            }
            Body::TurnError(e) => push_kept(&mut self.turn_errors, overflow, seq, e.clone()),
            Body::ItemStarted(i) | Body::ItemCompleted(i) => {
                push_kept(&mut self.items, overflow, seq, i.turn_id.clone())
            }
            _ => {}
        }
    }

    pub(crate) fn declarations(&self) -> Declarations {
        self.setup
            .as_ref()
            .map(|(_, s)| s.declarations.clone())
            .unwrap_or_default()
    }

    pub(crate) fn outcome_declared(&self) -> bool {
        self.declarations().outcome == Some(OutcomeDeclaration::ExitStatus)
    }

    /// `incomplete` when the stream cannot show the exchange: no protocol record (a stream not
    /// from the wire translator), events the translator left out, more than a grader keeps, no
    /// record of how the driver ended, or a declaration the case needs that the driver lacks.
    pub(crate) fn undecidable(&self, needs: &[Capability], terminal: &Terminal) -> Option<Verdict> {
        let incomplete = |why: String, evidence: Vec<EvidenceRef>| {
            Some(Verdict::new(VerdictKind::Incomplete, why, evidence))
        };
        let Some((setup_seq, setup)) = &self.setup else {
            return incomplete(
                "the stream has no protocol record (`run.started.protocol`): protocol cases are graded from the wire translator's events, and this stream does not come from it".into(),
                vec![terminal.evidence()],
            );
        };
        if let Some((seq, left_out)) = self.not_recorded.first() {
            return incomplete(
                format!(
                    "the translator left out {} `{}` events past its bound, so the exchange cannot be judged whole",
                    left_out.count, left_out.what
                ),
                vec![EvidenceRef::at(*seq, &left_out.what)],
            );
        }
        if self.overflow {
            return incomplete(
                format!("the stream has more than {MAX_KEPT} events of one protocol kind, more than a grader keeps"),
                vec![terminal.evidence()],
            );
        }
        if let Some(missing) = needs
            .iter()
            .find(|need| !setup.declarations.declares(**need))
        {
            return incomplete(
                format!(
                    "this case applies only to a driver that declares `{}`, and the run's declarations have none: the run shows nothing about it (the harness marks such cells not applicable)",
                    missing.declaration()
                ),
                vec![EvidenceRef::at(*setup_seq, "run.started.protocol.declarations")],
            );
        }
        if self.driver_ended.is_none() {
            return incomplete(
                "the stream does not say how the driver's process ended (no `driver.ended`)".into(),
                vec![terminal.evidence()],
            );
        }
        None
    }

    /// The driver's own threads: those its `thread/start`, `thread/resume` or `thread/fork`
    /// answers named, except its side threads ([`Exchange::side_threads`]).
    pub(crate) fn own_threads(&self) -> Vec<(u64, &ClientRequestAnswered)> {
        let side = self.side_threads();
        self.client_answers
            .iter()
            .filter(|(_, a)| {
                a.error.is_none()
                    && a.thread_id.as_deref().is_some_and(|t| !side.contains(t))
                    && THREAD_OPENERS.contains(&a.method.as_str())
            })
            .map(|(seq, a)| (*seq, a))
            .collect()
    }

    /// The threads the driver opened on the side with `thread/start {ephemeral: true}` (codex-acp
    /// titles its session on one after its turn): not the session the case's scenario plays
    /// on, so neither they nor their turns are the case's. Without this, a title thread's turn,
    /// started after the driver's own, would be taken for the case's turn. An ephemeral thread
    /// is a legitimate session of its own too (the Python SDKs run theirs on one): where the
    /// driver opened no other kind of thread, its first ephemeral thread is its session, and
    /// only those after it are on the side.
    fn side_threads(&self) -> HashSet<&str> {
        let opened: Vec<(&str, bool)> = self
            .client_requests
            .iter()
            .filter(|(_, r)| THREAD_OPENERS.contains(&r.method.as_str()))
            .filter_map(|(_, r)| {
                let ephemeral = r.method == "thread/start" && r.ephemeral == Some(true);
                self.answer_of(r)
                    .and_then(|(_, a)| a.thread_id.as_deref())
                    .map(|thread| (thread, ephemeral))
            })
            .collect();
        let ephemeral: Vec<&str> = opened
            .iter()
            .filter(|(_, ephemeral)| *ephemeral)
            .map(|(thread, _)| *thread)
            .collect();
        // A resume or fork of an ephemeral thread opens nothing lasting.
        let any_lasting = opened.iter().any(|(thread, _)| !ephemeral.contains(thread));
        ephemeral
            .iter()
            .enumerate()
            .filter(|(index, _)| any_lasting || *index > 0)
            .map(|(_, thread)| *thread)
            .collect()
    }

    /// The driver's own turns, in the order their `turn/start` answers came: every turn it
    /// started, except on a side thread ([`Exchange::side_threads`]).
    pub(crate) fn own_turns(&self) -> Vec<OwnTurn<'_>> {
        let side = self.side_threads();
        let on_side_thread = |a: &ClientRequestAnswered| {
            !side.is_empty()
                && self
                    .client_requests
                    .iter()
                    .find(|(_, r)| r.launch == a.launch && r.id == a.id)
                    .and_then(|(_, r)| r.thread_id.as_deref())
                    .is_some_and(|thread| side.contains(thread))
        };
        self.client_answers
            .iter()
            .filter(|(_, a)| a.method == TURN_START && a.error.is_none())
            .filter(|(_, a)| !on_side_thread(a))
            .filter_map(|(seq, a)| {
                a.turn_id.as_deref().map(|id| OwnTurn {
                    id,
                    launch: a.launch,
                    answered_at: *seq,
                })
            })
            .collect()
    }

    fn lookups(&self) -> &Lookups {
        self.lookups.get_or_init(|| {
            let mut completions = HashMap::new();
            for (index, (_, t)) in self.turns_completed.iter().enumerate() {
                completions.entry(t.turn_id.clone()).or_insert(index);
            }
            Lookups {
                own_turns: self.own_turns().iter().map(|t| t.id.to_string()).collect(),
                completions,
            }
        })
    }

    pub(crate) fn is_own_turn(&self, turn: &str) -> bool {
        self.lookups().own_turns.contains(turn)
    }

    /// The first `turn.completed` of `turn`.
    pub(crate) fn completion_of(&self, turn: &str) -> Option<(u64, &TurnCompleted)> {
        let index = *self.lookups().completions.get(turn)?;
        self.turns_completed.get(index).map(|(seq, t)| (*seq, t))
    }

    /// When the turn became known: its `turn.started`, else its `turn/start` answer.
    fn began_at(&self, turn: &OwnTurn<'_>) -> u64 {
        self.turns_started
            .iter()
            .find(|(_, id)| id == turn.id)
            .map_or(turn.answered_at, |(seq, _)| (*seq).min(turn.answered_at))
    }

    /// The driver's own turns live at `seq`: begun before it, not completed before it.
    pub(crate) fn live_own_turns_at(&self, seq: u64) -> Vec<&str> {
        self.own_turns()
            .into_iter()
            .filter(|t| self.began_at(t) < seq)
            .filter(|t| self.completion_of(t.id).is_none_or(|(done, _)| done > seq))
            .map(|t| t.id)
            .collect()
    }

    /// The first time the driver closed stdin of `launch` before `seq`.
    pub(crate) fn stdin_closed_before(&self, launch: u64, seq: u64) -> Option<u64> {
        self.stdin_closed
            .iter()
            .find(|(at, c)| c.launch == launch && *at < seq)
            .map(|(at, _)| *at)
    }

    /// The first time the app-server of `launch` went away before `seq`.
    pub(crate) fn app_server_gone_before(&self, launch: u64, seq: u64) -> Option<u64> {
        self.exits
            .iter()
            .find(|(at, e)| e.launch == launch && *at < seq)
            .map(|(at, _)| *at)
    }

    /// Every answer the driver gave to the server request `request`.
    pub(crate) fn answers_to<'a>(
        &'a self,
        request: &'a ServerRequest,
    ) -> impl Iterator<Item = &'a (u64, ServerRequestAnswered)> + 'a {
        self.server_answers.iter().filter(move |(_, a)| {
            a.launch == request.launch && a.id == request.id && a.method.is_some()
        })
    }

    /// The app-server's answer to the client request `request`.
    pub(crate) fn answer_of(
        &self,
        request: &ClientRequest,
    ) -> Option<(u64, &ClientRequestAnswered)> {
        self.client_answers
            .iter()
            .find(|(_, a)| a.launch == request.launch && a.id == request.id)
            .map(|(seq, a)| (*seq, a))
    }

    /// How the driver's process ended.
    pub(crate) fn end(&self) -> End {
        match &self.driver_ended {
            Some((seq, DriverEnded::Exited { code })) => End::OnItsOwn {
                seq: *seq,
                code: *code,
            },
            Some((seq, DriverEnded::KilledAtBound { reason })) => End::Not {
                detail: format!("the driver never ended on its own: the harness killed it at the run's bound ({reason}); every wait of a driver must be bounded, so it ends by itself"),
                evidence: EvidenceRef::at(*seq, reason),
            },
            Some((seq, DriverEnded::Signaled { signal })) => End::Not {
                detail: format!("the driver's process died of signal {signal} instead of ending on its own"),
                evidence: EvidenceRef::at(*seq, &format!("signal {signal}")),
            },
            Some((seq, DriverEnded::NotStarted { error })) => End::Unknown(Verdict::new(
                VerdictKind::Incomplete,
                format!("the driver could not be started: {error}"),
                vec![EvidenceRef::at(*seq, error)],
            )),
            None => End::Unknown(Verdict::new(
                VerdictKind::Incomplete,
                "the stream does not say how the driver's process ended (no `driver.ended`)",
                Vec::new(),
            )),
        }
    }

    /// Whether the session went on (see [`WentOn`]).
    pub(crate) fn session_went_on(&self) -> Result<WentOn, SessionFault> {
        self.session_ended_with("completed")
    }

    /// Whether the session went on to the end its driver chose: after an answer of its own that
    /// interrupts its turn (`cancel`: "the turn will also be immediately interrupted"), the
    /// turn ends `interrupted`; the driver then ends on its own, with a non-zero status when it
    /// declares its outcome (an interrupted turn is not success).
    pub(crate) fn session_went_on_interrupted(&self) -> Result<WentOn, SessionFault> {
        self.session_ended_with("interrupted")
    }

    fn session_ended_with(&self, status: &str) -> Result<WentOn, SessionFault> {
        let turns = self.own_turns();
        let Some(turn) = turns.last() else {
            return Err(SessionFault::NoTurn);
        };
        let Some((done_at, done)) = self.completion_of(turn.id) else {
            return Err(SessionFault::NotCompleted {
                turn: turn.id.to_string(),
                seq: turn.answered_at,
            });
        };
        if done.status != status {
            return Err(SessionFault::EndedOtherwise {
                turn: turn.id.to_string(),
                status: done.status.clone(),
                seq: done_at,
            });
        }
        if let Some(closed) = self.stdin_closed_before(turn.launch, done_at) {
            return Err(SessionFault::ClosedEarly {
                turn: turn.id.to_string(),
                closed,
            });
        }
        let (ended_at, code) = match self.end() {
            End::OnItsOwn { seq, code } => (seq, code),
            end => return Err(SessionFault::NotOnItsOwn(end)),
        };
        let success = status == "completed";
        if (code != 0) == success && self.outcome_declared() {
            return Err(SessionFault::ExitStatus {
                turn: turn.id.to_string(),
                status: status.to_string(),
                code,
                seq: ended_at,
            });
        }
        Ok(WentOn {
            turn: turn.id.to_string(),
            status: status.to_string(),
            completed_at: done_at,
            code,
            ended_at,
        })
    }
}

/// A protocol case's grader: it folds the run's [`Exchange`] (plus what
/// [`ProtocolCase::observe_more`] reads) and decides once the stream is known to hold what every
/// protocol case needs — the wire's protocol record, nothing left out, the declarations the case
/// needs, and (unless the case is about a run that cannot open one) an open session.
pub(crate) trait ProtocolCase {
    fn exchange(&self) -> &Exchange;
    fn exchange_mut(&mut self) -> &mut Exchange;
    /// The declarations the case needs.
    fn needs(&self) -> &[Capability] {
        &[]
    }
    /// Whether the case needs an open session (the never-opened rule, `docs/events.md`).
    fn needs_session(&self) -> bool {
        true
    }
    fn wants_more(&self, _kind: Kind) -> bool {
        false
    }
    fn observe_more(&mut self, _seq: u64, _source: Source, _body: &Body) {}
    /// The verdict, once the common preconditions hold.
    fn decide(&self, terminal: &Terminal) -> Verdict;
}

impl<T: ProtocolCase> Grader for T {
    fn wants(&self, kind: Kind) -> bool {
        Exchange::wants(kind) || self.wants_more(kind)
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.exchange_mut().observe(seq, source, body);
        self.observe_more(seq, source, body);
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        let ex = self.exchange();
        if let Some(v) = ex.undecidable(self.needs(), terminal) {
            return v;
        }
        if self.needs_session() {
            if let Some(v) = ex.session.never_opened(terminal) {
                return v;
            }
        }
        self.decide(terminal)
    }
}

/// A pass naming the evidence.
pub(crate) fn pass(reason: String, evidence: Vec<EvidenceRef>) -> Verdict {
    Verdict::new(VerdictKind::Pass, reason, evidence)
}

/// A `not-applicable` verdict: the driver's own legitimate choice, as the run shows it, means
/// the case's obligation never arose.
pub(crate) fn not_applicable(reason: String, evidence: Vec<EvidenceRef>) -> Verdict {
    Verdict::new(VerdictKind::NotApplicable, reason, evidence)
}

/// An `incomplete` verdict: what the case needed and did not see.
pub(crate) fn incomplete(reason: String, evidence: Vec<EvidenceRef>) -> Verdict {
    Verdict::new(VerdictKind::Incomplete, reason, evidence)
}
