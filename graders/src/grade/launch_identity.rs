//! `launch-identity` / `resume-after-profile-change`: a thread started under one launch is
//! resumed after the profile's rules changed; the launch identity must not change with the
//! profile's filesystem/network rules, and the resumed session must be the same thread.
//!
//! How the run records it (one stream holds both launches):
//! - `run.started.launch.identity` is the identity of the first launch;
//! - each further launch in the run is a `diagnostic` whose message starts with
//!   `launch-identity=<identity>`;
//! - the resume is a `diagnostic` whose message starts with `resume-thread=<thread id>`.
//!
//! Pass: the first identity is non-empty, every later launch identity equals it, a resume was
//! recorded, a `session.started` after it carries the resumed thread id, and the run ended
//! `succeeded`.

use super::{fail, Grader, Terminal};
use crate::events::{Body, Ending, Kind};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

pub(crate) const LAUNCH_IDENTITY_PREFIX: &str = "launch-identity=";
pub(crate) const RESUME_THREAD_PREFIX: &str = "resume-thread=";

fn token_after<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    Some(rest.split_whitespace().next().unwrap_or(""))
}

#[derive(Debug, Default)]
pub(crate) struct LaunchIdentity {
    first: Option<(u64, String)>,
    relaunches: u64,
    mismatch: Option<(u64, String)>,
    resume: Option<(u64, String)>,
    resumed_session: Option<u64>,
    last_session: Option<(u64, String)>,
}

impl Grader for LaunchIdentity {
    fn wants(&self, kind: Kind) -> bool {
        matches!(
            kind,
            Kind::RunStarted | Kind::Diagnostic | Kind::SessionStarted
        )
    }

    fn observe(&mut self, seq: u64, body: &Body) {
        match body {
            Body::RunStarted(run) if self.first.is_none() => {
                self.first = Some((seq, run.launch.identity.clone()));
            }
            Body::Diagnostic(d) => {
                if let Some(identity) = token_after(&d.message, LAUNCH_IDENTITY_PREFIX) {
                    self.relaunches += 1;
                    let differs = self
                        .first
                        .as_ref()
                        .is_none_or(|(_, first)| first != identity);
                    if differs && self.mismatch.is_none() {
                        self.mismatch = Some((seq, d.message.clone()));
                    }
                } else if let Some(thread) = token_after(&d.message, RESUME_THREAD_PREFIX) {
                    if self.resume.is_none() && !thread.is_empty() {
                        self.resume = Some((seq, thread.to_string()));
                    }
                }
            }
            Body::SessionStarted(s) => {
                if let Some((_, thread)) = &self.resume {
                    if *thread == s.thread_id && self.resumed_session.is_none() {
                        self.resumed_session = Some(seq);
                    }
                }
                self.last_session = Some((seq, s.thread_id.clone()));
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        let Some((first_seq, identity)) = &self.first else {
            return fail(
                "identity-present",
                "the run has no run.started event",
                vec![terminal.evidence()],
            );
        };
        let first_ev = EvidenceRef::at(*first_seq, &format!("launch identity {identity}"));
        if identity.trim().is_empty() {
            return fail(
                "identity-present",
                "run.started.launch.identity is empty",
                vec![first_ev],
            );
        }
        if let Some((seq, message)) = &self.mismatch {
            return fail(
                "identity-stable",
                format!("a later launch recorded a different identity than `{identity}`"),
                vec![first_ev, EvidenceRef::at(*seq, message)],
            );
        }
        let Some((resume_seq, thread)) = &self.resume else {
            return fail(
                "thread-resumed",
                format!("no `{RESUME_THREAD_PREFIX}<thread id>` diagnostic records a resume"),
                vec![first_ev, terminal.evidence()],
            );
        };
        let resume_ev = EvidenceRef::at(*resume_seq, &format!("resume thread {thread}"));
        let Some(session_seq) = self.resumed_session else {
            let mut evidence = vec![first_ev, resume_ev];
            evidence.extend(
                self.last_session
                    .as_ref()
                    .map(|(s, t)| EvidenceRef::at(*s, &format!("session started, thread {t}"))),
            );
            return fail(
                "thread-resumed",
                format!("no session.started after the resume carries thread `{thread}`"),
                evidence,
            );
        };
        if terminal.ended.ending != Ending::Succeeded {
            return fail(
                "run-succeeded",
                format!("the run ended {}", terminal.ending_name()),
                vec![terminal.evidence()],
            );
        }
        Verdict::new(
            VerdictKind::Pass,
            format!(
                "launch identity `{identity}` unchanged across {} launch(es); thread `{thread}` resumed",
                self.relaunches + 1
            ),
            vec![
                first_ev,
                resume_ev,
                EvidenceRef::at(session_seq, &format!("session started, thread {thread}")),
                terminal.evidence(),
            ],
        )
    }
}
