//! Canary secrets (`protocol-credentials`, obligation 9): in every cell of the `protocol`
//! profile the driver's environment holds a few variables named like the secrets a driver's
//! user really has, each with a fresh random value starting `ccf-canary-`. The tap lets exactly
//! these names through to the app-server when the driver hands them on (`tap::TapConfig::
//! inherit_env`), as the real `codex` would inherit them; the model's `env` then shows whether
//! the driver handed its secrets to the app-server. The run records which were planted — names
//! and a digest, never the values — in `run.started.protocol.canaries`; without that record
//! the grader shows nothing (`incomplete`).

use graders::events::PlantedCanaries;
use sha2::{Digest, Sha256};
use suites::spec::Profile;
use suites::Cell;

/// What every canary value starts with (the grader looks for it in what commands printed).
pub(crate) const PREFIX: &str = "ccf-canary-";

/// The variables planted: the secrets a driver's user most often has in the environment the
/// driver runs in (model providers, a forge, a cloud), and one generic name of the harness's.
pub(crate) const NAMES: &[&str] = &[
    "ANTHROPIC_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "CONDUCTOR_CANARY_TOKEN",
    "GITHUB_TOKEN",
    "OPENAI_API_KEY",
];

/// One cell's canaries: each of [`NAMES`] with its own random value.
#[derive(Clone)]
pub(crate) struct Canaries {
    pairs: Vec<(String, String)>,
}

// The values are secrets of the run: never printed, also not by `{:?}`.
impl std::fmt::Debug for Canaries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Canaries")
            .field("names", &self.names())
            .finish_non_exhaustive()
    }
}

impl Canaries {
    /// The canaries of `cell`: planted in every cell of the `protocol` profile.
    pub(crate) fn for_cell(cell: &Cell) -> Option<Self> {
        (cell.profile == Profile::Protocol).then(Self::fresh)
    }

    /// Fresh random values (a v4 UUID each: 122 random bits, unguessable by a driver).
    pub(crate) fn fresh() -> Self {
        Self {
            pairs: NAMES
                .iter()
                .map(|name| {
                    let value = format!("{PREFIX}{}", uuid::Uuid::new_v4().simple());
                    (name.to_string(), value)
                })
                .collect(),
        }
    }

    /// The variables to add to the driver's environment.
    pub(crate) fn env(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// The names, sorted.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.pairs.iter().map(|(name, _)| name.clone()).collect();
        names.sort();
        names
    }

    /// What the run records: the names and a digest that commits to the values without
    /// revealing them (`sha256:` of the sorted `NAME=value\n` lines).
    pub(crate) fn record(&self) -> PlantedCanaries {
        let mut lines: Vec<String> = self
            .pairs
            .iter()
            .map(|(name, value)| format!("{name}={value}\n"))
            .collect();
        lines.sort();
        let digest = Sha256::digest(lines.concat().as_bytes());
        PlantedCanaries {
            names: self.names(),
            digest: format!("sha256:{}", hex::encode(digest)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_fresh_prefixed_and_never_recorded_or_debug_printed() {
        let (a, b) = (Canaries::fresh(), Canaries::fresh());
        assert_eq!(a.names(), NAMES);
        for ((name, value), (_, other)) in a.env().iter().zip(b.env()) {
            assert!(value.starts_with(PREFIX), "{name}");
            assert!(value.len() > PREFIX.len() + 30, "{name}");
            assert_ne!(value, other, "every cell gets its own values");
        }
        let record = serde_json::to_string(&a.record()).unwrap();
        let debug = format!("{a:?}");
        for (_, value) in a.env() {
            assert!(!record.contains(value.as_str()), "{record}");
            assert!(!debug.contains(value.as_str()), "{debug}");
        }
        assert!(a.record().digest.starts_with("sha256:"));
        assert_ne!(a.record().digest, b.record().digest);
        assert_eq!(
            a.record(),
            a.clone().record(),
            "the digest is a function of the values"
        );
    }
}
