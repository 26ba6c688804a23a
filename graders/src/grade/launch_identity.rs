//! `launch-identity` / `resume-after-profile-change`: a thread started under one launch is
//! resumed after the profile's rules changed; the launch identity must not change with the
//! profile's filesystem/network rules, and the resumed session must be the same thread.
//!
//! How the run records it (one stream holds both launches): `run.started.launch` is the first
//! launch; each further launch is a `session.relaunched` event carrying its identity, argv,
//! profile and the saved thread it resumes (`resume_thread`, `null` when it starts a new one).
//!
//! Checks, in order (the first that fails decides):
//! 1. `identity-present`: the first launch identity is non-empty. A run whose first session
//!    never opened is then `startup-rejected` quoting the provider (or `incomplete`), see
//!    `docs/events.md`.
//! 2. `relaunched`: a `session.relaunched` is recorded.
//! 3. `identity-stable`: every relaunch identity equals the first.
//! 4. `rules-changed`: the profile the relaunch selects has other rules in the relaunch argv
//!    than the profile the first launch selected has in the first argv — the parsed
//!    `permissions.NAME` tables compared (see `launch_config`), never the argv text. Equal
//!    identities across identical rules would pass for a driver whose identity *does* depend
//!    on the rules, so such a run is `fail`; rules the argv does not show are `incomplete`.
//! 5. `thread-resumed`: the relaunch resumes the thread the earlier launch started, and a later
//!    `session.started` carries it.
//! 6. `run-succeeded`: the run ended `succeeded`.

use super::launch_config::LaunchConfig;
use super::session::SessionWatch;
use super::{fail, Grader, Terminal};
use crate::events::{Body, Kind, PolicyGeneration, SessionRelaunched, Source};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

/// The first launch, from `run.started`.
#[derive(Debug)]
struct FirstLaunch {
    seq: u64,
    identity: String,
    policy: PolicyGeneration,
    argv: Vec<String>,
    thread_permissions: Option<String>,
}

/// A relaunch, and the thread the run's sessions had started before it.
#[derive(Debug)]
struct Relaunch {
    seq: u64,
    event: SessionRelaunched,
    /// The last `session.started` before the relaunch: the thread an earlier launch saved.
    saved_thread: Option<(u64, String)>,
}

impl Relaunch {
    fn evidence(&self) -> EvidenceRef {
        let e = &self.event;
        EvidenceRef::at(
            self.seq,
            &format!(
                "session.relaunched identity {} policy {} permissions {} resume_thread {}",
                e.identity,
                policy_name(e.policy),
                e.thread_permissions.as_deref().unwrap_or("-"),
                e.resume_thread.as_deref().unwrap_or("-"),
            ),
        )
    }
}

fn policy_name(policy: PolicyGeneration) -> &'static str {
    match policy {
        PolicyGeneration::Current => "current",
        PolicyGeneration::Legacy => "legacy",
    }
}

// Only the first relaunch, the first resuming one and the first mismatch are kept, so a stream
// with any number of relaunches is graded in bounded memory.
#[derive(Debug, Default)]
pub(crate) struct LaunchIdentity {
    first: Option<FirstLaunch>,
    relaunches: u64,
    first_relaunch: Option<Relaunch>,
    resuming: Option<Relaunch>,
    mismatch: Option<(u64, SessionRelaunched)>,
    /// The first `session.started` after the resuming relaunch that carries its thread.
    resumed_session: Option<u64>,
    last_session: Option<(u64, String)>,
    session: SessionWatch,
}

impl Grader for LaunchIdentity {
    fn wants(&self, kind: Kind) -> bool {
        // `SessionWatch` asks for `session.started`, which the resume check reads too.
        SessionWatch::wants(kind) || matches!(kind, Kind::RunStarted | Kind::SessionRelaunched)
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.session.observe(seq, source, body);
        if !super::documented(source, body) {
            return;
        }
        match body {
            Body::RunStarted(run) if self.first.is_none() => {
                self.first = Some(FirstLaunch {
                    seq,
                    identity: run.launch.identity.clone(),
                    policy: run.launch.policy,
                    argv: run.launch.argv.clone(),
                    thread_permissions: run.launch.thread_permissions.clone(),
                });
            }
            Body::SessionRelaunched(event) => self.observe_relaunch(seq, event),
            Body::SessionStarted(s) => {
                if let Some(resuming) = &self.resuming {
                    let carries = resuming.event.resume_thread.as_deref() == Some(&s.thread_id);
                    if carries && self.resumed_session.is_none() {
                        self.resumed_session = Some(seq);
                    }
                }
                self.last_session = Some((seq, s.thread_id.clone()));
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        self.judge(terminal).unwrap_or_else(|decided| decided)
    }
}

/// The evidence of the first launch's identity.
fn identity_evidence(first: &FirstLaunch) -> EvidenceRef {
    let identity = &first.identity;
    EvidenceRef::at(first.seq, &format!("launch identity {identity}"))
}

impl LaunchIdentity {
    /// The checks in order; `Err` is the verdict of the first that decides.
    fn judge(&self, terminal: &Terminal) -> Result<Verdict, Verdict> {
        let (first, first_relaunch) = self.identity_stable(terminal)?;
        let first_ev = identity_evidence(first);
        let change = self.rules_changed(first, first_relaunch, &first_ev)?;
        let (resuming, session_seq) = self.thread_resumed(first_relaunch, &first_ev, terminal)?;
        let identity = &first.identity;
        let thread = resuming.event.resume_thread.as_deref().unwrap_or_default();
        let relaunch_ev = resuming.evidence();
        if let Some(failed) = terminal.fail_unless_succeeded(|| vec![terminal.evidence()]) {
            return Err(failed);
        }
        Ok(Verdict::new(
            VerdictKind::Pass,
            format!(
                "launch identity `{identity}` unchanged across {} launch(es) although {} changed its rules ({} -> {}); thread `{thread}` resumed",
                self.relaunches + 1,
                change.describe(),
                policy_name(first.policy),
                policy_name(resuming.event.policy),
            ),
            vec![
                first_ev,
                EvidenceRef::at(first.seq, &change.first_source),
                relaunch_ev,
                EvidenceRef::at(resuming.seq, &change.relaunch_source),
                EvidenceRef::at(session_seq, &format!("session started, thread {thread}")),
                terminal.evidence(),
            ],
        ))
    }

    /// Checks 1 to 3 (`identity-present`, `relaunched`, `identity-stable`): the first launch
    /// and the first relaunch.
    fn identity_stable(&self, terminal: &Terminal) -> Result<(&FirstLaunch, &Relaunch), Verdict> {
        let Some(first) = &self.first else {
            return Err(fail(
                "identity-present",
                "the run has no run.started event",
                vec![terminal.evidence()],
            ));
        };
        let identity = &first.identity;
        let first_ev = identity_evidence(first);
        if identity.trim().is_empty() {
            return Err(fail(
                "identity-present",
                "run.started.launch.identity is empty",
                vec![first_ev],
            ));
        }
        if let Some(verdict) = self.session.never_opened(terminal) {
            return Err(verdict);
        }
        let Some(first_relaunch) = &self.first_relaunch else {
            return Err(fail(
                "relaunched",
                "no session.relaunched records a second launch, so nothing was resumed",
                vec![first_ev, terminal.evidence()],
            ));
        };
        if let Some((seq, other)) = &self.mismatch {
            return Err(fail(
                "identity-stable",
                format!(
                    "a relaunch recorded the identity `{}`, not the first launch's `{identity}`",
                    other.identity
                ),
                vec![
                    first_ev,
                    EvidenceRef::at(*seq, &format!("relaunch identity {}", other.identity)),
                ],
            ));
        }
        Ok((first, first_relaunch))
    }

    /// Check 4 (`rules-changed`): how the judged relaunch's rules differ from the first
    /// launch's.
    fn rules_changed(
        &self,
        first: &FirstLaunch,
        first_relaunch: &Relaunch,
        first_ev: &EvidenceRef,
    ) -> Result<RulesChange, Verdict> {
        // The relaunch whose resume is judged; without one, the first relaunch.
        let judged = self.resuming.as_ref().unwrap_or(first_relaunch);
        let change = match rules_change(first, &judged.event) {
            Ok(change) => change,
            Err(RulesUnknown(why)) => {
                return Err(Verdict::new(
                    VerdictKind::Incomplete,
                    format!("whether the relaunch changed the profile rules is not shown: {why}"),
                    vec![first_ev.clone(), judged.evidence()],
                ))
            }
        };
        if !change.differs {
            return Err(fail(
                "rules-changed",
                format!(
                    "the case did not change the rules: {} has the same rules in the first launch (policy `{}`) and the relaunch (policy `{}`), so an unchanged identity proves nothing",
                    change.describe(),
                    policy_name(first.policy),
                    policy_name(judged.event.policy),
                ),
                vec![
                    first_ev.clone(),
                    EvidenceRef::at(first.seq, &change.first_source),
                    judged.evidence(),
                    EvidenceRef::at(judged.seq, &change.relaunch_source),
                ],
            ));
        }
        Ok(change)
    }

    /// Check 5 (`thread-resumed`): the resuming relaunch, and the session that carries its
    /// thread.
    fn thread_resumed(
        &self,
        first_relaunch: &Relaunch,
        first_ev: &EvidenceRef,
        terminal: &Terminal,
    ) -> Result<(&Relaunch, u64), Verdict> {
        let Some(resuming) = &self.resuming else {
            return Err(fail(
                "thread-resumed",
                "the relaunch started a new thread (session.relaunched.resume_thread is null) although the launch identity is unchanged",
                vec![first_ev.clone(), first_relaunch.evidence(), terminal.evidence()],
            ));
        };
        let thread = resuming.event.resume_thread.as_deref().unwrap_or_default();
        let relaunch_ev = resuming.evidence();
        match &resuming.saved_thread {
            Some((_, saved)) if saved == thread => {}
            saved => {
                let mut evidence = vec![first_ev.clone()];
                let detail = match saved {
                    Some((seq, saved)) => {
                        evidence.push(EvidenceRef::at(
                            *seq,
                            &format!("session started, thread {saved}"),
                        ));
                        format!("the relaunch resumes thread `{thread}`, but the earlier launch's session was thread `{saved}`")
                    }
                    None => format!(
                        "the relaunch resumes thread `{thread}`, but no session.started before it shows that thread"
                    ),
                };
                evidence.push(relaunch_ev);
                return Err(fail("thread-resumed", detail, evidence));
            }
        }
        let Some(session_seq) = self.resumed_session else {
            let mut evidence = vec![first_ev.clone(), relaunch_ev];
            evidence.extend(
                self.last_session
                    .as_ref()
                    .filter(|(s, _)| *s > resuming.seq)
                    .map(|(s, t)| EvidenceRef::at(*s, &format!("session started, thread {t}"))),
            );
            evidence.push(terminal.evidence());
            return Err(fail(
                "thread-resumed",
                format!("no session.started after the relaunch carries thread `{thread}`"),
                evidence,
            ));
        };
        Ok((resuming, session_seq))
    }
}

impl LaunchIdentity {
    fn observe_relaunch(&mut self, seq: u64, event: &SessionRelaunched) {
        self.relaunches += 1;
        let saved_thread = self.last_session.clone();
        let relaunch = || Relaunch {
            seq,
            event: event.clone(),
            saved_thread: saved_thread.clone(),
        };
        let differs = self
            .first
            .as_ref()
            .is_none_or(|first| first.identity != event.identity);
        if differs && self.mismatch.is_none() {
            self.mismatch = Some((seq, event.clone()));
        }
        let resumes = event
            .resume_thread
            .as_deref()
            .is_some_and(|t| !t.is_empty());
        if resumes && self.resuming.is_none() {
            self.resuming = Some(relaunch());
        }
        if self.first_relaunch.is_none() {
            self.first_relaunch = Some(relaunch());
        }
    }
}

/// Why the rules of a launch's profile are not shown.
struct RulesUnknown(String);

/// The rules a launch's selected profile has: a built-in (fixed by Codex) or a table the argv
/// defines.
#[derive(Debug, PartialEq)]
enum Rules {
    Builtin(String),
    Table(toml::Table),
}

/// The profiles two launches select and whether their rules differ.
struct RulesChange {
    first_profile: String,
    relaunch_profile: String,
    differs: bool,
    /// What set each launch's rules, for evidence.
    first_source: String,
    relaunch_source: String,
}

impl RulesChange {
    fn describe(&self) -> String {
        if self.first_profile == self.relaunch_profile {
            format!("the profile `{}`", self.first_profile)
        } else {
            format!(
                "the profile (`{}`, then `{}`)",
                self.first_profile, self.relaunch_profile
            )
        }
    }
}

fn rules_change(
    first: &FirstLaunch,
    relaunch: &SessionRelaunched,
) -> Result<RulesChange, RulesUnknown> {
    let (first_profile, first_rules, first_source) = rules_in_force(
        "the first launch",
        &first.argv,
        first.thread_permissions.as_deref(),
    )?;
    let (relaunch_profile, relaunch_rules, relaunch_source) = rules_in_force(
        "the relaunch",
        &relaunch.argv,
        relaunch.thread_permissions.as_deref(),
    )?;
    Ok(RulesChange {
        differs: first_rules != relaunch_rules,
        first_profile,
        relaunch_profile,
        first_source,
        relaunch_source,
    })
}

/// The profile a launch selects, its rules and the argv element that set them.
fn rules_in_force(
    which: &str,
    argv: &[String],
    explicit: Option<&str>,
) -> Result<(String, Rules, String), RulesUnknown> {
    let unknown = |why: String| RulesUnknown(format!("{which}: {why}"));
    let config = LaunchConfig::parse(argv).map_err(|e| unknown(e.to_string()))?;
    let profile = config.selected_profile(explicit).map_err(unknown)?;
    if profile.starts_with(':') {
        let source = format!("{which} selects the built-in profile `{profile}`");
        return Ok((profile.clone(), Rules::Builtin(profile), source));
    }
    match config.profile_table(&profile) {
        None => Err(unknown(format!(
            "the profile `{profile}` is not defined in the argv (`-c permissions.{profile}=…`), so its rules are not shown"
        ))),
        Some(Err(why)) => Err(unknown(why)),
        Some(Ok(table)) => {
            let source = config
                .source_of(&["permissions", &profile])
                .unwrap_or_default()
                .to_string();
            Ok((profile, Rules::Table(table.clone()), source))
        }
    }
}
