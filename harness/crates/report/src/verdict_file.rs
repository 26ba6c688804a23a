//! `verdict.json`: how one cell ended, written into its evidence folder when the cell ends and
//! read back by every report (`harness report` rebuilding a run cut off before its
//! summary.json, the HTML page of the cell). One type for the writer and every reader.

use crate::layout::CellEvidence;
use crate::outcome::{CellOutcome, CellResult};
use crate::summary::{CellSummary, Status};
use anyhow::{Context, Result};
use graders::events::CellId;
use graders::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use suites::spec::Profile;

/// The contents of `verdict.json`. Optional fields are written as `null` rather than left out,
/// so every file has every key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerdictFile {
    pub cell: String,
    /// The profile of the cell's suite (`null` in files written before profiles).
    #[serde(default)]
    pub profile: Option<Profile>,
    pub status: Status,
    /// The verdict the baseline expects (`pass` unless listed).
    #[serde(default = "pass")]
    pub expected: String,
    /// Why the baseline expects it.
    #[serde(default)]
    pub expected_reason: Option<String>,
    /// What the driver's declarations make of the cell, when they change what passes.
    #[serde(default)]
    pub expected_declarations: Option<String>,
    /// The verdict, when the cell was graded.
    #[serde(default)]
    pub verdict: Option<Verdict>,
    /// How the verdict compares with the baseline, in words, when the cell was graded.
    #[serde(default)]
    pub agreement: Option<String>,
    /// The grader's reason, the ignore or not-applicable reason, or the error; a red cell's
    /// leads with its cause.
    #[serde(default)]
    pub message: String,
    /// A red cell's cause, as it leads `message` (`crate::cause`); `null` when the evidence
    /// holds none, for a cell that is not red, and in files written before causes.
    #[serde(default)]
    pub cause: Option<String>,
    #[serde(default)]
    pub duration_ms: u64,
    /// The run that graded the cell (`crate::run_id::this_run`); `null` in a file not bound.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The SHA-256 of each evidence file the cell was graded on, by its name in the cell's
    /// folder; `null` for one the cell did not leave (`crate::binding`).
    #[serde(default)]
    pub evidence_sha256: BTreeMap<String, Option<String>>,
}

/// The largest `verdict.json` read back: a verdict's evidence excerpts are bounded far below it.
pub const MAX_BYTES: u64 = 4 << 20;

fn pass() -> String {
    "pass".into()
}

impl VerdictFile {
    pub fn from_result(result: &CellResult) -> Self {
        let summary = CellSummary::from_result(result);
        let agreement = match &result.outcome {
            CellOutcome::Graded { agreement, .. } => Some(agreement.describe()),
            _ => None,
        };
        Self {
            cell: summary.cell,
            profile: summary.profile,
            status: summary.status,
            expected: summary.expected,
            expected_reason: summary.expected_reason,
            expected_declarations: summary.expected_declarations,
            verdict: result.verdict().cloned(),
            agreement,
            message: summary.reason,
            cause: None,
            duration_ms: summary.duration_ms,
            run_id: None,
            evidence_sha256: BTreeMap::new(),
        }
    }

    /// The same file, keeping the red cell's cause its message leads with.
    pub fn with_cause(mut self, cause: Option<String>) -> Self {
        self.cause = cause;
        self
    }

    /// Write `verdict.json` into `evidence` (created if needed).
    pub fn write(&self, evidence: &CellEvidence) -> Result<()> {
        std::fs::create_dir_all(&evidence.root)
            .with_context(|| format!("creating {}", evidence.root.display()))?;
        // Through a JSON value: its keys come out sorted, as the file has always been written.
        let text = serde_json::to_string_pretty(&serde_json::to_value(self)?)? + "\n";
        let path = evidence.verdict();
        crate::write_atomically(&path, text.as_bytes())
    }

    /// Parse a `verdict.json` (`path` names it in errors); its status must follow from its
    /// typed verdict and expectation ([`Self::check`]).
    pub fn parse(bytes: &[u8], path: &std::path::Path) -> Result<Self> {
        let file: Self = serde_json::from_slice(bytes)
            .with_context(|| format!("{} is not a verdict file", path.display()))?;
        file.check()
            .with_context(|| format!("{} is damaged", path.display()))?;
        Ok(file)
    }

    /// The file's `status` is a claim; what it claims must follow from the typed verdict and the
    /// expected verdict, or the file is damaged. A status saying the cell is fine is never taken
    /// on its word: `as-expected` needs the expected verdict itself, `stale` a pass against a
    /// listed failure. (`differs` may come from an expected signature this file does not keep,
    /// and it is a failure anyway.)
    pub fn check(&self) -> Result<()> {
        let graded = matches!(
            self.status,
            Status::AsExpected | Status::Differs | Status::Stale
        );
        let Some(verdict) = &self.verdict else {
            anyhow::ensure!(!graded, "status {:?} without a verdict", self.status);
            return Ok(());
        };
        anyhow::ensure!(
            graded,
            "a `{}` verdict with status {:?}",
            verdict.verdict,
            self.status
        );
        let actual = verdict.verdict.as_str();
        match self.status {
            Status::AsExpected => anyhow::ensure!(
                actual == self.expected,
                "status as-expected, but the verdict `{actual}` is not the expected `{}`",
                self.expected
            ),
            Status::Stale => anyhow::ensure!(
                actual == "pass" && self.expected != "pass",
                "status stale, but the verdict is `{actual}` against an expected `{}`",
                self.expected
            ),
            _ => {}
        }
        Ok(())
    }

    /// `verdict.json` of `evidence`; `None` when the cell left none (it did not finish). Read as
    /// evidence is (`graders::evidence_file`): a regular file of at most [`MAX_BYTES`].
    pub fn read(evidence: &CellEvidence) -> Result<Option<Self>> {
        let path = evidence.verdict();
        match graders::evidence_file::read(&path, MAX_BYTES)? {
            Some(bytes) => Self::parse(&bytes, &path).map(Some),
            None => Ok(None),
        }
    }

    /// The report's row of the cell `id`, whose evidence is in `evidence`.
    pub fn summary(&self, id: &CellId, evidence: &CellEvidence) -> CellSummary {
        CellSummary {
            cell: id.to_string(),
            profile: self.profile,
            suite: id.suite.clone(),
            runner: id.runner.clone(),
            environment: id.environment.clone(),
            case: id.case.clone(),
            status: self.status,
            expected: self.expected.clone(),
            expected_reason: self.expected_reason.clone(),
            expected_declarations: self.expected_declarations.clone(),
            verdict: self.verdict.as_ref().map(|v| v.verdict.to_string()),
            reason: self.message.clone(),
            duration_ms: self.duration_ms,
            evidence_dir: evidence.root.display().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use graders::verdict::VerdictKind;
    use std::time::Duration;
    use suites::{Agreement, Expectation};

    #[test]
    fn a_written_verdict_file_reads_back_with_every_key_present() {
        let dir = tempfile::tempdir().unwrap();
        let evidence = CellEvidence::new(dir.path());
        let id: CellId = "s.r.local.c".parse().unwrap();
        let result = CellResult {
            cell: id.clone(),
            profile: Some(Profile::Protocol),
            expected: Expectation::pass(),
            outcome: CellOutcome::Graded {
                verdict: Verdict::new(VerdictKind::Pass, "refused", Vec::new()),
                agreement: Agreement::AsExpected,
            },
            duration: Duration::from_millis(7),
            evidence_dir: dir.path().to_path_buf(),
        };
        let file = VerdictFile::from_result(&result);
        file.write(&evidence).unwrap();
        let text = std::fs::read_to_string(evidence.verdict()).unwrap();
        for key in ["\"agreement\"", "\"expected_reason\": null", "\"verdict\""] {
            assert!(text.contains(key), "{key} in {text}");
        }
        let read = VerdictFile::read(&evidence).unwrap().unwrap();
        assert_eq!(read, file);
        let row = read.summary(&id, &evidence);
        assert_eq!(row.status, Status::AsExpected);
        assert_eq!(row.verdict.as_deref(), Some("pass"));
        assert_eq!(row.reason, "refused");

        std::fs::write(evidence.verdict(), r#"{"cell":"x","status":"sideways"}"#).unwrap();
        let err = VerdictFile::read(&evidence).unwrap_err();
        assert!(
            format!("{err:#}").contains("is not a verdict file"),
            "{err:#}"
        );
        let absent = CellEvidence::new(&dir.path().join("absent"));
        assert_eq!(VerdictFile::read(&absent).unwrap(), None);
    }

    /// What a forged or damaged file claims is not believed: each is an error, never a row
    /// that says as expected.
    #[test]
    fn a_status_its_verdict_does_not_bear_out_is_damage_and_a_fifo_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let evidence = CellEvidence::new(dir.path());
        let verdict = r#"{"verdict":"incomplete","reason":"r","evidence":[]}"#;
        for (text, why) in [
            (
                r#"{"cell":"x","status":"as-expected","verdict":null}"#.to_string(),
                "without a verdict",
            ),
            (
                format!(
                    r#"{{"cell":"x","status":"as-expected","expected":"pass","verdict":{verdict}}}"#
                ),
                "is not the expected",
            ),
            (
                format!(
                    r#"{{"cell":"x","status":"stale","expected":"incomplete","verdict":{verdict}}}"#
                ),
                "status stale",
            ),
            (
                format!(r#"{{"cell":"x","status":"ignored","verdict":{verdict}}}"#),
                "verdict with status",
            ),
            (
                r#"{"cell":"x","status":"as-expected","verdict":7}"#.to_string(),
                "is not a verdict file",
            ),
        ] {
            std::fs::write(evidence.verdict(), &text).unwrap();
            let err = format!("{:#}", VerdictFile::read(&evidence).unwrap_err());
            assert!(err.contains(why), "{text}: {err}");
        }
        std::fs::write(
            evidence.verdict(),
            format!(r#"{{"cell":"x","status":"as-expected","expected":"incomplete","verdict":{verdict}}}"#),
        )
        .unwrap();
        assert!(VerdictFile::read(&evidence).unwrap().is_some());

        std::fs::remove_file(evidence.verdict()).unwrap();
        nix::unistd::mkfifo(&evidence.verdict(), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = format!("{:#}", VerdictFile::read(&evidence).unwrap_err());
        assert!(err.contains("not a regular file"), "{err}");
        let absent = CellEvidence::new(&dir.path().join("absent"));
        assert_eq!(VerdictFile::read(&absent).unwrap(), None);
    }
}
