//! What binds a `verdict.json` to the cell and the run that graded it: the cell's name, the id
//! of the run (one per `harness run` or test-binary process, also in its `summary.json`) and the
//! SHA-256 of each evidence file the cell was graded on ([`CellEvidence::graded`]). A report
//! refuses a verdict whose binding does not hold where it is read — one copied from another
//! cell's folder, evidence changed after grading, a verdict of another run than the folder's
//! summary — and says which part failed.

use crate::layout::CellEvidence;
use crate::run_id::this_run;
use crate::verdict_file::VerdictFile;
use anyhow::{Context, Result};
use graders::events::CellId;
use graders::evidence_file::{self, EvidenceFileError, MAX_STREAMED_BYTES};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The SHA-256 (hex) of each graded evidence file of `evidence`, `None` for one it does not
/// hold.
pub fn digests(evidence: &CellEvidence) -> Result<BTreeMap<String, Option<String>>> {
    evidence
        .graded()
        .into_iter()
        .map(|(name, path)| {
            let digest = sha256(&path).with_context(|| format!("hashing {name}"))?;
            Ok((name, digest))
        })
        .collect()
}

fn sha256(path: &Path) -> Result<Option<String>, EvidenceFileError> {
    let Some(mut file) = evidence_file::open(path, MAX_STREAMED_BYTES)? else {
        return Ok(None);
    };
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(|source| EvidenceFileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(Some(hex::encode(hasher.finalize())))
}

impl VerdictFile {
    /// This file bound to this process's run and to the evidence `evidence` holds now (the
    /// cell has been graded on it).
    pub fn bind(mut self, evidence: &CellEvidence) -> Result<Self> {
        self.run_id = Some(this_run().to_string());
        self.evidence_sha256 = digests(evidence)?;
        Ok(self)
    }

    /// Whether this file, found in the folder `evidence` of the cell `cell`, is bound to it:
    /// its cell, each graded evidence file as it was graded, and, when the folder's
    /// `summary.json` names its run, that run. The error says which binding failed.
    pub fn check_binding(
        &self,
        cell: &CellId,
        evidence: &CellEvidence,
        run: Option<&str>,
    ) -> Result<(), String> {
        let name = cell.to_string();
        if self.cell != name {
            return Err(format!(
                "verdict.json names cell {}, not this folder's {name}",
                self.cell
            ));
        }
        let Some(run_id) = &self.run_id else {
            return Err(
                "verdict.json names no run: it is not bound to the run that graded it".into(),
            );
        };
        if let Some(run) = run.filter(|run| run != run_id) {
            return Err(format!(
                "verdict.json is of run {run_id}, not of the run {run} that summary.json describes"
            ));
        }
        for (file, path) in evidence.graded() {
            let Some(recorded) = self.evidence_sha256.get(&file) else {
                return Err(format!(
                    "verdict.json records no digest of {file}: it is not bound to its evidence"
                ));
            };
            let now = sha256(&path).map_err(|e| e.to_string())?;
            match (recorded, now) {
                (Some(recorded), Some(now)) if *recorded != now => {
                    return Err(format!(
                        "{file} changed after grading: sha256 {now} ≠ {recorded} recorded in verdict.json"
                    ))
                }
                (None, Some(_)) => {
                    return Err(format!(
                        "{file} appeared after grading: verdict.json records that the cell left none"
                    ))
                }
                (Some(_), None) => return Err(format!("{file} was removed after grading")),
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::folders;
    use crate::layout::CellEvidence;
    use crate::outcome::{CellOutcome, CellResult};
    use crate::verdict_file::VerdictFile;
    use crate::Status;
    use graders::verdict::{Verdict, VerdictKind};
    use std::path::Path;
    use std::time::Duration;
    use suites::Expectation;

    const PASSING: &str = "s.r.local.passing";
    const FAILING: &str = "s.r.local.failing";

    fn result(name: &str, verdict: VerdictKind) -> CellResult {
        let expected = Expectation::pass();
        CellResult {
            cell: name.parse().unwrap(),
            profile: None,
            outcome: CellOutcome::Graded {
                agreement: expected.judge(verdict),
                verdict: Verdict::new(verdict, "graded", Vec::new()),
            },
            expected,
            duration: Duration::from_millis(5),
            evidence_dir: name.into(),
        }
    }

    /// A folder as a run leaves it: a passing and a failing cell, each with its own transcript,
    /// each verdict bound; and its summary.json when `with_summary`.
    fn run_folder(dir: &Path, with_summary: bool) -> Vec<CellResult> {
        let results = vec![
            result(PASSING, VerdictKind::Pass),
            result(FAILING, VerdictKind::Incomplete),
        ];
        for result in &results {
            let evidence = CellEvidence::of(dir, &result.cell.to_string());
            std::fs::create_dir_all(&evidence.root).unwrap();
            std::fs::write(
                evidence.transcript(),
                format!("{{\"of\":\"{}\"}}\n", result.cell),
            )
            .unwrap();
            VerdictFile::from_result(result)
                .bind(&evidence)
                .unwrap()
                .write(&evidence)
                .unwrap();
        }
        if with_summary {
            crate::write_all(dir, &results, Duration::from_millis(9)).unwrap();
        }
        results
    }

    fn status_and_reason(loaded: &folders::Loaded, name: &str) -> (Status, String) {
        let cell = loaded
            .summary
            .cells
            .iter()
            .find(|c| c.cell == name)
            .unwrap();
        (cell.status, cell.reason.clone())
    }

    fn each_load(dir: &Path) -> Vec<folders::Loaded> {
        let dirs = [dir.to_path_buf()];
        vec![
            folders::load(&dirs, &[]).unwrap(),
            folders::load_complete(&dirs, &[]).unwrap(),
        ]
    }

    #[test]
    fn a_passing_cells_verdict_copied_into_a_failing_cells_folder_is_an_error_cell() {
        let dir = tempfile::tempdir().unwrap();
        run_folder(dir.path(), false);
        for loaded in each_load(dir.path()) {
            assert_eq!(status_and_reason(&loaded, PASSING).0, Status::AsExpected);
            assert_eq!(status_and_reason(&loaded, FAILING).0, Status::Differs);
            assert_eq!(
                loaded.summary.run_id.as_deref(),
                Some(crate::run_id::this_run())
            );
        }
        let (passing, failing) = (
            CellEvidence::of(dir.path(), PASSING),
            CellEvidence::of(dir.path(), FAILING),
        );
        std::fs::copy(passing.verdict(), failing.verdict()).unwrap();
        for loaded in each_load(dir.path()) {
            let (status, reason) = status_and_reason(&loaded, FAILING);
            assert_eq!(status, Status::Error, "{reason}");
            assert_eq!(
                reason,
                format!("verdict.json names cell {PASSING}, not this folder's {FAILING}")
            );
        }
        // Renamed to the folder's cell, it is still bound to the other cell's evidence.
        let text = std::fs::read_to_string(passing.verdict()).unwrap();
        std::fs::write(failing.verdict(), text.replace(PASSING, FAILING)).unwrap();
        for loaded in each_load(dir.path()) {
            let (status, reason) = status_and_reason(&loaded, FAILING);
            assert_eq!(status, Status::Error, "{reason}");
            assert!(
                reason.starts_with("transcript.jsonl changed after grading: sha256 "),
                "{reason}"
            );
        }
    }

    #[test]
    fn evidence_changed_added_or_removed_after_grading_is_refused_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        run_folder(dir.path(), true);
        let passing = CellEvidence::of(dir.path(), PASSING);
        for (change, says) in [
            (
                Box::new(|e: &CellEvidence| std::fs::write(e.transcript(), "{}\n").unwrap())
                    as Box<dyn Fn(&CellEvidence)>,
                "transcript.jsonl changed after grading",
            ),
            (
                Box::new(|e: &CellEvidence| std::fs::remove_file(e.transcript()).unwrap()),
                "transcript.jsonl was removed after grading",
            ),
            (
                Box::new(|e: &CellEvidence| std::fs::write(e.stderr(), "late\n").unwrap()),
                "stderr.log appeared after grading",
            ),
        ] {
            let copy = tempfile::tempdir().unwrap();
            let status = std::process::Command::new("cp")
                .arg("-a")
                .arg(format!("{}/.", dir.path().display()))
                .arg(copy.path())
                .status()
                .unwrap();
            assert!(status.success());
            change(&CellEvidence::of(copy.path(), PASSING));
            for loaded in each_load(copy.path()) {
                let (status, reason) = status_and_reason(&loaded, PASSING);
                assert_eq!(status, Status::Error, "{reason}");
                assert!(reason.contains(says), "{reason}");
            }
        }
        assert!(passing.transcript().exists(), "the original is untouched");
    }

    #[test]
    fn a_summary_row_stands_only_on_a_verdict_bound_to_the_summarys_run() {
        let dir = tempfile::tempdir().unwrap();
        run_folder(dir.path(), true);
        let loaded = folders::load(&[dir.path().to_path_buf()], &[]).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(status_and_reason(&loaded, PASSING).0, Status::AsExpected);

        let passing = CellEvidence::of(dir.path(), PASSING);
        let mut file = VerdictFile::read(&passing).unwrap().unwrap();
        file.run_id = Some("an-earlier-run".into());
        file.write(&passing).unwrap();
        let loaded = folders::load(&[dir.path().to_path_buf()], &[]).unwrap();
        let (status, reason) = status_and_reason(&loaded, PASSING);
        assert_eq!(status, Status::Error);
        assert!(
            reason.starts_with("verdict.json is of run an-earlier-run, not of the run "),
            "{reason}"
        );
        // Without the summary (a cut-off run), the same verdict stands on its cell and evidence.
        let loaded = folders::load_complete(&[dir.path().to_path_buf()], &[]).unwrap();
        assert_eq!(status_and_reason(&loaded, PASSING).0, Status::AsExpected);
        assert_eq!(loaded.summary.run_id, None, "cells of two runs");

        // A summary row claiming what the bound verdict does not say is an error too, and so
        // is one claiming a pass without a verdict.
        let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
        std::fs::write(
            dir.path().join("summary.json"),
            summary.replace("\"status\": \"differs\"", "\"status\": \"as-expected\""),
        )
        .unwrap();
        let loaded = folders::load(&[dir.path().to_path_buf()], &[]).unwrap();
        let (status, reason) = status_and_reason(&loaded, FAILING);
        assert_eq!(status, Status::Error);
        assert_eq!(
            reason,
            "summary.json says as-expected but verdict.json says differs"
        );
        std::fs::remove_file(CellEvidence::of(dir.path(), FAILING).verdict()).unwrap();
        let loaded = folders::load(&[dir.path().to_path_buf()], &[]).unwrap();
        let (status, reason) = status_and_reason(&loaded, FAILING);
        assert_eq!(status, Status::Error);
        assert!(reason.contains("holds no verdict.json"), "{reason}");

        // A summary that names no run is not believed: its cells come from their verdicts.
        let summary = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
        let mut doc: serde_json::Value = serde_json::from_str(&summary).unwrap();
        doc.as_object_mut().unwrap().remove("run_id");
        std::fs::write(dir.path().join("summary.json"), doc.to_string()).unwrap();
        let loaded = folders::load(&[dir.path().to_path_buf()], &[]).unwrap();
        assert!(
            loaded.warnings.iter().any(|w| w.contains("names no run")),
            "{:?}",
            loaded.warnings
        );
        assert_eq!(status_and_reason(&loaded, FAILING).0, Status::Error);
    }
}
