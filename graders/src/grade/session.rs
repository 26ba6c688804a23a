//! Whether the run's session opened: shared by the graders whose case needs a live session.
//!
//! The never-opened rule (documented in `docs/events.md`): when no `session.started` was
//! recorded, a grader whose case needs a live session returns `startup-rejected` quoting the
//! first `session.rejected` message verbatim, or `incomplete` when nothing says why — never
//! `pass` or `fail` for a check that needed the session. Only checks on what the driver sent
//! before any session (the launch itself) may still decide first. `startup-rejection` is exempt:
//! there a session that never opens is the case under test.

use super::Terminal;
use crate::events::{Body, Kind, Source};
use crate::signatures;
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

#[derive(Debug, Default)]
pub(crate) struct SessionWatch {
    pub started: Option<(u64, String)>,
    pub first_rejection: Option<(u64, String)>,
}

impl SessionWatch {
    pub(crate) fn wants(kind: Kind) -> bool {
        matches!(kind, Kind::SessionStarted | Kind::SessionRejected)
    }

    pub(crate) fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        // A session opened or refused only as the driver saw it.
        if !body.kind().accepts_source(source) {
            return;
        }
        match body {
            Body::SessionStarted(s) if self.started.is_none() => {
                self.started = Some((seq, s.thread_id.clone()));
            }
            Body::SessionRejected(r) if self.first_rejection.is_none() => {
                self.first_rejection = Some((seq, r.message.clone()));
            }
            _ => {}
        }
    }

    /// `Some(verdict)` when the session never opened: `startup-rejected` quoting the provider,
    /// or `incomplete` when nothing says why.
    pub(crate) fn never_opened(&self, terminal: &Terminal) -> Option<Verdict> {
        if self.started.is_some() {
            return None;
        }
        Some(match &self.first_rejection {
            Some((seq, message)) => {
                let signature = signatures::scan(message)
                    .launcher_failure
                    .map(|hit| hit.signature.name);
                let launcher = signature
                    .map(|name| format!(" (sandbox launcher signature `{name}`)"))
                    .unwrap_or_default();
                let verdict = Verdict::new(
                    VerdictKind::StartupRejected,
                    format!("the session never opened; the provider said: {message}{launcher}"),
                    vec![EvidenceRef::at(*seq, message), terminal.evidence()],
                );
                match signature {
                    Some(name) => verdict.with_signature(name),
                    None => verdict,
                }
            }
            None => Verdict::new(
                VerdictKind::Incomplete,
                format!(
                    "the session never opened and no provider rejection was recorded (run ended {})",
                    terminal.ending_with_cause()
                ),
                vec![terminal.evidence()],
            ),
        })
    }
}
