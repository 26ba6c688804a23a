//! `protocol-forward-compat` (obligation 5: what the driver does not know — a notification of the
//! release it ignores, an unknown method, item type, enum value or field — leaves the run as it
//! is without it) and `protocol-size` (obligation 6: legal long lines, a burst of deltas, a
//! flood of stderr).
//!
//! Evidence first, from the translator's notifications summary (`incomplete` without it, unless
//! the driver's session did not go on — it left before the case could send everything, which is
//! the finding):
//! every notification of the release sent (`every-notification`, which needs the release
//! known); a method the release does not have; a checked item notification the schema rejects
//! (an unknown item type); any checked notification the schema rejects (an unknown enum value);
//! a notification with fields the schema does not name; the longest line at least the case's
//! size (90 % of it: framing aside); at least 100 000 `item/agentMessage/delta`. The stderr
//! flood leaves no trace on the wire: its evidence is that the app-server got past it at all,
//! since an undrained pipe stops it before the driver's turn can complete.
//!
//! Then the session goes on — except a line longer than the driver's declared `max_line_bytes`,
//! which may instead end the run as a classified failure (the driver exits on its own with a
//! non-zero status; never a hang). A line the app-server's output ended inside (the driver let
//! go of it mid-line: the relay had stalled on it) counts with the bytes the harness read; a
//! long line short of the case's size in a session that did not go on is the driver's failure,
//! not missing evidence.

use super::{incomplete, pass, End, Exchange, ProtocolCase};
use crate::events::{NotificationCount, ServerNotifications};
use crate::grade::Terminal;
use crate::verdict::{EvidenceRef, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ForwardCompatCase {
    EveryNotification,
    UnknownNotification,
    UnknownItemType,
    UnknownEnumValues,
    UnknownFields,
}

pub(crate) struct ForwardCompat {
    case: ForwardCompatCase,
    ex: Exchange,
}

impl ForwardCompat {
    pub(crate) fn new(case: ForwardCompatCase) -> Self {
        Self {
            case,
            ex: Exchange::default(),
        }
    }

    fn evidence(&self, summary: &ServerNotifications) -> Result<String, String> {
        let find = |pick: &dyn Fn(&NotificationCount) -> bool| {
            summary
                .methods
                .iter()
                .find(|m| pick(m))
                .map(|m| m.method.clone())
        };
        match self.case {
            ForwardCompatCase::EveryNotification => {
                let version = summary
                    .release
                    .as_deref()
                    .ok_or("the release is not known, so \"every notification\" cannot be counted")?;
                let release = crate::protocol::release(version).map_err(|e| e.to_string())?;
                let sent = |method: &str| summary.methods.iter().any(|m| m.method == method && m.count > 0);
                // What the driver declared it does not want (or cannot get) is not owed to it:
                // a client that never declared the experimental API is not sent what only
                // experimental clients are (measured: Codex 0.169's thread/readState/changed).
                let owed: Vec<&str> = release
                    .notifications()
                    .filter(|m| !summary.not_owed.iter().any(|n| n == m))
                    .collect();
                let missing: Vec<&str> = owed.iter().copied().filter(|m| !sent(m)).collect();
                let not_owed = if summary.not_owed.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (not owed to this driver, by what its initialize declared: {})",
                        summary.not_owed.join(", ")
                    )
                };
                if !missing.is_empty() {
                    return Err(format!(
                        "the app-server sent {} of the {} notifications of Codex {version} it owed the driver{not_owed}; missing: {}",
                        owed.len() - missing.len(),
                        owed.len(),
                        missing.join(", ")
                    ));
                }
                Ok(format!(
                    "the app-server sent every one of the {} notifications of Codex {version} it owed the driver{not_owed}",
                    owed.len()
                ))
            }
            ForwardCompatCase::UnknownNotification => find(&|m| m.known == Some(false))
                .map(|m| format!("the app-server sent `{m}`, a notification no release has"))
                .ok_or_else(|| "the app-server sent no notification the release lacks".into()),
            ForwardCompatCase::UnknownItemType => find(&|m| {
                m.method.starts_with("item/") && m.method.ends_with("ed") && m.invalid > 0
            })
            .map(|m| format!("the app-server sent `{m}` with an item the release's schema does not know"))
            .ok_or_else(|| "no item notification the release's schema rejects was sent (none with an unknown item type)".into()),
            ForwardCompatCase::UnknownEnumValues => find(&|m| m.known == Some(true) && m.invalid > 0)
                .map(|m| format!("the app-server sent `{m}` with values outside the release's schema"))
                .ok_or_else(|| "no notification the release's schema rejects was sent (none with an unknown enum value)".into()),
            ForwardCompatCase::UnknownFields => find(&|m| m.extra_fields > 0)
                .map(|m| format!("the app-server sent `{m}` with fields the release's schema does not name"))
                .ok_or_else(|| "no notification carried fields the schema does not name".into()),
        }
    }
}

impl ProtocolCase for ForwardCompat {
    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let Some((seq, summary)) = &self.ex.notifications else {
            return incomplete(
                "the stream has no notifications summary (`protocol.server-notifications`)".into(),
                vec![terminal.evidence()],
            );
        };
        let context = match self.evidence(summary) {
            Ok(context) => context,
            // What the case sends was cut short because the driver left its session first (it
            // ended on something the case sent): that is the finding, not a missing record.
            Err(why) => match self.ex.session_went_on() {
                Err(fault) => {
                    return fault.verdict(
                        &format!("{why}, because the driver's session did not go on"),
                        terminal,
                    )
                }
                Ok(_) => {
                    return incomplete(
                        format!("{why}, so the case shows nothing"),
                        vec![EvidenceRef::at(*seq, "protocol.server-notifications")],
                    )
                }
            },
        };
        finish_session(&self.ex, &context, "", *seq, terminal)
    }
}

/// The session goes on after what the case sent (`context`); `note` is added to a failure.
fn finish_session(
    ex: &Exchange,
    context: &str,
    note: &str,
    evidence_seq: u64,
    terminal: &Terminal,
) -> Verdict {
    match ex.session_went_on() {
        Ok(went_on) => {
            let mut evidence = vec![EvidenceRef::at(evidence_seq, context)];
            evidence.extend(went_on.evidence());
            pass(
                format!(
                    "{context}; the run went on as without it: {}",
                    went_on.describe()
                ),
                evidence,
            )
        }
        Err(fault) => fault.verdict(&format!("{context}{note}"), terminal),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeCase {
    /// A legal line of this many bytes.
    Line(u64),
    DeltaBurst,
    StderrFlood,
}

/// How many deltas the burst sends.
const BURST: u64 = 100_000;
const DELTA: &str = "item/agentMessage/delta";

pub(crate) struct Size {
    case: SizeCase,
    ex: Exchange,
}

impl Size {
    pub(crate) fn new(case: SizeCase) -> Self {
        Self {
            case,
            ex: Exchange::default(),
        }
    }
}

impl ProtocolCase for Size {
    exchange_in_field_ex!();

    fn decide(&self, terminal: &Terminal) -> Verdict {
        let ex = &self.ex;
        let Some((seq, summary)) = &ex.notifications else {
            return incomplete(
                "the stream has no notifications summary (`protocol.server-notifications`)".into(),
                vec![terminal.evidence()],
            );
        };
        let context = match self.case {
            SizeCase::Line(bytes) => {
                let largest = summary.largest_line_bytes;
                let bound = ex.declarations().max_line_bytes;
                // Short of the case's size: the line was cut off (the driver let go of it) or
                // never sent. Either way a session that did not go on is the finding — unless
                // the line cut off was already past the driver's declared bound (below).
                let cut_above_bound = summary
                    .cut_line_bytes
                    .zip(bound)
                    .is_some_and(|(cut, bound)| cut > bound);
                if largest < bytes / 10 * 9 && !cut_above_bound {
                    return match ex.session_went_on() {
                        Err(fault) => fault.verdict(
                            &format!("the longest line the app-server got to send was {largest} bytes of the case's {bytes}, because the driver's session did not go on"),
                            terminal,
                        ),
                        Ok(_) => incomplete(
                            format!("the longest line the app-server sent was {largest} bytes, short of the case's {bytes}, so the case shows nothing"),
                            vec![EvidenceRef::at(*seq, "protocol.server-notifications")],
                        ),
                    };
                }
                let context = if summary.cut_line_bytes == Some(largest) {
                    format!("the app-server was sending a legal line mid-turn when its output was cut off, {largest} bytes into it")
                } else {
                    format!("the app-server sent a legal line of {largest} bytes mid-turn")
                };
                if let Some(bound) = bound.filter(|bound| largest > *bound) {
                    // Above the driver's declared bound a classified failure is allowed.
                    if let End::OnItsOwn { seq: ended, code } = ex.end() {
                        if code != 0 {
                            return pass(
                                format!("{context}, above the driver's declared max_line_bytes of {bound}, and the driver ended on its own with status {code} (a classified failure)"),
                                vec![EvidenceRef::at(*seq, &context), EvidenceRef::at(ended, &format!("driver.ended exited {code}"))],
                            );
                        }
                    }
                }
                context
            }
            SizeCase::DeltaBurst => {
                let deltas = summary
                    .methods
                    .iter()
                    .find(|m| m.method == DELTA)
                    .map_or(0, |m| m.count);
                if deltas < BURST {
                    // Short of the burst: the driver let go in the middle of it (its session
                    // did not go on: the finding), or the burst was never sent.
                    return match ex.session_went_on() {
                        Err(fault) => fault.verdict(
                            &format!("the app-server got to send {deltas} of the case's burst of {BURST} `{DELTA}` notifications, because the driver's session did not go on"),
                            terminal,
                        ),
                        Ok(_) => incomplete(
                            format!("the app-server sent {deltas} `{DELTA}` notifications, fewer than the case's burst of {BURST}, so the case shows nothing"),
                            vec![EvidenceRef::at(*seq, "protocol.server-notifications")],
                        ),
                    };
                }
                format!("the app-server sent a burst of {deltas} `{DELTA}` notifications")
            }
            SizeCase::StderrFlood => {
                "the app-server wrote a flood on its stderr during the turn (an undrained pipe would have stopped it before the turn could complete)".to_string()
            }
        };
        let note = match (self.case, ex.declarations().max_line_bytes) {
            (SizeCase::Line(_), Some(bound)) => {
                format!(" (the driver declares max_line_bytes = {bound})")
            }
            (SizeCase::Line(_), None) => {
                " (the driver declares no line bound, so every legal line must work)".into()
            }
            _ => String::new(),
        };
        finish_session(ex, &context, &note, *seq, terminal)
    }
}
