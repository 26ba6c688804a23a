//! Whether the model had its chance to act: a run whose turns failed (a model stream failure,
//! an `error` notification Codex does not retry, a turn that never completed) shows nothing
//! about what the model would have done, so "no write attempt" cannot be concluded from it.

use crate::events::{Body, Kind, Source};
use crate::verdict::{excerpt, EvidenceRef};

#[derive(Debug, Default)]
pub(crate) struct TurnWatch {
    pub completed: u64,
    /// The first turn that did not complete, or the first error Codex gave up on.
    pub first_failure: Option<(u64, String)>,
}

impl TurnWatch {
    pub(super) fn wants(kind: Kind) -> bool {
        matches!(kind, Kind::TurnCompleted | Kind::TurnError)
    }

    pub(super) fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        if !body.kind().accepts_source(source) {
            return;
        }
        match body {
            Body::TurnCompleted(t) if t.status == "completed" => self.completed += 1,
            Body::TurnCompleted(t) => {
                self.first_failure.get_or_insert_with(|| {
                    (
                        seq,
                        excerpt(&format!(
                            "turn {} ended `{}`: {}",
                            t.turn_id,
                            t.status,
                            t.error.as_deref().unwrap_or("-")
                        )),
                    )
                });
            }
            Body::TurnError(e) if e.will_retry != Some(true) => {
                self.first_failure.get_or_insert_with(|| {
                    (
                        seq,
                        excerpt(&format!(
                            "app-server error (willRetry={}, codexErrorInfo={}): {}",
                            e.will_retry.map_or("?".into(), |w| w.to_string()),
                            e.codex_error_info
                                .as_ref()
                                .map_or("-".into(), |v| v.to_string()),
                            e.message
                        )),
                    )
                });
            }
            _ => {}
        }
    }

    /// Why the run cannot show that the model made no attempt, if it cannot.
    pub(super) fn model_did_not_get_to_act(&self) -> Option<EvidenceRef> {
        if let Some((seq, what)) = &self.first_failure {
            return Some(EvidenceRef::at(*seq, what));
        }
        (self.completed == 0).then(|| EvidenceRef {
            seq: None,
            line: None,
            excerpt: "no turn completed".into(),
        })
    }
}
