//! The task a driver runs: its mode, the prompt, how plan proposals are reviewed, the answers
//! to the model's questions, and a bound on turns. Serialized as JSON, it is also the envelope
//! an external driver receives (see `docs/driver-contract.md`).

use graders::events::Mode;
use serde::{Deserialize, Serialize};

/// Default bound on turns per run.
pub const DEFAULT_MAX_TURNS: u32 = 6;

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
        }
    }

    /// Parse an envelope, naming what is wrong.
    pub fn from_json(text: &str) -> anyhow::Result<Self> {
        let task: Task = serde_json::from_str(text)
            .map_err(|e| anyhow::anyhow!("invalid task envelope: {e}"))?;
        anyhow::ensure!(
            task.max_turns >= 1,
            "invalid task envelope: max_turns must be at least 1"
        );
        Ok(task)
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
}
