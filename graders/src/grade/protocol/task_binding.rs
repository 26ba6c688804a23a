//! `protocol-task-binding`: the task's choices are what the driver's requests carry, on every
//! turn of its own, over every launch. A choice is a thread setting, and Codex takes a thread
//! setting from the last request that set it (`turn/start` and `thread/settings/update` set it
//! "for this turn and subsequent turns", TurnStartParams / ThreadSettingsUpdateParams), else from
//! the request that opened the thread — as its answer reports it, Codex's defaults and the
//! launch's `-c` configuration included — else from the launch. So each legitimate spelling
//! passes: the `cwd` on `thread/start` or on `turn/start`, or none and the app-server started in
//! the workspace; a sandbox mode, a sandbox policy or a permission profile; the task's path as
//! told or as the kernel resolves it.
//!
//! - `workspace-cwd`: every turn's working folder is the task's workspace.
//! - `mode-planning`: every turn runs without write access. The plan collaboration mode alone
//!   is not enough: Codex runs the model's tools in plan mode (observed, 0.169), only the
//!   sandbox keeps a planning turn from writing.
//! - `mode-standard`, `mode-ask`: no turn runs in the plan collaboration mode
//!   (`collaborationMode.mode: "plan"`, CollaborationMode): Codex would then plan instead of
//!   doing or answering what was asked.
//! - `approvals-*`: every turn's approval policy and reviewer are the task's (`never`:
//!   approvalPolicy `never`; `auto-review`: approvalsReviewer `auto_review`; a user reviewer:
//!   approvalsReviewer `user`, Codex's default, under a policy that can ask).
//! - `model`: every turn's model is the task's (`model` on a thread opener, `turn/start` or
//!   `thread/settings/update`, or the launch's `-c model`; the opener's answer reports it).
//!
//! Whatever the stream cannot show — no record of the task, a setting nobody reported — is
//! `incomplete`, never `pass`.

use super::settings_in_force::{
    approval_policy, own_turn_requests, settings, Origin, TurnRequests, NEVER, TURN_START,
};
use super::{incomplete, pass, Exchange, ProtocolCase};
use crate::events::{Body, Kind, Mode, Source, TaskChoices};
use crate::grade::launch_config::{Judgement, LaunchConfig};
use crate::grade::legacy_sandbox::{judge_mode, judge_policy};
use crate::grade::{fail, Terminal};
use crate::verdict::{EvidenceRef, Verdict};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// The reviewers that are Codex's automatic one (`guardian_subagent`: the legacy name).
const AUTO_REVIEWERS: &[&str] = &["auto_review", "guardian_subagent"];
const USER_REVIEWER: &str = "user";

/// Which of the task's choices a case checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Choice {
    Workspace,
    Mode(Mode),
    Approvals,
    Model,
}

pub(crate) struct TaskBinding {
    ex: Exchange,
    choice: Choice,
    /// The mode and argv of `run.started.launch`.
    mode: Option<Mode>,
    argv: Vec<String>,
    /// The folder each launch's app-server was started in.
    launch_cwd: HashMap<u64, String>,
}

impl TaskBinding {
    pub(crate) fn new(choice: Choice) -> Self {
        Self {
            ex: Exchange::default(),
            choice,
            mode: None,
            argv: Vec::new(),
            launch_cwd: HashMap::new(),
        }
    }
}

impl TaskBinding {
    fn turns(&self) -> Vec<TurnRequests<'_>> {
        own_turn_requests(&self.ex)
    }

    fn task(&self) -> Option<&TaskChoices> {
        self.ex.setup.as_ref().and_then(|(_, s)| s.task.as_ref())
    }

    fn config(&self) -> Result<LaunchConfig, String> {
        LaunchConfig::parse(&self.argv).map_err(|e| e.to_string())
    }

    /// A top-level string the launch's `-c` sets (`approval_policy`, `model`, …).
    fn argv_setting(&self, key: &str) -> Option<String> {
        self.config()
            .ok()
            .and_then(|c| c.string_setting(key).ok().flatten().map(str::to_string))
    }

    fn workspace(&self, turns: &[TurnRequests<'_>]) -> Verdict {
        let Some(task) = self.task().filter(|t| !t.workspace.is_empty()) else {
            return no_task_record("the workspace");
        };
        let spellings: Vec<PathBuf> = task.workspace.iter().map(|w| normal(w)).collect();
        let told = &task.workspace[0];
        for turn in turns {
            let launch_cwd = self.launch_cwd.get(&turn.launch);
            let found = turn.setting(|r| settings(r).cwd.clone(), |a| a.cwd.clone());
            let (cwd, origin) = match found {
                Some((cwd, origin)) => (cwd, origin),
                None => match launch_cwd {
                    Some(cwd) => (cwd.clone(), Origin::Launch),
                    None => {
                        return incomplete(
                            format!("no request sets the working folder of turn {} and the stream does not say which folder its app-server was started in", turn.turn),
                            vec![EvidenceRef::at(turn.seq, TURN_START)],
                        )
                    }
                },
            };
            // A relative `cwd` is the app-server's folder's.
            let resolved = match (Path::new(&cwd).is_absolute(), launch_cwd) {
                (true, _) => normal(&cwd),
                (false, Some(base)) => normal(&format!("{base}/{cwd}")),
                (false, None) => {
                    return incomplete(
                        format!("turn {} runs in the relative folder `{cwd}` and the stream does not say which folder its app-server was started in", turn.turn),
                        origin.evidence(&cwd),
                    )
                }
            };
            if !spellings.contains(&resolved) {
                let mut evidence = origin.evidence(&cwd);
                evidence.push(EvidenceRef::at(turn.seq, TURN_START));
                return fail(
                    "task-workspace",
                    format!(
                        "turn {} runs in `{cwd}`, from {}, but the task's workspace is `{told}`: the thread's `cwd` (ThreadStartParams.cwd, TurnStartParams.cwd; without one, the folder the app-server was started in) is where Codex runs the model's commands and reads AGENTS.md",
                        turn.turn,
                        origin.describe()
                    ),
                    evidence,
                );
            }
        }
        every_turn(
            turns,
            format!(
                "each of the driver's {} turn(s) runs in the task's workspace `{told}`",
                turns.len()
            ),
        )
    }

    /// The sandbox `turn` runs under, judged for writes (network is not the mode's choice).
    fn sandbox_of(&self, turn: &TurnRequests<'_>) -> (Judgement, String, Vec<EvidenceRef>) {
        let config = self.config();
        let judge_profile = |name: &str| match &config {
            Ok(c) => c.judge_profile(name, true),
            Err(e) => Judgement::Unverifiable(format!("the launch argv is unreadable: {e}")),
        };
        // A turn-level override: a sandbox policy or a profile, whichever the request sent.
        for (seq, r) in &turn.chain {
            let judged = match (&r.sandbox_policy, &settings(r).permissions) {
                (Some(policy), _) => Some(judge_policy(policy, true)),
                (None, Some(profile)) => Some(judge_profile(profile)),
                (None, None) => None,
            };
            if let Some(j) = judged {
                let origin = Origin::Sent(*seq, r);
                return (j, origin.describe(), origin.evidence(&r.method));
            }
        }
        let Some((seq, request, answered_at, answer)) = turn.opener else {
            return (
                Judgement::Unverifiable(
                    "the request that opened the thread is not recorded".into(),
                ),
                String::new(),
                Vec::new(),
            );
        };
        if let Some(reported) = &answer.sandbox {
            let origin = Origin::Reported(answered_at, answer);
            return (
                judge_policy(reported, true),
                origin.describe(),
                origin.evidence(&reported.to_string()),
            );
        }
        let origin = Origin::Sent(seq, request);
        let judged = match (&request.sandbox, &settings(request).permissions) {
            (Some(mode), _) => judge_mode(mode),
            (None, Some(profile)) => judge_profile(profile),
            (None, None) => match &config {
                Ok(c) if c.selects_no_profile(None) => c.judge_sandbox_settings(),
                Ok(c) => match c.selected_profile(None) {
                    Ok(name) => c.judge_profile(&name, true),
                    Err(e) => Judgement::Unverifiable(e),
                },
                Err(e) => Judgement::Unverifiable(format!("the launch argv is unreadable: {e}")),
            },
        };
        (judged, origin.describe(), origin.evidence(&request.method))
    }

    fn planning(&self, turns: &[TurnRequests<'_>]) -> Verdict {
        let mut evidence = Vec::new();
        for turn in turns {
            let (judged, origin, mut at) = self.sandbox_of(turn);
            at.push(EvidenceRef::at(turn.seq, TURN_START));
            match judged {
                Judgement::ReadOnly(_) => evidence.extend(at.into_iter().take(1)),
                Judgement::Widens(why) => {
                    return fail(
                        "planning-read-only",
                        format!(
                            "the planning turn {} runs with write access: {why} (from {origin}); a planning task changes nothing, and only the sandbox keeps a turn from writing: Codex runs the model's tools in the plan collaboration mode too (observed, 0.169), so the thread or turn needs a read-only sandbox (SandboxMode `read-only`, SandboxPolicy `readOnly`, or a permission profile without writes)",
                            turn.turn
                        ),
                        at,
                    )
                }
                Judgement::Unverifiable(why) => {
                    return incomplete(
                        format!(
                            "whether the planning turn {} can write is not shown: {why}",
                            turn.turn
                        ),
                        at,
                    )
                }
            }
        }
        pass(
            format!(
                "each of the driver's {} planning turn(s) runs under a sandbox without write access",
                turns.len()
            ),
            evidence,
        )
    }

    fn not_planning(&self, mode: Mode, turns: &[TurnRequests<'_>]) -> Verdict {
        for turn in turns {
            let found = turn.setting(|r| settings(r).collaboration_mode.clone(), |_| None);
            if let Some((kind, origin)) = found.filter(|(kind, _)| kind == "plan") {
                let mut evidence = origin.evidence(&kind);
                evidence.push(EvidenceRef::at(turn.seq, TURN_START));
                return fail(
                    "mode-not-plan",
                    format!(
                        "the {} task's turn {} runs in the plan collaboration mode, set by {}: Codex then gives the model its Plan Mode instructions and it proposes a plan instead of doing what was asked (CollaborationMode; observed: thread/settings/updated and the Plan Mode developer message)",
                        mode.as_str(),
                        turn.turn,
                        origin.describe()
                    ),
                    evidence,
                );
            }
        }
        every_turn(
            turns,
            format!(
                "none of the driver's {} turn(s) of the {} task runs in the plan collaboration mode",
                turns.len(),
                mode.as_str()
            ),
        )
    }

    fn approvals(&self, turns: &[TurnRequests<'_>]) -> Verdict {
        let Some(asked) = self.task().and_then(|t| t.approvals.clone()) else {
            return no_task_record("approvals");
        };
        // (value, where it came from, evidence) of the setting in force, by `argv_key` of the
        // launch's `-c` when no request set it and no answer reported it, else Codex's default.
        let in_force =
            |found: Option<(String, Origin<'_>)>, name: &str, argv_key: &str, default: &str| {
                found
                    .map(|(value, origin)| {
                        let evidence = origin.evidence(&format!("{name} `{value}`"));
                        (value, origin.describe(), evidence)
                    })
                    .or_else(|| {
                        self.argv_setting(argv_key).map(|value| {
                            (value, format!("the launch's `-c {argv_key}`"), Vec::new())
                        })
                    })
                    .unwrap_or_else(|| (default.to_string(), "Codex's default".into(), Vec::new()))
            };
        for turn in turns {
            let policy = in_force(
                approval_policy(turn),
                "approvalPolicy",
                "approval_policy",
                "on-request",
            );
            let reviewer = in_force(
                turn.setting(
                    |r| settings(r).approvals_reviewer.clone(),
                    |a| a.approvals_reviewer.clone(),
                ),
                "approvalsReviewer",
                "approvals_reviewer",
                USER_REVIEWER,
            );
            let wrong = match asked.as_str() {
                "never" => (policy.0 != NEVER).then(|| {
                    format!("the approval policy is `{}` (from {}), where the task says nothing may escalate: approvalPolicy `never` (AskForApproval)", policy.0, policy.1)
                }),
                "auto-review" => (!AUTO_REVIEWERS.contains(&reviewer.0.as_str())).then(|| {
                    format!("approvals go to `{}` (from {}), where the task hands them to Codex's automatic reviewer: approvalsReviewer `auto_review` (ApprovalsReviewer)", reviewer.0, reviewer.1)
                }),
                user if user.starts_with("user-") => {
                    if reviewer.0 != USER_REVIEWER {
                        Some(format!("approvals go to `{}` (from {}), where the task's reviewer is the user: approvalsReviewer `user` (ApprovalsReviewer, Codex's default)", reviewer.0, reviewer.1))
                    } else if policy.0 == NEVER {
                        Some(format!("the approval policy is `never` (from {}), so the user the task names is never asked (AskForApproval)", policy.1))
                    } else {
                        None
                    }
                }
                other => {
                    return incomplete(
                        format!("the task's approvals `{other}` are not ones this case knows"),
                        Vec::new(),
                    )
                }
            };
            if let Some(why) = wrong {
                let evidence = policy.2.into_iter().chain(reviewer.2).collect();
                return turn_fails(
                    "task-approvals",
                    turn,
                    format!("turn {}: {why}", turn.turn),
                    evidence,
                );
            }
        }
        every_turn(
            turns,
            format!(
                "each of the driver's {} turn(s) runs with the task's approvals `{asked}`",
                turns.len()
            ),
        )
    }

    fn model(&self, turns: &[TurnRequests<'_>]) -> Verdict {
        let Some(asked) = self.task().and_then(|t| t.model.clone()) else {
            return no_task_record("model");
        };
        let from_argv = self.argv_setting("model");
        for turn in turns {
            let found = turn.setting(|r| settings(r).model.clone(), |a| a.model.clone());
            let (model, origin, evidence) = match (found, &from_argv) {
                (Some((model, origin)), _) => {
                    let evidence = origin.evidence(&format!("model `{model}`"));
                    (model, origin.describe(), evidence)
                }
                (None, Some(model)) => (model.clone(), "the launch's `-c model`".into(), Vec::new()),
                (None, None) => {
                    return incomplete(
                        format!("no request sets the model of turn {}, the app-server reported none and the launch configures none, so which model it ran is not shown", turn.turn),
                        vec![EvidenceRef::at(turn.seq, TURN_START)],
                    )
                }
            };
            if model != asked {
                return turn_fails(
                    "task-model",
                    turn,
                    format!("turn {} runs the model `{model}` (from {origin}), where the task names `{asked}`: the model is a thread setting (ThreadStartParams.model, TurnStartParams.model for that turn and the next; observed: Codex 0.169 echoes it in its thread/start answer)", turn.turn),
                    evidence,
                );
            }
        }
        every_turn(
            turns,
            format!(
                "each of the driver's {} turn(s) runs the task's model `{asked}`",
                turns.len()
            ),
        )
    }
}

/// A path without `.` components, `..` applied, and no trailing slash: how the kernel would
/// read it, links aside (the harness records the linked spelling too).
fn normal(path: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for part in Path::new(path).components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The check failed for `turn`: `evidence`, then its `turn/start`.
fn turn_fails(
    check: &str,
    turn: &TurnRequests<'_>,
    why: String,
    mut evidence: Vec<EvidenceRef>,
) -> Verdict {
    evidence.push(EvidenceRef::at(turn.seq, TURN_START));
    fail(check, why, evidence)
}

/// A pass citing every turn's `turn/start`.
fn every_turn(turns: &[TurnRequests<'_>], reason: String) -> Verdict {
    pass(
        reason,
        turns
            .iter()
            .map(|t| EvidenceRef::at(t.seq, TURN_START))
            .collect(),
    )
}

fn no_task_record(what: &str) -> Verdict {
    incomplete(
        format!("the stream does not record the task's {what} (`run.started.protocol.task`), so what the driver's requests had to carry is not known"),
        Vec::new(),
    )
}

impl ProtocolCase for TaskBinding {
    exchange_in_field_ex!();

    fn wants_more(&self, kind: Kind) -> bool {
        kind == Kind::AppServerLaunched
    }

    fn observe_more(&mut self, _seq: u64, source: Source, body: &Body) {
        if !crate::grade::documented(source, body) {
            return;
        }
        match body {
            Body::RunStarted(run) if self.mode.is_none() => {
                self.mode = Some(run.launch.mode);
                self.argv = run.launch.argv.clone();
            }
            Body::AppServerLaunched(l) => {
                if let Some(cwd) = &l.cwd {
                    self.launch_cwd
                        .entry(l.launch)
                        .or_insert_with(|| cwd.clone());
                }
            }
            _ => {}
        }
    }

    fn decide(&self, _terminal: &Terminal) -> Verdict {
        if let (Choice::Mode(case), Some(run)) = (self.choice, self.mode) {
            if case != run {
                return incomplete(
                    format!(
                        "the case checks a {} task, and the run was given a {} one",
                        case.as_str(),
                        run.as_str()
                    ),
                    Vec::new(),
                );
            }
        }
        let turns = self.turns();
        if turns.is_empty() {
            return incomplete(
                "no `turn/start` of the driver's own was answered with a turn id, so no turn shows the settings it ran with".into(),
                Vec::new(),
            );
        }
        match self.choice {
            Choice::Workspace => self.workspace(&turns),
            Choice::Mode(Mode::Planning) => self.planning(&turns),
            Choice::Mode(mode) => self.not_planning(mode, &turns),
            Choice::Approvals => self.approvals(&turns),
            Choice::Model => self.model(&turns),
        }
    }
}
