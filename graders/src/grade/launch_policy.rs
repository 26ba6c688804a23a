//! `external-sandbox-launch` / `standard-launch`, `ask-launch`, `planning-launch`: the launch
//! policy the driver applied, checked from `run.started.launch`, `session.open-requested`,
//! `session.started` and every `turn.submitted`:
//!
//! - `mode`: the run's mode is the one the case names;
//! - `thread-permissions`: every `thread/start` carries the profile the launch chose;
//! - `permissions-stable`: every `turn/start` carries that same profile;
//! - `plan-mode-only-when-planning`: the `plan` collaboration mode appears on turns of a planning
//!   run (at least one) and never on turns of another mode;
//! - `planning-profile-read-only` (planning only): the selected profile is `:read-only` or a
//!   profile defined in the launch argv without `"write"` access, no argv element selects
//!   `danger-full-access`/`dangerFullAccess`/`externalSandbox`/workspace-write, and the sandbox
//!   the app-server reported is none of those;
//! - `session-and-turn`: the session opened and at least one turn was submitted.

use super::{fail, mode_name, Grader, Terminal};
use crate::events::{Body, Kind, LaunchSummary, Mode};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

const PLAN_COLLABORATION_MODE: &str = "plan";
/// Texts that must not appear in a planning launch's argv or reported sandbox.
const WRITE_CAPABLE_SANDBOXES: &[&str] = &[
    "dangerFullAccess",
    "danger-full-access",
    "externalSandbox",
    "external-sandbox",
    "workspaceWrite",
    "workspace-write",
];

struct Violation {
    check: &'static str,
    detail: String,
    evidence: EvidenceRef,
}

pub(crate) struct LaunchPolicy {
    expected: Mode,
    launch: Option<(u64, LaunchSummary)>,
    violation: Option<Violation>,
    opens: u64,
    started: Option<u64>,
    rejected: Option<(u64, String)>,
    turns: u64,
    plan_turns: u64,
}

impl LaunchPolicy {
    pub fn new(expected: Mode) -> Self {
        Self {
            expected,
            launch: None,
            violation: None,
            opens: 0,
            started: None,
            rejected: None,
            turns: 0,
            plan_turns: 0,
        }
    }

    fn violate(&mut self, check: &'static str, detail: String, seq: u64, excerpt: &str) {
        if self.violation.is_none() {
            self.violation = Some(Violation {
                check,
                detail,
                evidence: EvidenceRef::at(seq, excerpt),
            });
        }
    }

    fn check_launch(&mut self, seq: u64, launch: &LaunchSummary) {
        let shown = format!(
            "mode={} thread_permissions={} turn_permissions={} identity={}",
            mode_name(launch.mode),
            show(&launch.thread_permissions),
            show(&launch.turn_permissions),
            launch.identity
        );
        if launch.mode != self.expected {
            self.violate(
                "mode",
                format!(
                    "the case expects a {} run, run.started says {}",
                    mode_name(self.expected),
                    mode_name(launch.mode)
                ),
                seq,
                &shown,
            );
        }
        if launch.turn_permissions != launch.thread_permissions {
            self.violate(
                "permissions-stable",
                format!(
                    "the launch chose {} for thread/start but {} for turn/start",
                    show(&launch.thread_permissions),
                    show(&launch.turn_permissions)
                ),
                seq,
                &shown,
            );
        }
        if launch.mode == Mode::Planning {
            if let Err(detail) = planning_profile_is_read_only(launch) {
                self.violate(
                    "planning-profile-read-only",
                    detail,
                    seq,
                    &launch.argv.join(" "),
                );
            }
        }
    }
}

fn show(p: &Option<String>) -> String {
    match p {
        Some(p) => format!("`{p}`"),
        None => "the default profile".to_string(),
    }
}

/// The argv value of a `-c key=value` override, in any of the spellings `-c k=v`, `-ck=v`,
/// `--config k=v`.
fn config_values<'a>(argv: &'a [String], key: &str) -> Vec<&'a str> {
    argv.iter()
        .filter_map(|arg| {
            let arg = arg.strip_prefix("-c").unwrap_or(arg);
            arg.strip_prefix(key)?.strip_prefix('=')
        })
        .collect()
}

fn planning_profile_is_read_only(launch: &LaunchSummary) -> Result<(), String> {
    if let Some(bad) = launch
        .argv
        .iter()
        .find(|arg| WRITE_CAPABLE_SANDBOXES.iter().any(|w| arg.contains(w)))
    {
        return Err(format!(
            "the planning launch argv selects a write-capable sandbox: `{bad}`"
        ));
    }
    let selected = match &launch.thread_permissions {
        Some(p) => p.clone(),
        None => match config_values(&launch.argv, "default_permissions").last() {
            Some(v) => v.trim().trim_matches(|c| c == '"' || c == '\'').to_string(),
            None => {
                return Err(
                    "the planning launch selects no profile and sets no default_permissions".into(),
                )
            }
        },
    };
    if selected.starts_with(':') {
        return if selected == ":read-only" {
            Ok(())
        } else {
            Err(format!("the planning launch selects the built-in profile `{selected}`, which allows writes"))
        };
    }
    let key = format!("permissions.{selected}");
    let Some(definition) = config_values(&launch.argv, &key).last().copied() else {
        return Err(format!("the planning profile `{selected}` is not defined in the launch argv, so it cannot be shown read-only"));
    };
    if definition.contains("\"write\"") || definition.contains("'write'") {
        return Err(format!(
            "the planning profile `{selected}` grants write access: {definition}"
        ));
    }
    Ok(())
}

impl Grader for LaunchPolicy {
    fn wants(&self, kind: Kind) -> bool {
        matches!(
            kind,
            Kind::RunStarted
                | Kind::SessionOpenRequested
                | Kind::SessionStarted
                | Kind::SessionRejected
                | Kind::TurnSubmitted
        )
    }

    fn observe(&mut self, seq: u64, body: &Body) {
        match body {
            Body::RunStarted(run) if self.launch.is_none() => {
                self.check_launch(seq, &run.launch);
                self.launch = Some((seq, run.launch.clone()));
            }
            Body::SessionOpenRequested(open) => {
                self.opens += 1;
                let Some((_, launch)) = &self.launch else {
                    return self.violate(
                        "thread-permissions",
                        "thread/start before run.started".into(),
                        seq,
                        "session.open-requested",
                    );
                };
                if open.permissions != launch.thread_permissions {
                    let detail = format!(
                        "thread/start carried {} but the launch chose {}",
                        show(&open.permissions),
                        show(&launch.thread_permissions)
                    );
                    self.violate(
                        "thread-permissions",
                        detail,
                        seq,
                        &format!("permissions={}", show(&open.permissions)),
                    );
                }
            }
            Body::SessionStarted(started) => {
                self.started.get_or_insert(seq);
                let planning = self
                    .launch
                    .as_ref()
                    .is_some_and(|(_, l)| l.mode == Mode::Planning);
                let reported = started
                    .sandbox
                    .sandbox
                    .as_ref()
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                if planning && WRITE_CAPABLE_SANDBOXES.iter().any(|w| reported.contains(w)) {
                    self.violate(
                        "planning-profile-read-only",
                        format!("the app-server reported a write-capable sandbox for a planning thread: {reported}"),
                        seq,
                        &reported,
                    );
                }
            }
            Body::SessionRejected(rejected) => {
                self.rejected.get_or_insert((seq, rejected.message.clone()));
            }
            Body::TurnSubmitted(turn) => {
                self.turns += 1;
                let plan_mode = turn.collaboration_mode.as_deref() == Some(PLAN_COLLABORATION_MODE);
                if plan_mode {
                    self.plan_turns += 1;
                }
                let shown = format!(
                    "turn {} permissions={} collaboration_mode={}",
                    turn.index,
                    show(&turn.permissions),
                    turn.collaboration_mode.as_deref().unwrap_or("-")
                );
                let Some((thread_permissions, mode)) = self
                    .launch
                    .as_ref()
                    .map(|(_, l)| (l.thread_permissions.clone(), l.mode))
                else {
                    return self.violate(
                        "permissions-stable",
                        "turn/start before run.started".into(),
                        seq,
                        &shown,
                    );
                };
                if turn.permissions != thread_permissions {
                    let detail = format!(
                        "turn {} carried {} but thread/start carried {}",
                        turn.index,
                        show(&turn.permissions),
                        show(&thread_permissions)
                    );
                    self.violate("permissions-stable", detail, seq, &shown);
                }
                if plan_mode && mode != Mode::Planning {
                    let detail = format!(
                        "turn {} of a {} run uses the plan collaboration mode",
                        turn.index,
                        mode_name(mode)
                    );
                    self.violate("plan-mode-only-when-planning", detail, seq, &shown);
                }
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>, terminal: &Terminal) -> Verdict {
        if let Some(v) = self.violation {
            return fail(v.check, v.detail, vec![v.evidence]);
        }
        let Some((launch_seq, launch)) = &self.launch else {
            return fail(
                "mode",
                "the run has no run.started event",
                vec![terminal.evidence()],
            );
        };
        if self.started.is_none() || self.opens == 0 {
            let mut evidence = Vec::new();
            if let Some((seq, message)) = &self.rejected {
                evidence.push(EvidenceRef::at(*seq, message));
            }
            evidence.push(terminal.evidence());
            return fail("session-and-turn", "the session never opened", evidence);
        }
        if self.turns == 0 {
            return fail(
                "session-and-turn",
                "no turn was submitted",
                vec![terminal.evidence()],
            );
        }
        if launch.mode == Mode::Planning && self.plan_turns == 0 {
            return fail(
                "plan-mode-only-when-planning",
                "no turn of the planning run used the plan collaboration mode",
                vec![EvidenceRef::at(*launch_seq, "mode=planning")],
            );
        }
        Verdict::new(
            VerdictKind::Pass,
            format!(
                "{} launch: {} on thread/start and all {} turn(s); plan mode on {} turn(s)",
                mode_name(launch.mode),
                show(&launch.thread_permissions),
                self.turns,
                self.plan_turns
            ),
            vec![
                EvidenceRef::at(
                    *launch_seq,
                    &format!(
                        "identity={} argv={}",
                        launch.identity,
                        launch.argv.join(" ")
                    ),
                ),
                terminal.evidence(),
            ],
        )
    }
}
