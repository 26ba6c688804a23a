//! `transport-faults`: `pass` means the driver classified the app-server's failure correctly.
//! `hang` must end `timed-out`; `crash-mid-turn`, `garbage-line` and `oversized-line` must end
//! `transport-lost`; either way with a non-empty reason. A `succeeded` terminal for a broken
//! transport always fails. Every fault happens mid-turn, so a session that never opened never
//! reached it: `startup-rejected` quoting the provider, or `incomplete` (see `docs/events.md`).

use super::session::SessionWatch;
use super::{ending_name, fail, Grader, Terminal};
use crate::events::{Body, Ending, Kind, Source};
use crate::verdict::{Verdict, VerdictKind};

pub(crate) struct TransportFault {
    expected: Ending,
    session: SessionWatch,
}

impl TransportFault {
    pub(super) fn new(expected: Ending) -> Self {
        Self {
            expected,
            session: SessionWatch::default(),
        }
    }
}

impl Grader for TransportFault {
    fn wants(&self, kind: Kind) -> bool {
        SessionWatch::wants(kind)
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.session.observe(seq, source, body);
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        if let Some(verdict) = self.session.never_opened(terminal) {
            return verdict;
        }
        let ended = &terminal.ended;
        let evidence = vec![terminal.evidence()];
        if ended.ending == Ending::Succeeded {
            return fail(
                "failure-classified",
                format!(
                    "the terminal says succeeded for a run whose transport failed (expected {})",
                    ending_name(self.expected)
                ),
                evidence,
            );
        }
        if ended.ending != self.expected {
            return fail(
                "failure-classified",
                format!(
                    "the run ended {}, expected {}",
                    terminal.ending_name(),
                    ending_name(self.expected)
                ),
                evidence,
            );
        }
        let Some(reason) = ended.reason.as_deref().filter(|r| !r.trim().is_empty()) else {
            return fail("reason-given", "the terminal gives no reason", evidence);
        };
        Verdict::new(
            VerdictKind::Pass,
            format!(
                "the failure was classified as {}: {reason}",
                terminal.ending_name()
            ),
            evidence,
        )
    }
}
