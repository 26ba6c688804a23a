//! The vocabulary of a release (what its schema allows a client) and the space of settings over
//! it: each dimension's values, the cross product by index (mixed radix, so its size and any
//! member cost nothing to compute), and deterministic samples from a seed.

use crate::schema::{self, ClientSchema, SchemaError};
use crate::setting::{
    Setting, ABSENT, DIMENSIONS, ERROR_ANSWER, QUIET_NOTIFICATIONS, SANDBOX_MODES,
};
use std::collections::BTreeSet;

/// Decisions that refuse: the request's action does not happen (`decline`, `cancel`, the
/// legacy `denied` / `abort`; an automatic review that `timed_out` refuses too).
pub(crate) const REFUSALS: &[&str] = &["decline", "cancel", "denied", "abort", "timed_out"];
/// Decisions that grant, for the request or beyond it.
pub(crate) const GRANTS: &[&str] = &[
    "accept",
    "acceptForSession",
    "acceptWithExecpolicyAmendment",
    "applyNetworkPolicyAmendment",
    "approved",
    "approved_for_session",
    "approved_execpolicy_amendment",
    "approved_mcp_policy_amendment",
    "network_policy_amendment",
];

/// What a release's schema allows a client, read from the schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocabulary {
    pub version: String,
    /// `AskForApproval`'s string values (`untrusted`, `on-request`, `never`).
    pub approval_policies: Vec<String>,
    /// `SandboxMode` (`read-only`, `workspace-write`, `danger-full-access`).
    pub sandbox_modes: Vec<String>,
    /// `ModeKind` of a turn's collaboration mode (`plan`, `default`).
    pub collaboration_modes: Vec<String>,
    /// `CommandExecutionApprovalDecision`: every decision, string values and object ones.
    pub command_decisions: Vec<String>,
    /// `FileChangeApprovalDecision`.
    pub file_change_decisions: Vec<String>,
    /// `ReviewDecision`, the legacy approvals' answer.
    pub review_decisions: Vec<String>,
    /// `McpServerElicitationAction`.
    pub elicitation_actions: Vec<String>,
    /// The string decisions both current approval requests take that refuse, plus `error`.
    pub approval_answers: Vec<String>,
}

impl Vocabulary {
    pub fn of(version: &str) -> Result<Self, SchemaError> {
        let client = ClientSchema::of(version)?;
        let caps = "/definitions/InitializeCapabilities";
        client.initialize.has_property(caps, "experimentalApi")?;
        client
            .initialize
            .has_property(caps, "optOutNotificationMethods")?;
        client
            .initialize
            .has_property("/definitions/ClientInfo", "title")?;
        client.thread_start.has_property("", "ephemeral")?;
        client.thread_start.has_property("", "approvalPolicy")?;
        client.thread_start.has_property("", "sandbox")?;
        client.turn_start.has_property("", "input")?;
        let text_input = client
            .turn_start
            .definition("UserInput")?
            .get("oneOf")
            .and_then(serde_json::Value::as_array)
            .is_some_and(|alts| {
                alts.iter().any(|alt| {
                    alt.pointer("/properties/type/enum/0")
                        .and_then(|t| t.as_str())
                        == Some("text")
                })
            });
        if !text_input {
            return Err(SchemaError::Missing {
                version: version.into(),
                file: "TurnStartParams.json".into(),
                what: "a `text` alternative of `UserInput` (every setting sends its prompt so)"
                    .into(),
            });
        }
        let release = graders::protocol::release(version).map_err(|e| SchemaError::Missing {
            version: version.into(),
            file: "graders/protocol".into(),
            what: e.to_string(),
        })?;
        for method in QUIET_NOTIFICATIONS {
            if !release.has_notification(method) {
                return Err(SchemaError::Missing {
                    version: version.into(),
                    file: "ServerNotification.json".into(),
                    what: format!("notification `{method}` (a quiet client opts out of it)"),
                });
            }
        }
        let sandbox_modes = client.thread_start.string_enum("SandboxMode")?;
        if let Some(missing) = SANDBOX_MODES
            .iter()
            .find(|m| !sandbox_modes.iter().any(|s| s == *m))
        {
            return Err(SchemaError::Missing {
                version: version.into(),
                file: "ThreadStartParams.json".into(),
                what: format!("SandboxMode `{missing}` (a setting sends it)"),
            });
        }
        let with_objects = |file: &schema::SchemaFile, def: &str| -> Result<_, SchemaError> {
            let mut all = file.string_enum(def)?;
            all.extend(file.object_alternatives(def)?);
            Ok(all)
        };
        let command = schema::response(version, "CommandExecutionRequestApprovalResponse")?;
        let file_change = schema::response(version, "FileChangeRequestApprovalResponse")?;
        let review = schema::response(version, "ExecCommandApprovalResponse")?;
        let elicitation = schema::response(version, "McpServerElicitationRequestResponse")?;
        let command_decisions = with_objects(&command, "CommandExecutionApprovalDecision")?;
        let file_change_decisions = with_objects(&file_change, "FileChangeApprovalDecision")?;
        let mut approval_answers: Vec<String> = command
            .string_enum("CommandExecutionApprovalDecision")?
            .into_iter()
            .filter(|d| REFUSALS.contains(&d.as_str()) && file_change_decisions.contains(d))
            .collect();
        approval_answers.push(ERROR_ANSWER.into());
        Ok(Self {
            version: version.into(),
            approval_policies: client.thread_start.string_enum("AskForApproval")?,
            sandbox_modes,
            collaboration_modes: client.turn_start.string_enum("ModeKind")?,
            command_decisions,
            file_change_decisions,
            review_decisions: with_objects(&review, "ReviewDecision")?,
            elicitation_actions: elicitation.string_enum("McpServerElicitationAction")?,
            approval_answers,
        })
    }

    /// Every decision of the schema that this crate classifies as neither refusal nor grant:
    /// empty, or a release added a decision whose meaning must be decided here first.
    pub fn unclassified_decisions(&self) -> Vec<&str> {
        self.command_decisions
            .iter()
            .chain(&self.file_change_decisions)
            .chain(&self.review_decisions)
            .chain(&self.elicitation_actions)
            .map(String::as_str)
            .filter(|d| !REFUSALS.contains(d) && !GRANTS.contains(d))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// The decisions of the current approval requests that grant (a client's choice only
    /// where its user agreed).
    pub fn grants(&self) -> Vec<&str> {
        self.command_decisions
            .iter()
            .map(String::as_str)
            .filter(|d| GRANTS.contains(d))
            .collect()
    }
}

/// One dimension: its name and its values, as [`Setting`]'s text spells them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dimension {
    pub name: &'static str,
    pub values: Vec<String>,
}

/// The settings of a release: every value its schema allows a client, but grants (see
/// [`crate::setting::ApprovalAnswer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub vocabulary: Vocabulary,
    pub dimensions: Vec<Dimension>,
}

fn words(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

impl Space {
    pub fn of(version: &str) -> Result<Self, SchemaError> {
        let vocabulary = Vocabulary::of(version)?;
        let policies = std::iter::once(ABSENT.to_string())
            .chain(vocabulary.approval_policies.iter().cloned())
            .collect();
        let values: Vec<Vec<String>> = vec![
            words(&["off", "on"]),
            words(&["absent", "empty", "quiet"]),
            words(&[ABSENT, "present"]),
            words(&[ABSENT, "false", "true"]),
            policies,
            words(&["absent", "by-mode", "read-only", "full-access"]),
            vocabulary.approval_answers.clone(),
            words(&["result", "error"]),
            words(&["close-stdin", "sigterm", "sigint"]),
            words(&[
                "one",
                "version-probe",
                "second-app-server",
                "probe-and-second",
            ]),
            words(&["at-once", "after-pending"]),
            words(&["integer", "string"]),
            words(&["inherit", "drain", "null"]),
            words(&["one-text", "split-text"]),
        ];
        let dimensions = DIMENSIONS
            .iter()
            .zip(values)
            .map(|(name, values)| Dimension { name, values })
            .collect();
        Ok(Self {
            vocabulary,
            dimensions,
        })
    }

    /// The size of the cross product.
    pub fn len(&self) -> u64 {
        self.dimensions
            .iter()
            .map(|d| d.values.len() as u64)
            .product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The setting at `index` of the cross product (mixed radix, the last dimension fastest);
    /// `None` past its end.
    pub fn nth(&self, index: u64) -> Option<Setting> {
        if index >= self.len() {
            return None;
        }
        let mut rest = index;
        let mut picked = vec![""; self.dimensions.len()];
        for (slot, dim) in picked.iter_mut().zip(&self.dimensions).rev() {
            let radix = dim.values.len() as u64;
            *slot = &dim.values[(rest % radix) as usize];
            rest /= radix;
        }
        Some(Setting::from_values(&picked).expect("every value of the space parses"))
    }

    /// The whole cross product, in index order.
    pub fn all(&self) -> impl Iterator<Item = Setting> + '_ {
        (0..self.len()).map_while(|i| self.nth(i))
    }

    /// Whether every value of `setting` is one of this space's.
    pub fn contains(&self, setting: &Setting) -> bool {
        self.dimensions
            .iter()
            .zip(setting.values())
            .all(|(dim, value)| dim.values.contains(&value))
    }

    /// A setting drawn uniformly from the cross product by `rng`.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> Setting {
        self.nth(rng.u64(0..self.len()))
            .expect("an index below the length")
    }

    /// `count` distinct settings (all of them when the space is smaller), drawn from `seed`:
    /// the same seed gives the same settings in the same order.
    pub fn sample(&self, seed: u64, count: usize) -> Vec<Setting> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let wanted = (count as u64).min(self.len());
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        while (out.len() as u64) < wanted {
            let index = rng.u64(0..self.len());
            if seen.insert(index) {
                out.push(self.nth(index).expect("an index below the length"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vocabulary_comes_from_the_schema_and_classifies_every_decision() {
        let vocabulary = Vocabulary::of("0.169.0").unwrap();
        assert_eq!(
            vocabulary.approval_policies,
            ["untrusted", "on-request", "never"]
        );
        assert_eq!(vocabulary.approval_answers, ["decline", "cancel", "error"]);
        assert_eq!(
            vocabulary.grants(),
            [
                "accept",
                "acceptForSession",
                "acceptWithExecpolicyAmendment",
                "applyNetworkPolicyAmendment"
            ]
        );
        assert!(vocabulary.collaboration_modes.contains(&"plan".to_string()));
        assert_eq!(vocabulary.unclassified_decisions(), Vec::<&str>::new());
    }

    #[test]
    fn every_index_of_the_cross_product_is_a_distinct_setting_that_round_trips_as_text() {
        let space = Space::of("0.169.0").unwrap();
        assert!(space.len() > 10_000, "{}", space.len());
        assert_eq!(
            space.dimensions[4].values,
            ["absent", "untrusted", "on-request", "never"]
        );
        let mut seen = BTreeSet::new();
        for index in (0..space.len()).step_by(97) {
            let setting = space.nth(index).unwrap();
            let text = setting.to_string();
            assert_eq!(text.parse::<Setting>().unwrap(), setting, "{text}");
            assert!(space.contains(&setting));
            assert!(seen.insert(text));
        }
        assert_eq!(space.nth(space.len()), None);
    }

    #[test]
    fn a_seed_gives_the_same_distinct_settings_and_another_seed_others() {
        let space = Space::of("0.169.0").unwrap();
        let first = space.sample(7, 50);
        assert_eq!(first, space.sample(7, 50));
        assert_ne!(first, space.sample(8, 50));
        let distinct: BTreeSet<String> = first.iter().map(Setting::to_string).collect();
        assert_eq!(distinct.len(), 50);
    }

    #[test]
    fn a_setting_text_names_what_is_wrong_with_it() {
        let good = Space::of("0.169.0").unwrap().nth(0).unwrap().to_string();
        let err = good
            .replace("stop=close-stdin", "stop=kill")
            .parse::<Setting>();
        assert_eq!(
            err.unwrap_err().to_string(),
            "setting: `stop=kill` is not a value of `stop`"
        );
        let err = good.replace("request-ids=integer,", "").parse::<Setting>();
        assert_eq!(
            err.unwrap_err().to_string(),
            "setting: `request-ids` is missing"
        );
    }
}
