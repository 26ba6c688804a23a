//! `external-sandbox-launch` / `standard-launch`, `ask-launch`, `planning-launch`: the launch
//! policy the driver applied, checked from `run.started.launch`, `session.open-requested`,
//! `session.started` and every `turn.submitted`:
//!
//! - `mode`: the run's mode is the one the case names;
//! - `thread-permissions`: every `thread/start` carries the profile the launch chose;
//! - `permissions-stable`: every `turn/start` carries that same profile;
//! - `plan-mode-only-when-planning`: the `plan` collaboration mode appears on turns of a planning
//!   run (at least one) and never on turns of another mode;
//! - `planning-profile-read-only` (planning only): read from the parsed argv
//!   ([`super::launch_config`]), never from its text. Every profile the planning run selects —
//!   `run.started.launch` thread/turn permissions, each `session.open-requested` and
//!   `turn.submitted` `permissions` (absent on a thread: `default_permissions`), and the
//!   `activePermissionProfile` the app-server reported — is `:read-only` or a `permissions.NAME`
//!   table of the argv whose `filesystem` grants no `write` and whose `network.enabled` is not on
//!   when the launch has network off; the argv sets no writable `sandbox_mode`; and the legacy
//!   sandbox the app-server reported on `session.started` is `readOnly` (not `workspaceWrite`,
//!   `externalSandbox` or `dangerFullAccess`). When the argv or a profile cannot be read (an
//!   element that is no `-c key=value`, a profile not defined in the argv, an unknown access
//!   value or key), the verdict is `incomplete` naming what could not be read — never `pass`;
//!   The protocol's own sandbox parameter counts as the profiles do: a `sandbox` mode on
//!   `thread/start` / `thread/resume` other than `read-only`, or a `sandboxPolicy` on a request
//!   whose `type` is not `readOnly` (or that opens network the launch keeps closed), is a
//!   violation; and a planning run that selects no profile at all (none sent, no
//!   `default_permissions`) runs under the legacy sandbox, which the app-server reports in its
//!   `thread/start` answer: it is shown read-only when every session the run opened reported
//!   `readOnly` (the server's answer is authoritative), and `incomplete` otherwise;
//! - `session-and-turn`: the session opened and at least one turn was submitted.
//!
//! Order: a failed check on what the driver sent (the launch, `thread/start`) is `fail` even
//! when the session never opened; then an unreadable planning launch is `incomplete`; then a
//! session that never opened is `startup-rejected` quoting the provider (or `incomplete` when no
//! rejection was recorded), see `docs/events.md`; then the session checks.

use super::launch_config::{ArgvError, Judgement, LaunchConfig};
use super::legacy_sandbox;
use super::session::SessionWatch;
use super::{fail, Grader, Terminal};
use crate::events::{Body, ClientRequest, Kind, LaunchSummary, Mode, Source};
use crate::verdict::{EvidenceRef, Verdict, VerdictKind};

const PLAN_COLLABORATION_MODE: &str = "plan";
const PLANNING_CHECK: &str = "planning-profile-read-only";

struct Finding {
    check: &'static str,
    detail: String,
    evidence: EvidenceRef,
}

pub(crate) struct LaunchPolicy {
    expected: Mode,
    launch: Option<(u64, LaunchSummary)>,
    /// The parsed argv of a planning launch (`None` for other modes).
    planning: Option<Result<LaunchConfig, ArgvError>>,
    /// The profile the planning thread runs under, once shown read-only.
    planning_profile: Option<String>,
    violation: Option<Finding>,
    unverified: Option<Finding>,
    /// A planning thread or turn that selects no permission profile: its policy is the legacy
    /// sandbox, shown only by what the app-server reports.
    no_profile: Option<Finding>,
    /// Sessions of the planning run, and how many the app-server reported `readOnly`.
    sessions: u64,
    sessions_read_only: u64,
    session: SessionWatch,
    opens: u64,
    turns: u64,
    plan_turns: u64,
}

impl LaunchPolicy {
    pub(super) fn new(expected: Mode) -> Self {
        Self {
            expected,
            launch: None,
            planning: None,
            planning_profile: None,
            violation: None,
            unverified: None,
            no_profile: None,
            sessions: 0,
            sessions_read_only: 0,
            session: SessionWatch::default(),
            opens: 0,
            turns: 0,
            plan_turns: 0,
        }
    }

    fn violate(&mut self, check: &'static str, detail: String, seq: u64, excerpt: &str) {
        self.violation.get_or_insert(Finding {
            check,
            detail,
            evidence: EvidenceRef::at(seq, excerpt),
        });
    }

    fn unverifiable(&mut self, detail: String, seq: u64, excerpt: &str) {
        self.unverified.get_or_insert(Finding {
            check: PLANNING_CHECK,
            detail,
            evidence: EvidenceRef::at(seq, excerpt),
        });
    }

    fn judge(&mut self, judgement: Judgement, context: &str, seq: u64, excerpt: &str) {
        match judgement {
            Judgement::ReadOnly(_) => {}
            Judgement::Widens(why) => {
                self.violate(PLANNING_CHECK, format!("{context}: {why}"), seq, excerpt)
            }
            Judgement::Unverifiable(why) => self.unverifiable(
                format!("{context}: the planning sandbox cannot be shown read-only: {why}"),
                seq,
                excerpt,
            ),
        }
    }

    /// Check the profile a planning thread or turn runs under. `explicit` is the `permissions`
    /// it sent (`None`: `default_permissions`).
    fn check_planning_profile(&mut self, seq: u64, context: &str, explicit: Option<&str>) {
        let (network_allowed, config) = match (&self.launch, &self.planning) {
            (Some((_, launch)), Some(Ok(config))) => (launch.network_enabled, config),
            // Not a planning run, or its argv could not be read (already recorded).
            _ => return,
        };
        if config.selects_no_profile(explicit) {
            self.no_profile.get_or_insert(Finding {
                check: PLANNING_CHECK,
                detail: format!(
                    "{context}: no permission profile is sent and the argv sets no `default_permissions`, so the legacy sandbox applies, and the app-server did not report it `readOnly` for every session"
                ),
                evidence: EvidenceRef::at(seq, "no permissions, no default_permissions"),
            });
            return;
        }
        let (judgement, excerpt, name) = match config.selected_profile(explicit) {
            Err(why) => (
                Judgement::Unverifiable(why),
                config
                    .source_of(&["default_permissions"])
                    .unwrap_or("no default_permissions in argv")
                    .to_string(),
                None,
            ),
            Ok(name) => (
                config.judge_profile(&name, network_allowed),
                config
                    .source_of(&["permissions", &name])
                    .map_or_else(|| format!("permissions={name}"), str::to_string),
                Some(name),
            ),
        };
        if let (Judgement::ReadOnly(_), Some(name)) = (&judgement, &name) {
            self.planning_profile.get_or_insert_with(|| name.clone());
        }
        self.judge(judgement, context, seq, &excerpt);
    }

    fn check_launch(&mut self, seq: u64, launch: &LaunchSummary) {
        let shown = format!(
            "mode={} thread_permissions={} turn_permissions={} identity={}",
            launch.mode.as_str(),
            show(&launch.thread_permissions),
            show(&launch.turn_permissions),
            launch.identity
        );
        if launch.mode != self.expected {
            self.violate(
                "mode",
                format!(
                    "the case expects a {} run, run.started says {}",
                    self.expected.as_str(),
                    launch.mode.as_str()
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
        if launch.mode != Mode::Planning {
            return;
        }
        let config = LaunchConfig::parse(&launch.argv);
        match &config {
            Err(e) => self.unverifiable(
                format!("the planning launch argv cannot be read: {e}"),
                seq,
                &e.arg,
            ),
            Ok(config) => {
                let judgement = config.judge_sandbox_settings();
                let excerpt = config
                    .source_of(&["sandbox_mode"])
                    .or_else(|| config.source_of(&["profile"]))
                    .unwrap_or("argv")
                    .to_string();
                self.judge(judgement, "the planning launch argv", seq, &excerpt);
            }
        }
        self.planning = Some(config);
        self.check_planning_profile(
            seq,
            "the planning launch's thread/start profile",
            launch.thread_permissions.as_deref(),
        );
        if let Some(turn) = launch.turn_permissions.as_deref() {
            self.check_planning_profile(
                seq,
                "the planning launch's turn/start profile",
                Some(turn),
            );
        }
    }

    /// The legacy sandbox projection and the active profile the app-server reported.
    fn check_reported_sandbox(&mut self, seq: u64, started: &crate::events::SessionStarted) {
        self.sessions += 1;
        if let Some(sandbox) = &started.sandbox.sandbox {
            // The planning check is about writes: the projection's network flag is the
            // launch's business (the profile checks judge network).
            let judgement = legacy_sandbox::judge_policy(sandbox, true);
            if matches!(judgement, Judgement::ReadOnly(_)) {
                self.sessions_read_only += 1;
            }
            self.judge(
                judgement,
                "the sandbox the app-server reported for the planning thread",
                seq,
                &sandbox.to_string(),
            );
        }
        if let Some(active) = started.sandbox.active_profile.as_deref() {
            self.check_planning_profile(
                seq,
                "the active profile the app-server reported",
                Some(active),
            );
        }
    }

    /// The protocol's sandbox parameter on a planning request (`sandbox` mode, `sandboxPolicy`).
    fn check_sandbox_parameter(&mut self, seq: u64, request: &ClientRequest) {
        let network_allowed = self.launch.as_ref().is_some_and(|(_, l)| l.network_enabled);
        if let Some(mode) = &request.sandbox {
            let context = format!("the planning {} (id {})", request.method, request.id);
            let judgement = legacy_sandbox::judge_mode(mode);
            self.judge(judgement, &context, seq, &format!("sandbox={mode}"));
        }
        if let Some(policy) = &request.sandbox_policy {
            let context = format!("the planning {} (id {})", request.method, request.id);
            let judgement = legacy_sandbox::judge_policy(policy, network_allowed);
            self.judge(judgement, &context, seq, &format!("sandboxPolicy={policy}"));
        }
    }

    fn planning_run(&self) -> bool {
        self.launch
            .as_ref()
            .is_some_and(|(_, l)| l.mode == Mode::Planning)
    }
}

fn show(p: &Option<String>) -> String {
    match p {
        Some(p) => format!("`{p}`"),
        None => "the default profile".to_string(),
    }
}

impl Grader for LaunchPolicy {
    fn wants(&self, kind: Kind) -> bool {
        SessionWatch::wants(kind)
            || matches!(
                kind,
                Kind::RunStarted
                    | Kind::SessionOpenRequested
                    | Kind::TurnSubmitted
                    | Kind::ClientRequest
            )
    }

    fn observe(&mut self, seq: u64, source: Source, body: &Body) {
        self.session.observe(seq, source, body);
        if !super::documented(source, body) {
            return;
        }
        match body {
            Body::RunStarted(run) if self.launch.is_none() => {
                self.launch = Some((seq, run.launch.clone()));
                self.check_launch(seq, &run.launch);
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
                self.check_planning_profile(
                    seq,
                    "the planning thread/start",
                    open.permissions.as_deref(),
                );
            }
            Body::SessionStarted(started) if self.planning_run() => {
                self.check_reported_sandbox(seq, started);
            }
            Body::ClientRequest(request) if self.planning_run() => {
                self.check_sandbox_parameter(seq, request);
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
                        mode.as_str()
                    );
                    self.violate("plan-mode-only-when-planning", detail, seq, &shown);
                }
                // A turn without `permissions` keeps the thread's profile, checked already.
                if let Some(permissions) = turn.permissions.as_deref() {
                    let context = format!("planning turn {}", turn.index);
                    self.check_planning_profile(seq, &context, Some(permissions));
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
        // No profile selected: the legacy sandbox is in force, shown by the app-server's reports.
        let no_profile = self
            .no_profile
            .filter(|_| self.sessions == 0 || self.sessions_read_only < self.sessions);
        if let Some(u) = self.unverified.or(no_profile) {
            return Verdict::new(
                VerdictKind::Incomplete,
                format!("check `{}` could not be decided: {}", u.check, u.detail),
                vec![u.evidence, terminal.evidence()],
            );
        }
        if let Some(verdict) = self.session.never_opened(terminal) {
            return verdict;
        }
        if self.opens == 0 {
            return fail(
                "session-and-turn",
                "a session started without a recorded thread/start request",
                vec![terminal.evidence()],
            );
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
        let planning = match &self.planning_profile {
            Some(name) => format!("; planning profile `{name}` grants no write access"),
            None if launch.mode == Mode::Planning => format!(
                "; no permission profile: the app-server reported the legacy sandbox `readOnly` for {} session(s)",
                self.sessions_read_only
            ),
            None => String::new(),
        };
        Verdict::new(
            VerdictKind::Pass,
            format!(
                "{} launch: {} on thread/start and all {} turn(s); plan mode on {} turn(s){planning}",
                launch.mode.as_str(),
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
