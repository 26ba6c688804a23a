//! `baseline.toml`: the cells whose expected verdict is not `pass`, each with the reason and —
//! for a verdict decided by a signature (`sandbox-failed-to-start`, `startup-rejected`) — the
//! signature it expects, and the comparison of a cell's actual verdict with its expectation:
//! the same verdict for another cause is a difference.

use serde::Deserialize;
use std::collections::BTreeMap;

pub(crate) use graders::verdict::{Verdict, VerdictKind};

/// Verdicts a signature decides: a baseline entry for one must name the signature it expects.
pub(crate) const SIGNED_VERDICTS: &[VerdictKind] = &[
    VerdictKind::SandboxFailedToStart,
    VerdictKind::StartupRejected,
];

/// Parse a kebab-case verdict name the way the graders serialize it.
pub(crate) fn parse_verdict(name: &str) -> Option<VerdictKind> {
    toml::Value::String(name.to_string()).try_into().ok()
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BaselineFile {
    #[serde(default)]
    pub expected: Vec<BaselineEntry>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    pub cell: String,
    pub verdict: String,
    /// The `graders::signatures` row that causes the verdict (e.g. `bwrap-uid-map`).
    #[serde(default)]
    pub signature: Option<String>,
    pub reason: String,
}

/// The cells a baseline entry names: one cell name, or a pattern whose parts may hold `*`
/// (any text without a dot), e.g. `codex-planning-read-only.my-runner-codex*.daytona.*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CellPattern {
    parts: [String; 4],
}

impl CellPattern {
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let parts: Vec<&str> = text.split('.').collect();
        let [suite, runner, environment, case] = parts.as_slice() else {
            return Err(format!(
                "`{text}` is not of the form suite.runner.environment.case (four non-empty parts, `*` standing for any text without a dot)"
            ));
        };
        let parts = [suite, runner, environment, case].map(|p| p.to_string());
        if parts.iter().any(String::is_empty) {
            return Err(format!("`{text}` has an empty part"));
        }
        Ok(Self { parts })
    }

    /// Whether it names exactly one cell (no `*`).
    pub(crate) fn is_exact(&self) -> bool {
        !self.parts.iter().any(|p| p.contains('*'))
    }

    pub(crate) fn matches(&self, cell: &graders::events::CellId) -> bool {
        let names = [&cell.suite, &cell.runner, &cell.environment, &cell.case];
        self.parts
            .iter()
            .zip(names)
            .all(|(pattern, name)| part_matches(pattern, name))
    }
}

/// `*` matches any run of characters (parts hold no dots).
fn part_matches(pattern: &str, name: &str) -> bool {
    let mut pieces = pattern.split('*');
    let first = pieces.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The expected verdict of one cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expectation {
    pub verdict: VerdictKind,
    /// Why this verdict is expected (`None` for the default, `pass`).
    pub reason: Option<String>,
    /// The signature that must decide the verdict (`None`: any cause).
    pub signature: Option<String>,
    /// What the driver's declarations make of the cell, when they change what passes
    /// ([`crate::applicability::graded_with`]): said beside the expected verdict by
    /// `harness run --list` and by every report.
    pub declarations: Option<String>,
}

impl Expectation {
    pub fn pass() -> Self {
        Self {
            verdict: VerdictKind::Pass,
            reason: None,
            signature: None,
            declarations: None,
        }
    }

    /// What is expected, in words: the verdict, the baseline's reason, what the declarations
    /// make of the cell (`expects pass; its line of …`).
    pub fn describe(&self) -> String {
        let mut text = match &self.reason {
            Some(reason) => format!("expects {} (baseline: {reason})", self.verdict),
            None => format!("expects {}", self.verdict),
        };
        if let Some(note) = &self.declarations {
            text.push_str("; ");
            text.push_str(note);
        }
        text
    }

    pub fn is_pass(&self) -> bool {
        self.verdict == VerdictKind::Pass
    }

    /// Compare an actual verdict kind with this expectation, ignoring its cause (for callers
    /// that have only the kind; cells use [`Self::judge_verdict`]).
    pub fn judge(&self, actual: VerdictKind) -> Agreement {
        self.judge_with(actual, self.signature.as_deref())
    }

    /// Compare an actual verdict with this expectation: its kind, and the signature that
    /// decided it when the expectation names one.
    pub fn judge_verdict(&self, actual: &Verdict) -> Agreement {
        self.judge_with(actual.verdict, actual.signature.as_deref())
    }

    fn judge_with(&self, actual: VerdictKind, signature: Option<&str>) -> Agreement {
        if actual == VerdictKind::Pass && self.verdict != VerdictKind::Pass {
            return Agreement::Stale {
                expected: self.verdict,
            };
        }
        let cause_differs = self
            .signature
            .as_deref()
            .is_some_and(|expected| signature != Some(expected));
        if actual == self.verdict && !cause_differs {
            Agreement::AsExpected
        } else {
            Agreement::Differs {
                expected: self.verdict,
                actual,
                expected_signature: self.signature.clone(),
                actual_signature: signature.map(str::to_string),
            }
        }
    }
}

/// How a cell's verdict relates to its expectation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agreement {
    AsExpected,
    /// The verdict is not the expected one, or it is but for another cause (signature).
    Differs {
        expected: VerdictKind,
        actual: VerdictKind,
        expected_signature: Option<String>,
        actual_signature: Option<String>,
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
            Agreement::Differs {
                expected,
                actual,
                expected_signature,
                actual_signature,
            } => {
                let cause = |s: &Option<String>| {
                    s.as_deref()
                        .map(|s| format!(" (`{s}`)"))
                        .unwrap_or_default()
                };
                if expected == actual {
                    format!(
                        "expected `{expected}` caused by `{}`, got it caused by {}",
                        expected_signature.as_deref().unwrap_or("?"),
                        actual_signature
                            .as_deref()
                            .map_or("no signature".to_string(), |s| format!("`{s}`"))
                    )
                } else {
                    format!(
                        "expected `{expected}`{}, got `{actual}`{}",
                        cause(expected_signature),
                        cause(actual_signature)
                    )
                }
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
mod pattern_tests {
    use super::*;
    use graders::events::CellId;

    #[test]
    fn a_pattern_matches_within_parts_and_never_across_dots() {
        let cell = CellId::new(
            "s",
            "my-runner-codex-0-171-0",
            "daytona",
            "plan-write-refused",
        );
        let matches = |p: &str| CellPattern::parse(p).unwrap().matches(&cell);
        assert!(matches("s.my-runner-codex*.daytona.*"));
        assert!(matches("*.*.*.*"));
        assert!(matches("s.*-codex-*.day*na.plan-*-refused"));
        assert!(matches(
            "s.my-runner-codex-0-171-0.daytona.plan-write-refused"
        ));
        assert!(!matches("s.my-runner-codex.daytona.*"));
        assert!(!matches("s.*.daytona-uidmap.*"));
        assert!(!matches("s.*fake*.daytona.*"));
        assert!(CellPattern::parse("s.*.daytona").is_err());
        assert!(CellPattern::parse("s..daytona.c").is_err());
        assert!(CellPattern::parse("s.r.e.c").unwrap().is_exact());
        assert!(!CellPattern::parse("s.r*.e.c").unwrap().is_exact());
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
            ..Expectation::pass()
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

    #[test]
    fn a_known_failure_for_another_cause_differs() {
        let pinned = Expectation {
            verdict: VerdictKind::SandboxFailedToStart,
            reason: Some("userns blocked".into()),
            signature: Some("bwrap-namespace-no-permission".into()),
            declarations: None,
        };
        let verdict = |sig: Option<&str>| {
            let v = Verdict::new(VerdictKind::SandboxFailedToStart, "r", vec![]);
            match sig {
                Some(sig) => v.with_signature(sig),
                None => v,
            }
        };
        assert_eq!(
            pinned.judge_verdict(&verdict(Some("bwrap-namespace-no-permission"))),
            Agreement::AsExpected
        );
        let other = pinned.judge_verdict(&verdict(Some("bwrap-fatal-other")));
        assert!(matches!(other, Agreement::Differs { .. }), "{other:?}");
        assert!(
            other.describe().contains("bwrap-fatal-other"),
            "{}",
            other.describe()
        );
        assert!(matches!(
            pinned.judge_verdict(&verdict(None)),
            Agreement::Differs { .. }
        ));
        assert!(matches!(
            pinned.judge_verdict(&Verdict::new(VerdictKind::Pass, "r", vec![])),
            Agreement::Stale { .. }
        ));
    }
}
