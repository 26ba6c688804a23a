//! `core-compatibility` / `message-marker`: the prompt carries a marker token and the agent
//! must say it back.
//!
//! The marker is the first `MARKER-` token in a submitted turn's `input_excerpt`: `MARKER-`
//! followed by one or more ASCII letters, digits, `-` or `_` (surrounding quotes or punctuation
//! are not part of it). The case passes when a completed agent message contains that token and
//! the run ended `succeeded`.

use super::session::SessionWatch;
use super::{fail, Grader, Terminal};
use crate::events::{Body, Item, Kind, Source};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

pub(crate) const MARKER_PREFIX: &str = "MARKER-";

/// The first marker token in a text, if any.
pub(crate) fn find_marker(text: &str) -> Option<&str> {
    let mut rest = text;
    while let Some(at) = rest.find(MARKER_PREFIX) {
        let candidate = &rest[at..];
        let len = MARKER_PREFIX.len()
            + candidate[MARKER_PREFIX.len()..]
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
                .count();
        if len > MARKER_PREFIX.len() {
            return Some(&candidate[..len]);
        }
        rest = &candidate[MARKER_PREFIX.len()..];
    }
    None
}

#[derive(Debug, Default)]
pub(crate) struct MessageMarker {
    session: SessionWatch,
    marker: Option<(u64, String)>,
    echoed: Option<(u64, String)>,
    /// Agent messages seen before the marker was known, kept only as a count for the reason.
    messages: u64,
    last_message: Option<(u64, String)>,
}

impl Grader for MessageMarker {
    fn wants(&self, kind: Kind) -> bool {
        SessionWatch::wants(kind) || matches!(kind, Kind::TurnSubmitted | Kind::ItemCompleted)
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.session.observe(seq, source, body);
        if !super::documented(source, body) {
            return;
        }
        match body {
            Body::TurnSubmitted(turn) if self.marker.is_none() => {
                if let Some(marker) = find_marker(&turn.input_excerpt) {
                    self.marker = Some((seq, marker.to_string()));
                }
            }
            Body::ItemCompleted(ev) => {
                if let Item::AgentMessage { text, .. } = &ev.item {
                    self.messages += 1;
                    if let (Some((_, marker)), None) = (&self.marker, &self.echoed) {
                        if text.contains(marker.as_str()) {
                            self.echoed = Some((seq, text.clone()));
                        }
                    }
                    self.last_message = Some((seq, crate::verdict::excerpt(text)));
                }
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        if let Some(verdict) = self.session.never_opened(terminal) {
            return verdict;
        }
        let Some((marker_seq, marker)) = &self.marker else {
            return Verdict::new(
                VerdictKind::Incomplete,
                format!("no submitted turn carries a `{MARKER_PREFIX}` token to look for"),
                vec![terminal.evidence()],
            );
        };
        let marker_ev = EvidenceRef::at(*marker_seq, &format!("prompt marker {marker}"));
        let Some((seq, text)) = &self.echoed else {
            let mut evidence = vec![marker_ev];
            evidence.extend(
                self.last_message
                    .as_ref()
                    .map(|(s, t)| EvidenceRef::at(*s, t)),
            );
            return fail(
                "agent-message-has-marker",
                format!(
                    "none of {} agent message(s) contains `{marker}`",
                    self.messages
                ),
                evidence,
            );
        };
        if let Some(failed) = terminal.fail_unless_succeeded(|| vec![terminal.evidence()]) {
            return failed;
        }
        Verdict::new(
            VerdictKind::Pass,
            format!("an agent message contains the prompt's marker `{marker}`"),
            vec![marker_ev, EvidenceRef::at(*seq, text), terminal.evidence()],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::find_marker;

    #[test]
    fn markers_are_tokens() {
        assert_eq!(find_marker("Say `MARKER-7f3a` back."), Some("MARKER-7f3a"));
        assert_eq!(find_marker("MARKER- then MARKER-x_1."), Some("MARKER-x_1"));
        assert_eq!(find_marker("no marker here"), None);
        assert_eq!(find_marker("MARKER-"), None);
    }
}
