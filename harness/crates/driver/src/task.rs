//! The task a driver runs: its mode, the prompt, how plan proposals are reviewed, the answers
//! to the model's questions, and a bound on turns. Serialized as JSON, it is also the envelope
//! an external driver receives (see `docs/driver-contract.md`).

use crate::bounds::Timeouts;
use graders::events::{Mode, PolicyGeneration};
use serde::{Deserialize, Serialize};

/// Default bound on turns per run.
pub(crate) const DEFAULT_MAX_TURNS: u32 = 6;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    pub mode: Mode,
    /// The user text of the first turn.
    pub prompt: String,
    /// Reviews of successive plan proposals, in order. A proposal with no review left ends the
    /// run with the plan awaiting review.
    #[serde(default)]
    pub plan_reviews: Vec<PlanReview>,
    /// Answers to the model's questions (`item/tool/requestUserInput`), in order; one entry
    /// answers every question of one request.
    #[serde(default)]
    pub answers: Vec<String>,
    /// The user text of the turn that carries out an approved plan.
    #[serde(default = "default_follow_up")]
    pub follow_up_prompt: String,
    #[serde(default = "default_max_turns")]
    pub max_turns: u32,
    /// After the first session's turns, relaunch the app-server and resume the saved thread
    /// (see [`Relaunch`]). `None`: one launch, one session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relaunch: Option<Relaunch>,
    /// How escalation requests are to be handled (see [`Approvals`]). `None`: the driver's own
    /// way. A driver that cannot do what it names must refuse the task, never ignore the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Approvals>,
    /// What the user asks to add to the running turn, in a case that steers it: a driver that
    /// declares `steer = "stdin-line"` gets this text as one line on its stdin once its turn
    /// runs (docs/driver-contract.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steer_text: Option<String>,
    /// When the app-server dies in the middle of a turn, recover the session instead of ending
    /// the run `transport-lost`: a new app-server, `thread/read` of the saved thread (identity
    /// and working directory checked), `thread/resume` of that exact thread, `thread/read`
    /// again to reconcile the turn that was running (docs/driver-contract.md, "Recovery").
    /// Without it the controller decides later whether to recover.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume_on_crash: bool,
    /// The workspace the run is asked to use instead of the harness's: an absolute path, which
    /// may start with `{home}` or `{codex_home}` (the app-server's `HOME` / `CODEX_HOME`). A
    /// driver refuses an unsafe one before it launches anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The runner contract's context boundary ("skillless", see [`ContextBoundary`]). `None`:
    /// Codex's own defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextBoundary>,
    /// The model the run is to use (`model` on `thread/start` and `thread/resume`, or on every
    /// `turn/start`). `None`: the app-server's configured model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The runner contract's context boundary: no automatic instruction blocks — no skill
/// instructions unless the run asks for them, no project instruction files (the thread reports
/// an empty instruction-source list) — and only the skills the task names explicitly
/// (`$name` or `/name`), as structured skill inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextBoundary {
    /// Forwarded to Codex on `thread/start` and `thread/resume` (its thread configuration's
    /// `skills.include_instructions`).
    #[serde(default)]
    pub include_skill_instructions: bool,
}

/// Who answers escalation requests, and how (defined with the declared drivers that can be
/// told: `suites::spec::Approvals`).
pub(crate) use suites::spec::Approvals;

/// A second launch within the run: the first session is saved (a non-ephemeral thread), the
/// app-server is shut down, the launch plan is computed again under `policy`, and — when the
/// launch identity is unchanged — a fresh app-server with the new argv resumes the saved thread
/// (`thread/resume`) and runs one more turn with `prompt`. When the identity changed, the saved
/// thread is not resumed: a new thread is started instead, and the run says so.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Relaunch {
    /// The launch rules the first session runs (and is saved) under; default: the run's policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saved_under: Option<PolicyGeneration>,
    /// The launch rules of the relaunch; default: the run's policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyGeneration>,
    /// The user text of the turn on the resumed (or new) thread.
    #[serde(default = "default_resume_prompt")]
    pub prompt: String,
}

fn default_resume_prompt() -> String {
    "Continue where we left off.".to_string()
}

impl Relaunch {
    /// The policy of the first launch, given the run's own.
    pub(crate) fn first_policy(&self, run_policy: PolicyGeneration) -> PolicyGeneration {
        self.saved_under.unwrap_or(run_policy)
    }

    /// The policy of the relaunch, given the run's own.
    pub(crate) fn relaunch_policy(&self, run_policy: PolicyGeneration) -> PolicyGeneration {
        self.policy.unwrap_or(run_policy)
    }
}

fn default_max_turns() -> u32 {
    DEFAULT_MAX_TURNS
}

fn default_follow_up() -> String {
    "The plan is approved. Carry it out.".to_string()
}

/// The scripted answer to one plan proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case", deny_unknown_fields)]
pub enum PlanReview {
    Approve,
    /// Ask for another plan; `text` is the next planning turn's user text.
    Revise {
        text: String,
    },
}

impl Task {
    pub fn new(mode: Mode, prompt: &str) -> Self {
        Self {
            mode,
            prompt: prompt.to_string(),
            plan_reviews: Vec::new(),
            answers: Vec::new(),
            follow_up_prompt: default_follow_up(),
            max_turns: DEFAULT_MAX_TURNS,
            relaunch: None,
            approvals: None,
            steer_text: None,
            resume_on_crash: false,
            workspace: None,
            context: None,
            model: None,
        }
    }

    /// Parse an envelope, naming what is wrong.
    pub(crate) fn from_json(text: &str) -> anyhow::Result<Self> {
        let task: Task = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("invalid task envelope: {e}"))?;
        anyhow::ensure!(
            task.max_turns >= 1,
            "invalid task envelope: max_turns must be at least 1"
        );
        Ok(task)
    }
}

/// What the harness hands an external driver (`HARNESS_TASK`): the task's fields, plus the
/// bounds the harness puts on the run's waits, so the driver ends within the harness's bounds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    #[serde(flatten)]
    pub task: Task,
    pub timeouts: WaitBounds,
}

/// [`Timeouts`] on the wire, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitBounds {
    /// Waiting for the response to one request (`initialize`, `thread/start`, `turn/start`).
    pub request_ms: u64,
    /// Waiting for the next message during a turn.
    pub turn_idle_ms: u64,
    /// A whole turn.
    pub turn_total_ms: u64,
    /// The app-server's exit after its stdin is closed (then it is killed).
    pub shutdown_ms: u64,
    /// Same-run attempts to open a session after transient start-up failures.
    pub startup_attempts: u32,
}

impl From<&Timeouts> for WaitBounds {
    fn from(t: &Timeouts) -> Self {
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Self {
            request_ms: ms(t.request),
            turn_idle_ms: ms(t.turn_idle),
            turn_total_ms: ms(t.turn_total),
            shutdown_ms: ms(t.shutdown),
            startup_attempts: t.startup_attempts,
        }
    }
}

impl Envelope {
    pub fn new(task: &Task, timeouts: &Timeouts) -> Self {
        Self {
            task: task.clone(),
            timeouts: timeouts.into(),
        }
    }

    /// Parse an envelope, naming what is wrong (unknown task fields included).
    pub fn from_json(text: &str) -> anyhow::Result<Self> {
        // Parsed in two steps: serde cannot refuse unknown fields through `flatten`.
        let mut value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("invalid task envelope: {e}"))?;
        let timeouts = value
            .as_object_mut()
            .and_then(|o| o.remove("timeouts"))
            .ok_or_else(|| anyhow::anyhow!("invalid task envelope: missing field `timeouts`"))?;
        let timeouts: WaitBounds = serde_json::from_value(timeouts)
            .map_err(|e| anyhow::anyhow!("invalid task envelope: timeouts: {e}"))?;
        let task = Task::from_json(&value.to_string())?;
        Ok(Self { task, timeouts })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips_and_rejects_unknown_fields() {
        let text = r#"{"mode":"planning","prompt":"p","plan_reviews":[{"decision":"revise","text":"again"},{"decision":"approve"}]}"#;
        let task = Task::from_json(text).unwrap();
        assert_eq!(task.plan_reviews.len(), 2);
        assert_eq!(task.max_turns, DEFAULT_MAX_TURNS);
        let back = Task::from_json(&serde_json::to_string(&task).unwrap()).unwrap();
        assert_eq!(back, task);
        let err = Task::from_json(r#"{"mode":"planning","prompt":"p","x":1}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `x`"), "{err}");
        assert!(Task::from_json(r#"{"mode":"ask","prompt":"p","max_turns":0}"#).is_err());
    }

    #[test]
    fn approvals_are_optional_kebab_case_and_checked() {
        let task = Task::from_json(r#"{"mode":"standard","prompt":"p","approvals":"user-accept"}"#)
            .unwrap();
        assert_eq!(task.approvals, Some(Approvals::UserAccept));
        let text = serde_json::to_string(&task).unwrap();
        assert!(text.contains(r#""approvals":"user-accept""#), "{text}");
        let plain = serde_json::to_string(&Task::new(Mode::Standard, "p")).unwrap();
        assert!(!plain.contains("approvals"), "{plain}");
        let err = Task::from_json(r#"{"mode":"standard","prompt":"p","approvals":"accept"}"#)
            .unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `accept`"),
            "{err}"
        );
    }

    #[test]
    fn relaunch_defaults_to_the_run_policy_and_rejects_unknown_fields() {
        let task = Task::from_json(
            r#"{"mode":"planning","prompt":"p","relaunch":{"saved_under":"legacy"}}"#,
        )
        .unwrap();
        let relaunch = task.relaunch.clone().unwrap();
        assert_eq!(
            relaunch.first_policy(PolicyGeneration::Current),
            PolicyGeneration::Legacy
        );
        assert_eq!(
            relaunch.relaunch_policy(PolicyGeneration::Current),
            PolicyGeneration::Current
        );
        assert_eq!(relaunch.prompt, default_resume_prompt());
        let back = Task::from_json(&serde_json::to_string(&task).unwrap()).unwrap();
        assert_eq!(back, task);
        let plain = serde_json::to_string(&Task::new(Mode::Ask, "p")).unwrap();
        assert!(!plain.contains("relaunch"), "{plain}");
        let err =
            Task::from_json(r#"{"mode":"planning","prompt":"p","relaunch":{"polcy":"current"}}"#)
                .unwrap_err();
        assert!(err.to_string().contains("unknown field `polcy`"), "{err}");
    }

    #[test]
    fn the_envelope_is_the_task_plus_the_harness_wait_bounds() {
        let timeouts = Timeouts::default();
        let mut task = Task::new(Mode::Standard, "p");
        task.answers = vec!["a".into()];
        let envelope = Envelope::new(&task, &timeouts);
        let text = serde_json::to_string(&envelope).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["prompt"], "p", "task fields stay at the top level");
        assert_eq!(
            value["timeouts"]["request_ms"],
            u64::try_from(timeouts.request.as_millis()).unwrap()
        );
        assert_eq!(
            value["timeouts"]["startup_attempts"],
            timeouts.startup_attempts
        );
        assert_eq!(Envelope::from_json(&text).unwrap(), envelope);
        let unknown = text.replacen("\"prompt\"", "\"x\":1,\"prompt\"", 1);
        let err = Envelope::from_json(&unknown).unwrap_err();
        assert!(err.to_string().contains("unknown field `x`"), "{err}");
        let err = Envelope::from_json(r#"{"mode":"ask","prompt":"p"}"#).unwrap_err();
        assert!(err.to_string().contains("timeouts"), "{err}");
    }
}
