//! `unsafe-workspaces`: the task names a workspace the runner contract refuses — the filesystem
//! root, a folder holding `HOME`, one inside `CODEX_HOME` — and the driver must refuse it before
//! the provider starts: no launch of the app-server at all (`refused-before-launch`: the tap
//! records every launch, one that never talked included), and a failed run — the driver ends on
//! its own with a non-zero status (`run-failed`, so the driver must declare its outcome) and the
//! terminal gives a reason (`reason-given`).

use super::super::protocol::{pass, Exchange, ProtocolCase};
use crate::events::Capability;
use crate::events::{AppServerLaunched, Body, Ending, Kind, Source};
use crate::grade::protocol::End;
use crate::grade::{documented, fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};

const RULE: &str = "runner contract, workspaces: the filesystem root, a workspace containing the host HOME, or one overlapping CODEX_HOME is refused before the provider starts";

pub(crate) struct UnsafeWorkspace {
    ex: Exchange,
    launches: Vec<(u64, AppServerLaunched)>,
}

impl UnsafeWorkspace {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
            launches: Vec::new(),
        }
    }
}

impl ProtocolCase for UnsafeWorkspace {
    fn exchange(&self) -> &Exchange {
        &self.ex
    }

    fn exchange_mut(&mut self) -> &mut Exchange {
        &mut self.ex
    }

    fn needs(&self) -> &[Capability] {
        &[Capability::Outcome]
    }

    /// A session that never opens is the case.
    fn needs_session(&self) -> bool {
        false
    }

    fn wants_more(&self, kind: Kind) -> bool {
        kind == Kind::AppServerLaunched
    }

    fn observe_more(&mut self, seq: u64, source: Source, body: &Body) {
        if let Body::AppServerLaunched(l) = body {
            if documented(source, body) {
                self.launches.push((seq, l.clone()));
            }
        }
    }

    fn decide(&self, terminal: &Terminal) -> Verdict {
        if let Some((seq, launch)) = self.launches.first() {
            return fail(
                "refused-before-launch",
                format!("the driver launched the app-server (launch {}) for a workspace it must refuse: {RULE}", launch.launch),
                vec![EvidenceRef::at(*seq, &format!("protocol.app-server-launched {}", launch.launch))],
            );
        }
        if let Some((seq, request)) = self.ex.client_requests.first() {
            return fail(
                "refused-before-launch",
                format!(
                    "the driver sent `{}` to an app-server for a workspace it must refuse: {RULE}",
                    request.method
                ),
                vec![EvidenceRef::at(*seq, &request.method)],
            );
        }
        let (seq, code) = match self.ex.end() {
            End::OnItsOwn { seq, code } => (seq, code),
            end => {
                return end
                    .verdict("the driver was given an unsafe workspace")
                    .unwrap_or_else(|| terminal_verdict(terminal))
            }
        };
        if code == 0 || terminal.ended.ending == Ending::Succeeded {
            return fail(
                "run-failed",
                format!("the driver launched nothing but exited with status {code}, reporting success for a run it refused: a refused workspace is a failed run ({RULE})"),
                vec![EvidenceRef::at(seq, &format!("driver.ended exited {code}")), terminal.evidence()],
            );
        }
        let Some(reason) = terminal
            .ended
            .reason
            .as_deref()
            .filter(|r| !r.trim().is_empty())
        else {
            return fail(
                "reason-given",
                "the run failed without a reason: a refused workspace must say why",
                vec![terminal.evidence()],
            );
        };
        pass(
            format!("the driver refused the workspace before launching the app-server and ended its run failed (status {code}): {reason}"),
            vec![EvidenceRef::at(seq, &format!("driver.ended exited {code}")), terminal.evidence()],
        )
    }
}

fn terminal_verdict(terminal: &Terminal) -> Verdict {
    super::super::protocol::incomplete(
        "how the driver's process ended is not known".into(),
        vec![terminal.evidence()],
    )
}
