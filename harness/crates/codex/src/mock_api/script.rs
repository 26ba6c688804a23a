//! The mock model's script: the scenario's model turns plus the failures to inject, and how one
//! turn is cut into Responses API responses.
//!
//! A turn's steps are played in order. A tool-calling step (`Shell`, `ToolCall`, `PlanUpdate`)
//! ends a response: the model must wait for the tool's output, which arrives in the next
//! request. Text steps (`Message`, `Plan`) before it ride in the same response. After the last
//! step, one more (empty) response completes the turn if the last step was a tool call.

use fake_app_server::scenario::model::{ModelStep, ModelTurn};
use fake_app_server::scenario::{Scenario, ThreadSelector, TurnOrigin};
use serde::{Deserialize, Serialize};

/// Everything the mock plays.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MockScript {
    pub turns: Vec<ModelTurn>,
    #[serde(default)]
    pub failures: Vec<ScriptedFailure>,
    /// Played for turns past the end of `turns` (like the fake's `Scenario::default_turn`);
    /// `None`: such turns complete with no output.
    #[serde(default)]
    pub default_turn: Option<ModelTurn>,
    /// Which threads play `turns` (the others play `default_turn`), as the scenario says.
    #[serde(default)]
    pub threads: ThreadSelector,
}

/// Why a scenario cannot be played against the real Codex: it scripts the app-server itself
/// (answers, transport faults), which only the fake can do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scenario `{scenario}` cannot be played by the real Codex: {reason}")]
pub struct NotPlayable {
    pub scenario: String,
    pub reason: String,
}

impl MockScript {
    pub fn new(turns: Vec<ModelTurn>) -> Self {
        Self {
            turns,
            failures: Vec::new(),
            default_turn: None,
            threads: ThreadSelector::default(),
        }
    }

    /// The model side of a fake scenario. Scenario turn failures (`fail`) become a
    /// `response.failed` after the turn's steps (the real Codex then sends `error` and fails the
    /// turn); the fake's default turn is kept. A scenario the real Codex cannot be made to play
    /// (`Scenario::fake_only`: it scripts the app-server's own answers, faults, server steps or
    /// endings, which the real Codex decides itself) is refused with that reason, never played
    /// without the part that makes it what it is. Environment facts are ignored — the real
    /// environment decides.
    pub fn from_scenario(scenario: &Scenario) -> Result<Self, NotPlayable> {
        let refuse = |reason: String| NotPlayable {
            scenario: scenario.name.clone(),
            reason,
        };
        if let Some(reason) = scenario.fake_only() {
            return Err(refuse(reason));
        }
        if scenario.threads.ephemeral.is_some() {
            // The mock sees requests, not thread/start: it cannot tell an ephemeral thread.
            return Err(refuse(
                "it selects threads by `ephemeral`, which the mock model API cannot see".into(),
            ));
        }
        let mut script = Self::new(scenario.model_script());
        script.threads = scenario.threads.clone();
        for (index, turn) in scenario.turns.iter().enumerate() {
            if turn.stream_drops > 0 {
                script.failures.push(ScriptedFailure {
                    turn: index,
                    response: 0,
                    kind: FailureKind::StreamDropped,
                    attempts: Some(turn.stream_drops),
                });
            }
            if let Some(fail) = &turn.fail {
                script.failures.push(ScriptedFailure {
                    turn: index,
                    response: final_response_index(&turn.steps),
                    kind: FailureKind::ResponseFailed {
                        message: fail.message.clone(),
                    },
                    attempts: None,
                });
            }
        }
        script.default_turn = Some(ModelTurn {
            steps: Scenario::default_turn().steps,
        });
        Ok(script)
    }

    /// Fail the first response of `turn` (0-based) in the given way.
    pub fn failing_turn(mut self, turn: usize, kind: FailureKind) -> Self {
        self.failures.push(ScriptedFailure {
            turn,
            response: 0,
            kind,
            attempts: None,
        });
        self
    }

    /// The steps of response `response` of turn `turn`, for a request of a thread known by
    /// `origin`: a thread the selector does not cover plays `default_turn`. Empty when the
    /// script has nothing more to say (the turn then completes with no output).
    pub(crate) fn response_steps_for(
        &self,
        origin: Option<TurnOrigin>,
        turn: usize,
        response: usize,
    ) -> &[ModelStep] {
        let scripted = origin.is_none_or(|origin| self.threads.scripts(origin));
        let script_turn = if scripted {
            self.turns.get(turn).or(self.default_turn.as_ref())
        } else {
            self.default_turn.as_ref()
        };
        let Some(script_turn) = script_turn else {
            return &[];
        };
        responses_of(&script_turn.steps)
            .into_iter()
            .nth(response)
            .unwrap_or(&[])
    }

    /// The failure scripted for response `response` of turn `turn`, on a thread's attempt
    /// `attempt` (1-based) at it: a failure with `attempts` lets the later attempts through.
    pub(crate) fn failure_at(
        &self,
        turn: usize,
        response: usize,
        attempt: usize,
    ) -> Option<&FailureKind> {
        self.failures
            .iter()
            .find(|f| f.turn == turn && f.response == response)
            .filter(|f| f.attempts.is_none_or(|n| attempt <= n as usize))
            .map(|f| &f.kind)
    }

    /// Whether a model stream Codex should retry is scripted: its provider then gets Codex's
    /// own stream retries instead of none.
    pub fn drops_streams(&self) -> bool {
        self.failures
            .iter()
            .any(|f| f.kind == FailureKind::StreamDropped)
    }
}

/// A failure the mock injects instead of (or in the middle of) a scripted response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptedFailure {
    /// 0-based turn of the thread.
    pub turn: usize,
    /// 0-based response within the turn.
    #[serde(default)]
    pub response: usize,
    pub kind: FailureKind,
    /// How many attempts at this response fail (Codex sends a cut stream's request again);
    /// `None`: every attempt.
    #[serde(default)]
    pub attempts: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FailureKind {
    /// The response's items, then a `response.failed` event carrying this message.
    ResponseFailed { message: String },
    /// An HTTP error status (e.g. 500) instead of a stream.
    HttpStatus { status: u16 },
    /// The response's items are streamed, then the stream ends without `response.completed`.
    StreamClosedEarly,
    /// The stream ends right after `response.created`, before any item (a dropped connection;
    /// Codex retries it when its provider allows stream retries).
    StreamDropped,
}

/// The index of a turn's last response: one response per tool step, then the closing one.
pub(crate) fn final_response_index(steps: &[ModelStep]) -> usize {
    steps.iter().filter(|step| is_tool_step(step)).count()
}

/// Whether the model must wait for a tool output after this step.
pub(crate) fn is_tool_step(step: &ModelStep) -> bool {
    matches!(
        step,
        ModelStep::Shell { .. } | ModelStep::ToolCall { .. } | ModelStep::PlanUpdate { .. }
    )
}

/// Cut a turn's steps into responses: each response ends after a tool step.
pub(crate) fn responses_of(steps: &[ModelStep]) -> Vec<&[ModelStep]> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, step) in steps.iter().enumerate() {
        if is_tool_step(step) {
            out.push(&steps[start..=i]);
            start = i + 1;
        }
    }
    if start < steps.len() {
        out.push(&steps[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> ModelStep {
        ModelStep::Message { text: text.into() }
    }
    fn shell(cmd: &str) -> ModelStep {
        ModelStep::Shell {
            cmd: cmd.into(),
            escalate: false,
            justification: None,
            review: None,
        }
    }

    #[test]
    fn tool_steps_end_responses_and_text_rides_along() {
        let steps = vec![message("a"), shell("x"), shell("y"), message("b")];
        let cut = responses_of(&steps);
        assert_eq!(cut.len(), 3);
        assert_eq!(cut[0], &steps[0..2]);
        assert_eq!(cut[1], &steps[2..3]);
        assert_eq!(cut[2], &steps[3..4]);
    }

    #[test]
    fn a_turn_ending_in_a_tool_call_gets_an_empty_closing_response() {
        let script = MockScript::new(vec![ModelTurn {
            steps: vec![shell("x")],
        }]);
        assert_eq!(script.response_steps_for(None, 0, 0).len(), 1);
        assert!(script.response_steps_for(None, 0, 1).is_empty());
        assert!(script.response_steps_for(None, 5, 0).is_empty());
    }

    #[test]
    fn scenarios_map_failures_and_refuse_server_scripting() {
        let failed = Scenario::builtin("turn-failed").unwrap();
        let script = MockScript::from_scenario(&failed).unwrap();
        assert!(matches!(
            script.failure_at(0, 0, 1),
            Some(FailureKind::ResponseFailed { message }) if message == "mock failure for testing"
        ));
        // Past the script, the fake's default turn plays.
        assert_eq!(
            script.response_steps_for(None, 3, 0),
            Scenario::default_turn().steps.as_slice()
        );
        for name in [
            "crash-mid-turn",
            "hang",
            "garbage-line",
            "oversized-line",
            "startup-rejected",
        ] {
            let scenario = Scenario::builtin(name).unwrap();
            let err = MockScript::from_scenario(&scenario).unwrap_err();
            assert_eq!(err.scenario, name);
        }
        let refused = Scenario::builtin("plan-write-refused").unwrap();
        let script = MockScript::from_scenario(&refused).unwrap();
        assert_eq!(script.turns.len(), 2);
        assert!(script.failures.is_empty());
    }

    #[test]
    fn a_dropped_stream_fails_its_first_attempts_only() {
        // Codex asks again with the same history after a cut stream: a failure that hit every
        // attempt would exhaust its retries and fail the turn, never a retried stream.
        let scenario = Scenario::from_toml_str(
            "[[turns]]\nstream_drops = 2\nsteps = [{ step = \"message\", text = \"x\" }]\n",
            std::path::Path::new("retried.toml"),
        )
        .unwrap();
        let script = MockScript::from_scenario(&scenario).unwrap();
        assert!(script.drops_streams());
        assert_eq!(
            script.failure_at(0, 0, 1),
            Some(&FailureKind::StreamDropped)
        );
        assert_eq!(
            script.failure_at(0, 0, 2),
            Some(&FailureKind::StreamDropped)
        );
        assert_eq!(script.failure_at(0, 0, 3), None);
        assert_eq!(script.failure_at(1, 0, 1), None);
        // A failure without `attempts` still hits every attempt.
        let failing = MockScript::new(Vec::new()).failing_turn(0, FailureKind::StreamClosedEarly);
        assert!(!failing.drops_streams());
        assert!(failing.failure_at(0, 0, 7).is_some());
    }

    #[test]
    fn every_builtin_the_fake_alone_can_play_is_refused_with_its_reason() {
        // Played without its server step, `retryable-error` would be a healthy turn: a cell
        // that passes for a reason that has nothing to do with its case.
        let mut refused = 0;
        for name in fake_app_server::scenario::BUILTIN_NAMES {
            let scenario = Scenario::builtin(name).unwrap();
            match (scenario.fake_only(), MockScript::from_scenario(&scenario)) {
                (Some(reason), Err(err)) => {
                    refused += 1;
                    assert_eq!(err.reason, reason, "{name}");
                    assert!(err.to_string().contains(&reason), "{err}");
                }
                (None, Ok(_)) => {}
                (reason, played) => panic!("{name}: fake_only {reason:?} but {played:?}"),
            }
        }
        assert!(refused >= 20, "only {refused} builtins are fake-only");
        let err =
            MockScript::from_scenario(&Scenario::builtin("retryable-error").unwrap()).unwrap_err();
        assert!(err.reason.contains("server step"), "{err}");
    }
}
