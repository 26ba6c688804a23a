//! The method behaviours a harness can play in front of the real Codex by timing its wire
//! alone, without changing a byte of it: a `hang` (the request never reaches the app-server,
//! which so never answers it) and `answer_after_turn` (the `turn/start` answer is held until
//! its turn's `turn/completed` has gone by). The fake plays them itself; for the real Codex the
//! harness's tap does (`tap::timing`), and the scenario's other parts are played as usual. A
//! behaviour with anything more (a `times`, a delay, an error) is not such a play: only the
//! fake can play it.

use super::{MethodBehaviour, Scenario};

/// A method behaviour played by timing the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportPlay {
    /// `hang`: the driver's requests of `method` are not delivered.
    Withhold { method: String },
    /// `answer_after_turn`: the answer to `method` (`turn/start`) follows its turn's end.
    AnswerAfterTurn { method: String },
}

impl MethodBehaviour {
    /// The play by timing this behaviour of `method` is, if it is exactly one.
    pub fn transport_play(&self, method: &str) -> Option<TransportPlay> {
        let hang = MethodBehaviour {
            hang: true,
            ..MethodBehaviour::default()
        };
        let after_turn = MethodBehaviour {
            answer_after_turn: true,
            ..MethodBehaviour::default()
        };
        let method = method.to_string();
        if *self == hang {
            Some(TransportPlay::Withhold { method })
        } else if *self == after_turn {
            Some(TransportPlay::AnswerAfterTurn { method })
        } else {
            None
        }
    }
}

impl Scenario {
    /// The method behaviours played by timing the wire, by method.
    pub fn transport_plays(&self) -> Vec<TransportPlay> {
        self.methods
            .iter()
            .filter_map(|(method, behaviour)| behaviour.transport_play(method))
            .collect()
    }

    /// The scenario less its [`Scenario::transport_plays`]: what is left for the real Codex
    /// and its mock model API to play.
    pub fn without_transport_plays(&self) -> Scenario {
        let mut rest = self.clone();
        rest.methods
            .retain(|method, behaviour| behaviour.transport_play(method).is_none());
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_hang_or_answer_after_turn_is_a_play_by_timing_and_nothing_more_is() {
        for (name, play) in [
            (
                "no-answer",
                TransportPlay::Withhold {
                    method: "thread/start".into(),
                },
            ),
            (
                "events-before-answer",
                TransportPlay::AnswerAfterTurn {
                    method: "turn/start".into(),
                },
            ),
        ] {
            let scenario = Scenario::builtin(name).unwrap();
            assert_eq!(scenario.transport_plays(), [play], "{name}");
            assert_eq!(
                scenario.without_transport_plays().fake_only(),
                None,
                "{name}"
            );
        }
        // Only the first call hangs: the tap does not count calls, so only the fake plays it.
        let counted = MethodBehaviour {
            hang: true,
            times: Some(1),
            ..MethodBehaviour::default()
        };
        assert_eq!(counted.transport_play("thread/start"), None);
        let hang = Scenario::builtin("hang").unwrap();
        assert!(hang.without_transport_plays().fake_only().is_some());
    }
}
