//! A Rust builder for scenarios, for tests that want a scenario without a TOML file.

use super::model::ModelStep;
use super::{
    EnvironmentFacts, MethodBehaviour, NotificationFault, RpcErrorSpec, Scenario, ScenarioError,
    ScenarioTurn, TurnFailure, TurnFault, TurnFaultKind,
};

#[derive(Debug, Clone, Default)]
pub struct ScenarioBuilder {
    scenario: Scenario,
}

impl ScenarioBuilder {
    pub fn new(name: &str) -> Self {
        Self {
            scenario: Scenario {
                name: name.to_string(),
                ..Scenario::default()
            },
        }
    }

    /// Start from a built-in scenario.
    pub fn from_builtin(name: &str) -> Result<Self, ScenarioError> {
        Ok(Self {
            scenario: Scenario::builtin(name)?,
        })
    }

    pub fn method(mut self, method: &str, behaviour: MethodBehaviour) -> Self {
        self.scenario.methods.insert(method.to_string(), behaviour);
        self
    }

    pub fn method_error(self, method: &str, code: i64, message: &str) -> Self {
        self.method(
            method,
            MethodBehaviour {
                error: Some(RpcErrorSpec {
                    code,
                    message: message.to_string(),
                }),
                ..MethodBehaviour::default()
            },
        )
    }

    pub fn notification(mut self, method: &str, fault: NotificationFault) -> Self {
        self.scenario
            .notifications
            .insert(method.to_string(), fault);
        self
    }

    pub fn environment(mut self, facts: EnvironmentFacts) -> Self {
        self.scenario.environment = facts;
        self
    }

    pub fn client_answer_ms(mut self, ms: u64) -> Self {
        self.scenario.limits.client_answer_ms = ms;
        self
    }

    pub fn hang_ms(mut self, ms: u64) -> Self {
        self.scenario.limits.hang_ms = ms;
        self
    }

    /// Append a turn made of these model steps.
    pub fn turn(mut self, steps: Vec<ModelStep>) -> Self {
        self.scenario.turns.push(ScenarioTurn {
            steps,
            ..ScenarioTurn::default()
        });
        self
    }

    /// Inject a transport fault into the last turn added.
    pub fn fault(mut self, kind: TurnFaultKind, after_step: Option<usize>) -> Self {
        if let Some(turn) = self.scenario.turns.last_mut() {
            turn.fault = Some(TurnFault {
                kind,
                after_step,
                bytes: None,
            });
        }
        self
    }

    /// Make the last turn added end `failed`.
    pub fn fail(mut self, message: &str) -> Self {
        if let Some(turn) = self.scenario.turns.last_mut() {
            turn.fail = Some(TurnFailure {
                message: message.to_string(),
                error_notification: true,
            });
        }
        self
    }

    /// The scenario, validated like a file would be.
    pub fn build(self) -> Result<Scenario, ScenarioError> {
        let text = self.to_toml()?;
        Scenario::from_toml_str(
            &text,
            std::path::Path::new(&format!("builder:{}", self.scenario.name)),
        )
    }

    /// The scenario as a TOML file (to hand to a spawned fake with `--scenario PATH`).
    pub fn to_toml(&self) -> Result<String, ScenarioError> {
        toml::to_string(&self.scenario).map_err(|err| ScenarioError::Invalid {
            origin: format!("builder:{}", self.scenario.name),
            message: err.to_string(),
        })
    }
}

/// Shorthands for model steps.
pub mod steps {
    use super::ModelStep;

    pub fn shell(cmd: &str) -> ModelStep {
        ModelStep::Shell {
            cmd: cmd.to_string(),
            escalate: false,
            justification: None,
            review: None,
        }
    }

    pub fn escalated_shell(cmd: &str, justification: &str) -> ModelStep {
        ModelStep::Shell {
            cmd: cmd.to_string(),
            escalate: true,
            justification: Some(justification.to_string()),
            review: None,
        }
    }

    /// An escalated command that the automatic reviewer allows (`allow`) or denies.
    pub fn reviewed_shell(cmd: &str, justification: &str, allow: bool) -> ModelStep {
        use crate::scenario::model::{Review, ReviewOutcome};
        ModelStep::Shell {
            cmd: cmd.to_string(),
            escalate: true,
            justification: Some(justification.to_string()),
            review: Some(Review {
                outcome: if allow {
                    ReviewOutcome::Allow
                } else {
                    ReviewOutcome::Deny
                },
                rationale: if allow {
                    "The user asked for this write.".into()
                } else {
                    "Writing outside the sandbox was not authorised.".into()
                },
            }),
        }
    }

    pub fn message(text: &str) -> ModelStep {
        ModelStep::Message {
            text: text.to_string(),
        }
    }

    pub fn plan(text: &str) -> ModelStep {
        ModelStep::Plan {
            text: text.to_string(),
        }
    }

    pub fn tool(name: &str, arguments: serde_json::Value) -> ModelStep {
        ModelStep::ToolCall {
            name: name.to_string(),
            arguments,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builder_round_trips_through_toml() {
        let scenario = ScenarioBuilder::new("b")
            .method_error("turn/start", -32600, "nope")
            .turn(vec![steps::shell("true"), steps::message("hi")])
            .fault(TurnFaultKind::GarbageLine, Some(1))
            .build()
            .unwrap();
        assert_eq!(scenario.turns.len(), 1);
        assert_eq!(
            scenario
                .method("turn/start")
                .unwrap()
                .error
                .as_ref()
                .unwrap()
                .code,
            -32600
        );
    }
}
