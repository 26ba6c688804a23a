//! `baseline.toml`: the cells whose expected verdict is not `pass`, each with the reason, and the
//! comparison of a cell's actual verdict with its expectation.

use serde::Deserialize;
use std::collections::BTreeMap;

pub use graders::verdict::VerdictKind;

/// Parse a kebab-case verdict name the way the graders serialize it.
pub fn parse_verdict(name: &str) -> Option<VerdictKind> {
    toml::Value::String(name.to_string()).try_into().ok()
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineFile {
    #[serde(default)]
    pub expected: Vec<BaselineEntry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    pub cell: String,
    pub verdict: String,
    pub reason: String,
}

/// The expected verdict of one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    pub verdict: VerdictKind,
    /// Why this verdict is expected (`None` for the default, `pass`).
    pub reason: Option<String>,
}

impl Expectation {
    pub fn pass() -> Self {
        Self {
            verdict: VerdictKind::Pass,
            reason: None,
        }
    }

    pub fn is_pass(&self) -> bool {
        self.verdict == VerdictKind::Pass
    }

    /// Compare an actual verdict with this expectation.
    pub fn judge(&self, actual: VerdictKind) -> Agreement {
        if actual == self.verdict {
            Agreement::AsExpected
        } else if actual == VerdictKind::Pass {
            Agreement::Stale {
                expected: self.verdict,
            }
        } else {
            Agreement::Differs {
                expected: self.verdict,
                actual,
            }
        }
    }
}

/// How a cell's verdict relates to its expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agreement {
    AsExpected,
    /// The verdict is not the expected one.
    Differs {
        expected: VerdictKind,
        actual: VerdictKind,
    },
    /// A listed known failure now passes: the baseline entry is stale and must be removed.
    Stale {
        expected: VerdictKind,
    },
}

impl Agreement {
    pub fn is_ok(&self) -> bool {
        matches!(self, Agreement::AsExpected)
    }

    /// One line for a failure message or a report.
    pub fn describe(&self) -> String {
        match self {
            Agreement::AsExpected => "as expected".into(),
            Agreement::Differs { expected, actual } => {
                format!("expected `{expected}`, got `{actual}`")
            }
            Agreement::Stale { expected } => format!(
                "stale baseline: expected `{expected}` but the cell now passes; remove it from baseline.toml"
            ),
        }
    }
}

/// The validated baseline: cell name → expectation (cells not listed expect `pass`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Baseline {
    pub entries: BTreeMap<String, Expectation>,
}

impl Baseline {
    pub fn expectation(&self, cell: &str) -> Expectation {
        self.entries
            .get(cell)
            .cloned()
            .unwrap_or_else(Expectation::pass)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judging_distinguishes_expected_differs_and_stale() {
        let known_failure = Expectation {
            verdict: VerdictKind::StartupRejected,
            reason: Some("legacy".into()),
        };
        assert_eq!(
            known_failure.judge(VerdictKind::StartupRejected),
            Agreement::AsExpected
        );
        assert!(matches!(
            known_failure.judge(VerdictKind::Pass),
            Agreement::Stale { .. }
        ));
        assert!(matches!(
            known_failure.judge(VerdictKind::Incomplete),
            Agreement::Differs { .. }
        ));
        assert_eq!(
            Expectation::pass().judge(VerdictKind::Pass),
            Agreement::AsExpected
        );
        assert!(matches!(
            Expectation::pass().judge(VerdictKind::WriteSucceeded),
            Agreement::Differs { .. }
        ));
        assert_eq!(
            parse_verdict("sandbox-failed-to-start"),
            Some(VerdictKind::SandboxFailedToStart)
        );
        assert_eq!(parse_verdict("passed"), None);
    }
}
