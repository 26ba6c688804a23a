//! `resume-reconciliation`: after the app-server died mid-turn, recovery is a new transport,
//! `thread/read` of the saved thread to check its identity and working directory
//! (`read-before-resume`, `identity-checked`: a read that answers for another thread or another
//! folder must stop the recovery), `thread/resume` of exactly that thread
//! (`resumed-exact-thread`), `thread/read` again with the thread's turns (`read-after-resume`),
//! and a reconciliation where only the saved live turn counts (`reconciled`): still in progress,
//! the driver starts no other turn before it ends; terminal, the run may go on (and must, to a
//! completed turn); missing, or another turn in progress, is a recoverable failure — no further
//! turn on that thread, and the driver ends on its own with a non-zero status.

use super::super::protocol::{incomplete, pass, Exchange, ProtocolCase};
use crate::events::Capability;
use crate::events::{ClientRequest, ClientRequestAnswered, TurnStatus};
use crate::grade::protocol::End;
use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};

const RULE: &str = "runner contract, recovery: a new app-server transport; thread/read of the persisted thread to check identity and working directory; thread/resume; thread/read again to reconcile — only the persisted active turn counts: kept if active, ended if terminal, a recoverable failure if missing or if another turn is active";

pub(crate) struct ResumeReconciliation {
    ex: Exchange,
}

impl ResumeReconciliation {
    pub(crate) fn new() -> Self {
        Self {
            ex: Exchange::default(),
        }
    }
}

fn request_at(seq: u64, r: &ClientRequest) -> EvidenceRef {
    EvidenceRef::at(
        seq,
        &format!(
            "{} id {} launch {} threadId {}",
            r.method,
            r.id,
            r.launch,
            r.thread_id.as_deref().unwrap_or("-")
        ),
    )
}

/// A `thread/read` of the driver (where, what) and the app-server's answer to it, if any.
type Read<'a> = (
    u64,
    &'a ClientRequest,
    Option<(u64, &'a ClientRequestAnswered)>,
);

/// What the second read says of the saved turn.
enum Found<'a> {
    Active,
    Terminal(&'a str),
    Missing,
    OtherActive(&'a str),
}

fn find<'a>(turns: &'a [TurnStatus], saved: &str) -> Found<'a> {
    if let Some(other) = turns
        .iter()
        .find(|t| t.id != saved && t.status == "inProgress")
    {
        return Found::OtherActive(&other.id);
    }
    match turns.iter().find(|t| t.id == saved) {
        None => Found::Missing,
        Some(t) if t.status == "inProgress" => Found::Active,
        Some(t) => Found::Terminal(&t.status),
    }
}

impl ResumeReconciliation {
    /// The first `thread/read` of `thread` after `after`, on launch `min_launch` or a later
    /// one, with its answer.
    fn read_after(&self, after: u64, min_launch: u64, thread: &str) -> Option<Read<'_>> {
        self.ex
            .client_requests
            .iter()
            .find(|(seq, r)| {
                *seq > after
                    && r.launch >= min_launch
                    && r.method == "thread/read"
                    && r.thread_id.as_deref() == Some(thread)
            })
            .map(|(seq, r)| (*seq, r, self.ex.answer_of(r)))
    }

    /// The driver's requests after `seq` on `launch` of `method`.
    fn later(&self, seq: u64, launch: u64, method: &str) -> Option<&(u64, ClientRequest)> {
        self.ex
            .client_requests
            .iter()
            .find(|(at, r)| *at > seq && r.launch == launch && r.method == method)
    }

    /// The driver stopped after a failed recovery: no turn on the launch after `seq`, and it
    /// ended on its own, non-zero.
    fn stopped(&self, seq: u64, launch: u64, what: &str, evidence: Vec<EvidenceRef>) -> Verdict {
        if let Some((at, turn)) = self.later(seq, launch, "turn/start") {
            let mut evidence = evidence;
            evidence.push(request_at(*at, turn));
            return fail(
                "reconciled",
                format!("{what}, yet the driver went on with turn/start: {RULE}"),
                evidence,
            );
        }
        match self.ex.end() {
            End::OnItsOwn { seq: ended, code: 0 } => fail(
                "reconciled",
                format!("{what}, yet the driver exited with status 0: a recovery that cannot be reconciled is a (recoverable) failure, not a success"),
                vec![EvidenceRef::at(ended, "driver.ended exited 0")],
            ),
            End::OnItsOwn { seq: ended, code } => {
                let mut evidence = evidence;
                evidence.push(EvidenceRef::at(ended, &format!("driver.ended exited {code}")));
                pass(
                    format!("{what}; the driver started no further turn and ended its run failed (status {code})"),
                    evidence,
                )
            }
            end => end
                .verdict(what)
                .unwrap_or_else(|| incomplete(what.to_string(), vec![])),
        }
    }
}

impl ProtocolCase for ResumeReconciliation {
    fn exchange(&self) -> &Exchange {
        &self.ex
    }

    fn exchange_mut(&mut self) -> &mut Exchange {
        &mut self.ex
    }

    fn needs(&self) -> &[Capability] {
        &[Capability::Resume, Capability::Outcome]
    }

    fn decide(&self, terminal: &Terminal) -> Verdict {
        self.recovery(terminal).unwrap_or_else(|early| early)
    }
}

/// The crash a recovery follows: the app-server of `launch` went away on its own at `seq` while
/// the driver's turn `saved_turn` of `thread` was running.
struct Crash<'a> {
    seq: u64,
    launch: u64,
    saved_turn: String,
    thread: String,
    /// The working directory the thread was opened with.
    saved_cwd: &'a Option<String>,
    at: EvidenceRef,
}

/// The driver's first read of the saved thread after the crash, answered for that thread and
/// its folder as saved, on the app-server of `launch`.
struct CheckedRead {
    launch: u64,
    at: EvidenceRef,
}

/// The driver's resume of exactly the saved thread (sent at `seq`), answered for it at
/// `answered`.
struct Resumed<'a> {
    seq: u64,
    request: &'a ClientRequest,
    answered: u64,
}

impl ResumeReconciliation {
    /// The recovery, stage by stage; `Err` is the verdict of the first stage that failed or
    /// left nothing to judge.
    fn recovery(&self, terminal: &Terminal) -> Result<Verdict, Verdict> {
        let crash = self.crash(terminal)?;
        let reopening = self.reopening(&crash);
        let read = self.checked_read(&crash, reopening, terminal)?;
        let resumed = self.resumed(&crash, reopening, &read, terminal)?;
        let (second_answer_seq, turns) = self.second_read(&crash, &read, &resumed, terminal)?;
        Ok(self.reconcile(&crash, &read, second_answer_seq, turns, terminal))
    }

    /// Where the app-server went away on its own during the driver's turn, and the thread to
    /// recover.
    fn crash(&self, terminal: &Terminal) -> Result<Crash<'_>, Verdict> {
        let ex = &self.ex;
        let crash = ex.exits.iter().find_map(|(seq, e)| {
            let live = ex.live_own_turns_at(*seq);
            (!e.ended_by_the_driver() && !live.is_empty()).then(|| (*seq, e, live[0].to_string()))
        });
        let Some((crash_seq, crash, saved_turn)) = crash else {
            return Err(incomplete(
                "the app-server did not go away on its own while the driver's turn was running, so the case shows nothing about recovery".into(),
                vec![terminal.evidence()],
            ));
        };
        let opener = ex
            .own_threads()
            .into_iter()
            .rfind(|(seq, a)| a.launch == crash.launch && *seq < crash_seq);
        let Some((_, opener)) = opener else {
            return Err(incomplete(
                "no session of the crashed launch is known, so the thread to recover is not".into(),
                vec![EvidenceRef::at(crash_seq, "protocol.app-server-exited")],
            ));
        };
        let thread = opener.thread_id.clone().unwrap_or_default();
        let at = EvidenceRef::at(
            crash_seq,
            &format!(
                "launch {} exited on its own during turn {saved_turn}",
                crash.launch
            ),
        );
        Ok(Crash {
            seq: crash_seq,
            launch: crash.launch,
            saved_turn,
            thread,
            saved_cwd: &opener.cwd,
            at,
        })
    }

    /// The driver's first request after the crash that opens a thread on a new app-server.
    fn reopening(&self, crash: &Crash) -> Option<&(u64, ClientRequest)> {
        self.ex.client_requests.iter().find(|(seq, r)| {
            *seq > crash.seq
                && r.launch > crash.launch
                && matches!(
                    r.method.as_str(),
                    "thread/resume" | "thread/start" | "thread/fork"
                )
        })
    }

    /// `read-before-resume` and `identity-checked`: the driver read the saved thread on a new
    /// app-server before anything else, and went on only when the answer was that thread in
    /// its folder.
    fn checked_read(
        &self,
        crash: &Crash,
        reopening: Option<&(u64, ClientRequest)>,
        terminal: &Terminal,
    ) -> Result<CheckedRead, Verdict> {
        let thread = &crash.thread;
        let Some((first_read_seq, first_read, first_answer)) =
            self.read_after(crash.seq, crash.launch + 1, thread)
        else {
            return Err(fail(
                "read-before-resume",
                format!("after the crash the driver never read the saved thread {thread} (thread/read) on a new app-server: {RULE}"),
                vec![crash.at.clone(), terminal.evidence()],
            ));
        };
        if let Some((resume_seq, r)) = reopening {
            if *resume_seq < first_read_seq {
                return Err(fail(
                    "read-before-resume",
                    format!(
                        "the driver sent {} before it read the saved thread {thread}: {RULE}",
                        r.method
                    ),
                    vec![
                        crash.at.clone(),
                        request_at(*resume_seq, r),
                        request_at(first_read_seq, first_read),
                    ],
                ));
            }
        }
        let launch = first_read.launch;
        let Some((first_answer_seq, first_answer)) = first_answer else {
            return Err(incomplete(
                "the app-server never answered the driver's first thread/read".into(),
                vec![crash.at.clone(), request_at(first_read_seq, first_read)],
            ));
        };
        let read_at = EvidenceRef::at(first_answer_seq, "thread/read answered");
        // What the read told the driver about the saved thread.
        let identity_broken = match &first_answer.error {
            Some(e) => Some(format!(
                "the app-server refused thread/read of {thread}: {}",
                e.message
            )),
            None if first_answer.thread_id.as_deref() != Some(thread.as_str()) => Some(format!(
                "thread/read of {thread} answered for thread {}",
                first_answer.thread_id.as_deref().unwrap_or("(none)")
            )),
            None if crash.saved_cwd.is_some() && &first_answer.cwd != crash.saved_cwd => {
                Some(format!(
                    "the saved thread {thread} reads back with the working directory {}, not {}",
                    first_answer.cwd.as_deref().unwrap_or("(none)"),
                    crash.saved_cwd.as_deref().unwrap_or("(none)")
                ))
            }
            None => None,
        };
        if let Some(broken) = identity_broken {
            if let Some((seq, r)) = self.later(first_answer_seq, launch, "thread/resume") {
                return Err(fail(
                    "identity-checked",
                    format!("{broken}, and the driver resumed anyway: {RULE}"),
                    vec![crash.at.clone(), read_at, request_at(*seq, r)],
                ));
            }
            return Err(self.stopped(
                first_answer_seq,
                launch,
                &broken,
                vec![crash.at.clone(), read_at],
            ));
        }
        Ok(CheckedRead {
            launch,
            at: read_at,
        })
    }

    /// `resumed-exact-thread`: the driver's reopening was `thread/resume` of the saved thread,
    /// and the app-server resumed that thread.
    fn resumed<'s>(
        &'s self,
        crash: &Crash,
        reopening: Option<&'s (u64, ClientRequest)>,
        read: &CheckedRead,
        terminal: &Terminal,
    ) -> Result<Resumed<'s>, Verdict> {
        let thread = &crash.thread;
        let Some((resume_seq, resume)) = reopening else {
            return Err(fail(
                "resumed-exact-thread",
                format!(
                    "after reading the saved thread {thread} the driver never resumed it: {RULE}"
                ),
                vec![crash.at.clone(), read.at.clone(), terminal.evidence()],
            ));
        };
        if resume.method != "thread/resume" || resume.thread_id.as_deref() != Some(thread.as_str())
        {
            return Err(fail(
                "resumed-exact-thread",
                format!(
                    "after the crash the driver sent `{}` with threadId {}, not thread/resume of its thread {thread}",
                    resume.method,
                    resume.thread_id.as_deref().unwrap_or("(none)")
                ),
                vec![crash.at.clone(), request_at(*resume_seq, resume)],
            ));
        }
        let Some((resumed_seq, resumed)) = self.ex.answer_of(resume) else {
            return Err(incomplete(
                "the app-server never answered the driver's thread/resume".into(),
                vec![crash.at.clone(), request_at(*resume_seq, resume)],
            ));
        };
        if resumed.error.is_some() || resumed.thread_id.as_deref() != Some(thread.as_str()) {
            let what = format!(
                "the resume of {thread} was answered {}",
                resumed.error.as_ref().map_or_else(
                    || format!(
                        "with thread {}",
                        resumed.thread_id.as_deref().unwrap_or("(none)")
                    ),
                    |e| format!("with the error {}", e.message)
                )
            );
            return Err(self.stopped(resumed_seq, read.launch, &what, vec![crash.at.clone()]));
        }
        Ok(Resumed {
            seq: *resume_seq,
            request: resume,
            answered: resumed_seq,
        })
    }

    /// `read-after-resume`: the driver read the resumed thread again with its turns before it
    /// started any turn on it; where that read was answered, and the turns.
    fn second_read<'s>(
        &'s self,
        crash: &Crash,
        read: &CheckedRead,
        resumed: &Resumed,
        terminal: &Terminal,
    ) -> Result<(u64, &'s [TurnStatus]), Verdict> {
        let (thread, saved_turn) = (&crash.thread, &crash.saved_turn);
        let launch = read.launch;
        let Some((second_seq, second, second_answer)) =
            self.read_after(resumed.answered, launch, thread)
        else {
            return Err(fail(
                "read-after-resume",
                format!("after resuming {thread} the driver never read it again to reconcile the turn that was running ({saved_turn}): {RULE}"),
                vec![crash.at.clone(), request_at(resumed.seq, resumed.request), terminal.evidence()],
            ));
        };
        let Some((second_answer_seq, turns)) =
            second_answer.and_then(|(seq, a)| a.turns.as_deref().map(|t| (seq, t)))
        else {
            return Err(fail(
                "read-after-resume",
                format!("the driver's second thread/read of {thread} listed no turns (no includeTurns, or refused), so it reconciles nothing: {RULE}"),
                vec![crash.at.clone(), request_at(second_seq, second)],
            ));
        };
        if let Some((seq, turn)) = self.later(resumed.seq, launch, "turn/start") {
            if *seq < second_seq {
                return Err(fail(
                    "read-after-resume",
                    format!("the driver started a turn on the resumed thread before it reconciled it: {RULE}"),
                    vec![crash.at.clone(), request_at(*seq, turn), request_at(second_seq, second)],
                ));
            }
        }
        Ok((second_answer_seq, turns))
    }

    /// `reconciled`: only the saved turn counts, as the second read shows it.
    fn reconcile(
        &self,
        crash: &Crash,
        read: &CheckedRead,
        second_answer_seq: u64,
        turns: &[TurnStatus],
        terminal: &Terminal,
    ) -> Verdict {
        let ex = &self.ex;
        let (thread, saved_turn) = (&crash.thread, &crash.saved_turn);
        let launch = read.launch;
        let second_at = EvidenceRef::at(second_answer_seq, "thread/read after the resume");
        match find(turns, saved_turn) {
            Found::Missing => self.stopped(
                second_answer_seq,
                launch,
                &format!("the resumed thread {thread} has no turn {saved_turn}, the turn that was running"),
                vec![crash.at.clone(), second_at],
            ),
            Found::OtherActive(other) => self.stopped(
                second_answer_seq,
                launch,
                &format!("turn {other} is in progress on the resumed thread {thread}, not the saved turn {saved_turn}"),
                vec![crash.at.clone(), second_at],
            ),
            Found::Active => match ex.completion_of(saved_turn) {
                Some((done, _)) if done > second_answer_seq => {
                    match self.later(second_answer_seq, launch, "turn/start") {
                        Some((seq, turn)) if *seq < done => fail(
                            "reconciled",
                            format!("the saved turn {saved_turn} was still in progress, and the driver started another turn before it ended: {RULE}"),
                            vec![crash.at.clone(), second_at, request_at(*seq, turn)],
                        ),
                        _ => pass(
                            format!("the driver recovered {thread}, found its turn {saved_turn} still in progress and followed it to its end"),
                            vec![crash.at.clone(), second_at, EvidenceRef::at(done, "turn.completed")],
                        ),
                    }
                }
                _ => fail(
                    "reconciled",
                    format!("the saved turn {saved_turn} was still in progress, and the driver did not follow it to its end"),
                    vec![crash.at.clone(), second_at, terminal.evidence()],
                ),
            },
            Found::Terminal(status) => {
                let what = format!(
                    "the driver recovered {thread}: read (identity and folder as saved), resumed, read again — the saved turn {saved_turn} had ended `{status}`"
                );
                match ex.session_went_on() {
                    Ok(went_on) if went_on.completed_at > second_answer_seq => {
                        let mut evidence = vec![crash.at.clone(), read.at.clone(), second_at];
                        evidence.extend(went_on.evidence());
                        pass(format!("{what}; {}", went_on.describe()), evidence)
                    }
                    Ok(_) => fail(
                        "reconciled",
                        format!("{what}, but no turn completed after the reconciliation"),
                        vec![crash.at.clone(), second_at, terminal.evidence()],
                    ),
                    Err(fault) => fault.verdict(&what, terminal),
                }
            }
        }
    }
}
