//! Which threads' turns play a scenario's script (`[threads]`).

use serde::{Deserialize, Serialize};

/// Which turns play the script. Every condition given must hold. The default scripts every
/// thread's turns except those with an `outputSchema` (a driver's side task asking for
/// structured output, like codex-acp's session-title generator).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadSelector {
    /// Only threads started in these places, counting `thread/start` calls from 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_index: Option<Vec<usize>>,
    /// Only ephemeral (true) or only persistent (false) threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<bool>,
    /// Only turns whose `turn/start` has an `outputSchema` (true) or has none (false); absent:
    /// either.
    #[serde(default = "no_output_schema", skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<bool>,
}

fn no_output_schema() -> Option<bool> {
    Some(false)
}

impl Default for ThreadSelector {
    fn default() -> Self {
        Self {
            start_index: None,
            ephemeral: None,
            output_schema: no_output_schema(),
        }
    }
}

/// What a turn is known by when the selector is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TurnOrigin {
    pub start_index: usize,
    /// `None` where the player cannot tell (the mock model API never sees `ephemeral`).
    pub ephemeral: Option<bool>,
    pub output_schema: bool,
}

impl ThreadSelector {
    pub fn scripts(&self, origin: TurnOrigin) -> bool {
        let index_ok = self
            .start_index
            .as_ref()
            .is_none_or(|indexes| indexes.contains(&origin.start_index));
        let ephemeral_ok = match (self.ephemeral, origin.ephemeral) {
            (Some(wanted), Some(actual)) => wanted == actual,
            _ => true,
        };
        let schema_ok = self
            .output_schema
            .is_none_or(|wanted| wanted == origin.output_schema);
        index_ok && ephemeral_ok && schema_ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;
    use std::path::Path;

    #[test]
    fn the_selector_picks_threads_by_start_order_ephemeral_and_output_schema() {
        let origin = |start_index, ephemeral, output_schema| TurnOrigin {
            start_index,
            ephemeral: Some(ephemeral),
            output_schema,
        };
        let default = ThreadSelector::default();
        assert!(default.scripts(origin(3, true, false)));
        assert!(!default.scripts(origin(0, false, true)));
        let text = "[threads]\nstart_index = [1]\nephemeral = false\n";
        let scenario = Scenario::from_toml_str(text, Path::new("s.toml")).unwrap();
        assert!(scenario.threads.scripts(origin(1, false, false)));
        assert!(!scenario.threads.scripts(origin(0, false, false)));
        assert!(!scenario.threads.scripts(origin(1, true, false)));
        assert!(!scenario.threads.scripts(origin(1, false, true)));
        let any_schema = ThreadSelector {
            output_schema: None,
            ..ThreadSelector::default()
        };
        assert!(any_schema.scripts(origin(0, false, true)));
    }
}
