//! `startup-rejection`: how a driver handles `thread/start` errors.
//!
//! - `deterministic-rejection`: exactly one open attempt, one `session.rejected`, no session
//!   started, and a terminal `failed-permanently` with `retry_offered` and error code
//!   `provider_startup_rejected` (no retry loop, no ambiguous hold).
//! - `transient-startup-failure`: between 2 and [`MAX_STARTUP_ATTEMPTS`] open attempts, every
//!   one rejected, no session started, and a terminal `retries-exhausted` with `retry_offered`.
//!
//! The only suite exempt from the never-opened rule (`docs/events.md`): here a session that never
//! opens is the case under test, so it is judged by the checks above, not as `startup-rejected`.
//!
//! What the wire cannot show is not asked of a driver graded from it alone: a driver that writes
//! no run events (`run.started.protocol.declarations.own_events` false) has no way to say it
//! offers its user a Retry, so `retry-offered` is checked only where its own events could say it.
//!
//! The real Codex cannot be scripted to refuse `thread/start`: it refuses on its own only a start
//! that needs its bubblewrap fs helper where bubblewrap cannot set up loopback (restricted reads,
//! the harness's legacy planning profile, in `daytona`). A start the app-server accepted with no
//! rejection before it is the real Codex's answer to the driver's actual request, so the case
//! expects what follows an accepted start: a run that goes on and succeeds. (The fake's scenario
//! refuses every `thread/start`, so there a session always follows a rejection: a retry.)

use super::{ending_name, fail, Grader, Terminal};
use crate::events::{Body, Ending, Kind, Source};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

pub(crate) const PROVIDER_STARTUP_REJECTED: &str = "provider_startup_rejected";
/// Upper bound on same-run `thread/start` attempts for a transient failure.
pub(crate) const MAX_STARTUP_ATTEMPTS: u64 = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Deterministic,
    Transient,
}

pub(crate) struct StartupRejection {
    expect: Expect,
    opens: u64,
    rejections: u64,
    first_rejection: Option<(u64, String)>,
    last_open: Option<u64>,
    started: Option<(u64, String)>,
    /// Whether the stream can show a Retry offer: `false` for a driver graded from the wire
    /// alone (it writes no run events).
    retry_shown: bool,
}

impl StartupRejection {
    fn new(expect: Expect) -> Self {
        Self {
            expect,
            opens: 0,
            rejections: 0,
            first_rejection: None,
            last_open: None,
            started: None,
            retry_shown: true,
        }
    }
    pub(super) fn deterministic() -> Self {
        Self::new(Expect::Deterministic)
    }
    pub(super) fn transient() -> Self {
        Self::new(Expect::Transient)
    }
}

impl Grader for StartupRejection {
    fn wants(&self, kind: Kind) -> bool {
        matches!(
            kind,
            Kind::RunStarted
                | Kind::SessionOpenRequested
                | Kind::SessionRejected
                | Kind::SessionStarted
        )
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        if !body.kind().accepts_source(source) {
            return;
        }
        match body {
            Body::RunStarted(run) => {
                if let Some(protocol) = &run.protocol {
                    self.retry_shown = protocol.declarations.own_events;
                }
            }
            Body::SessionOpenRequested(_) => {
                self.opens += 1;
                self.last_open = Some(seq);
            }
            Body::SessionRejected(r) => {
                self.rejections += 1;
                self.first_rejection
                    .get_or_insert((seq, format!("code {}: {}", r.code, r.message)));
            }
            Body::SessionStarted(s) => {
                self.started.get_or_insert((seq, s.thread_id.clone()));
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        let mut evidence: Vec<EvidenceRef> = self
            .first_rejection
            .iter()
            .map(|(seq, text)| EvidenceRef::at(*seq, text))
            .collect();
        evidence.push(terminal.evidence());
        if let (Some((seq, thread)), 0) = (&self.started, self.rejections) {
            return accepted_start(*seq, thread, terminal);
        }
        if let Some((seq, thread)) = &self.started {
            return fail(
                "session-never-opens",
                format!(
                    "a session started (thread {thread}) although every start must be rejected"
                ),
                vec![EvidenceRef::at(*seq, thread)],
            );
        }
        if self.rejections == 0 {
            return fail("rejection-recorded", "no session.rejected event", evidence);
        }
        let ended = &terminal.ended;
        let (expected_ending, attempts_ok, attempts_rule) = match self.expect {
            Expect::Deterministic => (
                Ending::FailedPermanently,
                self.opens == 1 && self.rejections == 1,
                "exactly 1 (no retry of a deterministic rejection)".to_string(),
            ),
            Expect::Transient => (
                Ending::RetriesExhausted,
                (2..=MAX_STARTUP_ATTEMPTS).contains(&self.opens) && self.rejections == self.opens,
                format!("between 2 and {MAX_STARTUP_ATTEMPTS}, each rejected"),
            ),
        };
        if !attempts_ok {
            if let Some(seq) = self.last_open {
                evidence.insert(
                    0,
                    EvidenceRef::at(seq, &format!("open attempt #{}", self.opens)),
                );
            }
            return fail(
                "bounded-attempts",
                format!(
                    "{} open attempt(s) and {} rejection(s); expected {attempts_rule}",
                    self.opens, self.rejections
                ),
                evidence,
            );
        }
        if ended.ending != expected_ending {
            return fail(
                "terminal-ending",
                format!(
                    "the run ended {}, expected {}",
                    terminal.ending_name(),
                    ending_name(expected_ending)
                ),
                evidence,
            );
        }
        if self.retry_shown && !ended.retry_offered {
            return fail(
                "retry-offered",
                "the terminal does not offer a retry",
                evidence,
            );
        }
        if self.expect == Expect::Deterministic
            && ended.error_code.as_deref() != Some(PROVIDER_STARTUP_REJECTED)
        {
            return fail(
                "error-code",
                format!(
                    "error code {}, expected `{PROVIDER_STARTUP_REJECTED}`",
                    ended
                        .error_code
                        .as_deref()
                        .map_or("absent".to_string(), |c| format!("`{c}`"))
                ),
                evidence,
            );
        }
        let retry = if self.retry_shown {
            "with a retry offered"
        } else {
            "(a Retry offer is not judged: the driver writes no run events, and the wire cannot show one)"
        };
        Verdict::new(
            VerdictKind::Pass,
            format!(
                "{} open attempt(s), all rejected; the run ended {} {retry}",
                self.opens,
                terminal.ending_name()
            ),
            evidence,
        )
    }
}

/// The app-server accepted the driver's first start: what follows an accepted start is a run
/// that goes on and succeeds.
fn accepted_start(seq: u64, thread: &str, terminal: &Terminal) -> Verdict {
    let accepted = EvidenceRef::at(seq, thread);
    if let Some(failed) =
        terminal.fail_unless_succeeded(|| vec![accepted.clone(), terminal.evidence()])
    {
        return failed;
    }
    Verdict::new(
        VerdictKind::Pass,
        format!(
            "the app-server accepted the driver's start (thread {thread}) and the run succeeded: the real Codex refuses a start on its own only where it needs its fs helper and bubblewrap cannot set up loopback (the harness's legacy planning profile in daytona), and this driver's request is not such a start, so there was no rejection to handle"
        ),
        vec![accepted, terminal.evidence()],
    )
}
