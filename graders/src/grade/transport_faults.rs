//! `transport-faults`: `pass` means the driver classified the app-server's failure correctly.
//! `hang` must end `timed-out`; `crash-mid-turn`, `garbage-line` and `oversized-line` must end
//! `transport-lost`; either way with a non-empty reason. A `succeeded` terminal for a broken
//! transport always fails.

use super::{ending_name, fail, Grader, Terminal};
use crate::events::{Body, Ending, Kind};
use crate::verdict::{Verdict, VerdictKind};

pub(crate) struct TransportFault {
    expected: Ending,
}

impl TransportFault {
    pub fn new(expected: Ending) -> Self {
        Self { expected }
    }
}

impl Grader for TransportFault {
    fn wants(&self, _kind: Kind) -> bool {
        false
    }

    fn observe(&mut self, _seq: u64, _body: &Body) {}

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
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
