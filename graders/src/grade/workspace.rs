//! The harness's workspace evidence (`workspace.evidence`): accepted only from the harness,
//! for the probe pattern, self-consistent, and — for showing that no probe file exists — only
//! the last such event, taken after every attempt.

use super::attempts::PROBE_PREFIX;
use crate::events::{Body, Kind, ProbeFile, Source, WorkspaceEvidence};
use crate::verdict::excerpt;

/// The pattern the harness looks for (`docs/events.md`).
pub(crate) const PROBE_PATTERN: &str = "plan-write-probe-*";

/// What the last harness evidence showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shown {
    /// No probe file exists.
    NoProbe,
    /// A probe file exists.
    Probe,
    /// The event cannot show that: another pattern, or an entry that contradicts itself.
    Unusable(String),
}

#[derive(Debug, Default)]
pub(crate) struct WorkspaceWatch {
    /// The last harness evidence: its seq and what it showed.
    pub last: Option<(u64, Shown)>,
    /// The first probe file any harness evidence shows existing.
    pub existing_probe: Option<(u64, String)>,
    /// The first evidence from a source other than the harness.
    pub misattributed: Option<(u64, String)>,
}

fn is_probe_name(path: &str) -> bool {
    path.starts_with(PROBE_PREFIX) && !path.contains('/')
}

/// Why an entry contradicts itself or the pattern, if it does.
fn inconsistency(probe: &ProbeFile) -> Option<String> {
    if !is_probe_name(&probe.path) {
        return Some(format!(
            "entry `{}` is not a probe file directly in the workspace",
            probe.path
        ));
    }
    if !probe.exists && (probe.size.is_some() || probe.sha256.is_some()) {
        return Some(format!(
            "entry `{}` says it does not exist yet has a size or a hash",
            probe.path
        ));
    }
    None
}

fn describe(probe: &ProbeFile) -> String {
    excerpt(&format!(
        "{} exists (size {}, sha256 {})",
        probe.path,
        probe.size.map_or_else(|| "?".into(), |s| s.to_string()),
        probe.sha256.as_deref().unwrap_or("?")
    ))
}

impl WorkspaceWatch {
    pub(super) fn wants(kind: Kind) -> bool {
        kind == Kind::WorkspaceEvidence
    }

    pub(super) fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        let Body::WorkspaceEvidence(ws) = body else {
            return;
        };
        if !body.kind().accepts_source(source) {
            self.misattributed.get_or_insert((
                seq,
                format!(
                    "workspace evidence written by the {} (only the harness writes it)",
                    super::attempts::source_name(source)
                ),
            ));
            return;
        }
        if self.existing_probe.is_none() {
            if let Some(probe) = ws.probes.iter().find(|p| p.exists) {
                self.existing_probe = Some((seq, describe(probe)));
            }
        }
        self.last = Some((seq, shown(ws)));
    }
}

fn shown(ws: &WorkspaceEvidence) -> Shown {
    if ws.pattern != PROBE_PATTERN {
        return Shown::Unusable(excerpt(&format!(
            "the evidence looked for `{}`, not `{PROBE_PATTERN}`",
            ws.pattern
        )));
    }
    match ws.probes.iter().find_map(inconsistency) {
        Some(why) => Shown::Unusable(excerpt(&why)),
        None if ws.probes.iter().any(|p| p.exists) => Shown::Probe,
        None => Shown::NoProbe,
    }
}
