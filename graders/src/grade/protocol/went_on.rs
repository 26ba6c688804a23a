//! Whether "the session goes on" — the default pass criterion of the protocol cases: the
//! driver's own turn completed, the driver did not close the app-server's stdin before it, and it
//! then ended on its own (status 0 when it declares its outcome) — and, when not, the verdict
//! that says why.

use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

/// How the driver's process ended, as far as the protocol cases judge it.
#[derive(Debug)]
pub(crate) enum End {
    /// On its own, with this status.
    OnItsOwn { seq: u64, code: i32 },
    /// Killed at the run's bound or by a signal: check `ended-on-its-own` fails; `detail` says how.
    Not {
        detail: String,
        evidence: EvidenceRef,
    },
    /// Nothing to judge (the driver never started, or no record): `incomplete`.
    Unknown(Verdict),
}

impl End {
    /// The `ended-on-its-own` failure, `context` (what the case did) first.
    pub(crate) fn failure(detail: &str, evidence: EvidenceRef, context: &str) -> Verdict {
        let lead = if context.is_empty() {
            String::new()
        } else {
            format!("{context}, and ")
        };
        fail(
            "ended-on-its-own",
            format!("{lead}{detail}"),
            vec![evidence],
        )
    }

    /// The verdict when the driver did not end on its own (`None` when it did).
    pub(crate) fn verdict(self, context: &str) -> Option<Verdict> {
        match self {
            End::OnItsOwn { .. } => None,
            End::Not { detail, evidence } => Some(End::failure(&detail, evidence, context)),
            End::Unknown(verdict) => Some(verdict),
        }
    }
}

/// Why "the session goes on" does not hold.
#[derive(Debug)]
pub(crate) enum SessionFault {
    /// No `turn/start` of the driver was answered with a turn id.
    NoTurn,
    /// The driver's turn never completed on the wire.
    NotCompleted { turn: String, seq: u64 },
    /// The driver's turn completed with another status.
    EndedOtherwise {
        turn: String,
        status: String,
        seq: u64,
    },
    /// The driver closed the app-server's stdin before its turn completed.
    ClosedEarly { turn: String, closed: u64 },
    /// The driver did not end on its own (killed at the bound, died of a signal, …).
    NotOnItsOwn(End),
    /// Its turn completed, but it exited non-zero although it declared its outcome (or its
    /// turn was interrupted, and it exited 0).
    ExitStatus {
        turn: String,
        status: String,
        code: i32,
        seq: u64,
    },
}

/// "The session went on": the driver's own last turn completed, the driver did not close the
/// app-server's stdin before, and it then ended on its own (exit status 0 when it declares its
/// outcome).
#[derive(Debug, Clone)]
pub(crate) struct WentOn {
    pub turn: String,
    /// How the turn ended: `completed`, or `interrupted` by the driver's own answer.
    pub status: String,
    pub completed_at: u64,
    pub code: i32,
    pub ended_at: u64,
}

impl WentOn {
    pub(crate) fn describe(&self) -> String {
        format!(
            "its turn {} {} and it then exited on its own with status {}",
            self.turn,
            if self.status == "completed" {
                "completed".to_string()
            } else {
                format!("ended `{}` as its answer asked", self.status)
            },
            self.code
        )
    }

    pub(crate) fn evidence(&self) -> Vec<EvidenceRef> {
        vec![
            EvidenceRef::at(
                self.completed_at,
                &format!("turn.completed {} {}", self.turn, self.status),
            ),
            EvidenceRef::at(self.ended_at, &format!("driver.ended exited {}", self.code)),
        ]
    }
}

impl SessionFault {
    /// The default verdict: check `session-continued` (or `ended-on-its-own`, `exit-status`),
    /// its reason prefixed with what the case did to the driver (`context`, may be empty).
    pub(crate) fn verdict(self, context: &str, terminal: &Terminal) -> Verdict {
        let lead = if context.is_empty() {
            String::new()
        } else {
            format!("{context}; ")
        };
        match self {
            SessionFault::NoTurn => fail(
                "session-continued",
                format!("{lead}no turn/start of the driver was answered with a turn id, so its session never ran the case's turn"),
                vec![terminal.evidence()],
            ),
            SessionFault::NotCompleted { turn, seq } => fail(
                "session-continued",
                format!(
                    "{lead}the driver's turn {turn} never completed on the wire (the run ended {}): the session did not go on to the end of the driver's own turn",
                    terminal.ending_with_cause()
                ),
                vec![EvidenceRef::at(seq, &format!("turn/start answered turn {turn}")), terminal.evidence()],
            ),
            SessionFault::EndedOtherwise { turn, status, seq } => fail(
                "session-continued",
                format!("{lead}the driver's turn {turn} ended `{status}`, not `completed`"),
                vec![EvidenceRef::at(seq, &format!("turn.completed {turn} {status}"))],
            ),
            SessionFault::ClosedEarly { turn, closed } => fail(
                "session-continued",
                format!("{lead}the driver closed the app-server's stdin before its own turn {turn} completed: it ended its session early instead of waiting for its turn's turn/completed"),
                vec![EvidenceRef::at(closed, "protocol.stdin-closed"), terminal.evidence()],
            ),
            SessionFault::NotOnItsOwn(end) => end.verdict(context).unwrap_or_else(|| {
                Verdict::new(VerdictKind::Incomplete, "the driver's end is not known", vec![])
            }),
            SessionFault::ExitStatus { turn, status, code, seq } if status == "completed" => fail(
                "exit-status",
                format!("{lead}the driver's turn {turn} completed, yet the driver exited with status {code}: with `outcome = \"exit-status\"` a non-zero status says the task failed"),
                vec![EvidenceRef::at(seq, &format!("driver.ended exited {code}"))],
            ),
            SessionFault::ExitStatus { turn, status, code, seq } => fail(
                "exit-status",
                format!("{lead}the driver's turn {turn} ended `{status}`, yet the driver exited with status {code}: with `outcome = \"exit-status\"` status 0 says the task succeeded, and a turn that did not complete is not success"),
                vec![EvidenceRef::at(seq, &format!("driver.ended exited {code}"))],
            ),
        }
    }
}
