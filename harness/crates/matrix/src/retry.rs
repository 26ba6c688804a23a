//! The one bounded, recorded retry a cell may make: the real Codex's helper pipe race.
//!
//! When bubblewrap dies at once, Codex sometimes writes the helper's request into the closed
//! pipe first and reports `Broken pipe (os error 32)` instead of bubblewrap's own message
//! (about one run in sixty in userns-blocked). The race is Codex's, not the environment's or
//! the driver's: the verdict stays the same kind, but the baseline pins the cause (the
//! signature) and the race hides it. A cell of a Codex runner whose verdict disagrees with its
//! baseline and whose events show the race runs again on a fresh app-server, at most
//! [`MAX_ATTEMPTS`] times in all. Graders are never loosened: the final attempt is judged like
//! any other. Every earlier attempt's evidence is kept in `retries/attempt-N/` of the cell's
//! folder, listed in `retries.json`, and named in the verdict's evidence and reason.

use anyhow::{Context, Result};
use graders::events::{Body, Event};
use graders::reader::{read_all, ReaderConfig};
use graders::verdict::{EvidenceRef, Verdict};
use serde::Serialize;
use std::future::Future;
use std::path::{Path, PathBuf};
use suites::Expectation;

/// The text the race leaves where bubblewrap's message should be.
pub(crate) const HELPER_PIPE_RACE: &str = "Broken pipe (os error 32)";
/// Attempts in all, the first included.
pub(crate) const MAX_ATTEMPTS: usize = 3;

/// One attempt that was retried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Retried {
    /// 1-based.
    pub(crate) attempt: usize,
    /// Why it was retried (the event that shows the race).
    pub(crate) reason: String,
    /// Its verdict, which disagreed with the baseline.
    pub(crate) verdict: String,
    /// Where its evidence is kept, relative to the cell's folder.
    pub(crate) evidence: String,
}

/// The first event of a run that shows the helper pipe race: a rejected session or a tool
/// output quoting it.
pub(crate) fn shows_pipe_race(events: &[Event]) -> Option<(u64, String)> {
    events.iter().find_map(|e| {
        let text = match &e.body {
            Body::SessionRejected(r) => r.message.as_str(),
            Body::ModelToolOutput(o) => o.output.as_str(),
            Body::TurnError(t) => t.message.as_str(),
            _ => return None,
        };
        text.contains(HELPER_PIPE_RACE)
            .then(|| (e.seq, graders::verdict::excerpt(text)))
    })
}

/// Run `attempt` (one whole cell run into `root`, which it recreates) until its verdict agrees
/// with `expected`, or the disagreement is not the pipe race, or [`MAX_ATTEMPTS`] ran. Returns
/// the last attempt's verdict, with each retry named in its reason and evidence.
pub(crate) async fn run_retrying_pipe_race<F, Fut>(
    expected: &Expectation,
    root: &Path,
    mut attempt: F,
) -> Result<Verdict>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Verdict>>,
{
    let mut retried: Vec<(Retried, PathBuf)> = Vec::new();
    let mut verdict = attempt().await?;
    while retried.len() + 1 < MAX_ATTEMPTS && !expected.judge_verdict(&verdict).is_ok() {
        let Some((seq, text)) = race_in(root) else {
            break;
        };
        let n = retried.len() + 1;
        let kept = root.with_file_name(format!(
            "{}.pipe-race-attempt-{n}",
            root.file_name().and_then(|f| f.to_str()).unwrap_or("cell")
        ));
        let _ = std::fs::remove_dir_all(&kept);
        std::fs::rename(root, &kept)
            .with_context(|| format!("keeping attempt {n}'s evidence in {}", kept.display()))?;
        retried.push((
            Retried {
                attempt: n,
                reason: format!("event {seq} shows the Codex helper pipe race: {text}"),
                verdict: format!("{}: {}", verdict.verdict, verdict.reason),
                evidence: format!("retries/attempt-{n}"),
            },
            kept,
        ));
        verdict = attempt().await?;
    }
    if retried.is_empty() {
        return Ok(verdict);
    }
    let dir = root.join("retries");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for (record, kept) in &retried {
        let to = root.join(&record.evidence);
        std::fs::rename(kept, &to)
            .with_context(|| format!("moving {} to {}", kept.display(), to.display()))?;
    }
    let records: Vec<&Retried> = retried.iter().map(|(r, _)| r).collect();
    std::fs::write(
        root.join("retries.json"),
        serde_json::to_string_pretty(&records)? + "\n",
    )?;
    let mut named = verdict.clone();
    named.reason = format!(
        "{} (attempt {} of at most {MAX_ATTEMPTS}: {} earlier attempt(s) hit the Codex helper pipe race and were retried; see retries.json)",
        verdict.reason,
        retried.len() + 1,
        retried.len()
    );
    named.evidence.extend(records.iter().map(|r| EvidenceRef {
        seq: None,
        line: None,
        excerpt: graders::verdict::excerpt(&format!(
            "retried attempt {} ({}): {}",
            r.attempt, r.evidence, r.reason
        )),
    }));
    Ok(named)
}

/// A cell's attempts: Codex runners get the pipe-race retry, every other runner one attempt.
pub(crate) async fn run_cell_attempts<F, Fut>(
    cell: &suites::Cell,
    root: &Path,
    mut attempt: F,
) -> Result<Verdict>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Verdict>>,
{
    if cell.runner.app_server == suites::spec::AppServerKind::Codex {
        run_retrying_pipe_race(&cell.expected, root, attempt).await
    } else {
        attempt().await
    }
}

fn race_in(root: &Path) -> Option<(u64, String)> {
    let file = std::fs::File::open(root.join("events.jsonl")).ok()?;
    let events = read_all(std::io::BufReader::new(file), ReaderConfig::default()).ok()?;
    shows_pipe_race(&events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use driver::event_log::EventLog;
    use graders::events::{Ending, RunEnded, SessionRejected, Source};
    use graders::verdict::VerdictKind;
    use std::cell::Cell;

    fn write_run(root: &Path, message: &str) {
        std::fs::create_dir_all(root).unwrap();
        let mut log = EventLog::to_file("r", &root.join("events.jsonl")).unwrap();
        log.emit(
            Source::Driver,
            Body::SessionRejected(SessionRejected {
                code: -32603,
                message: message.into(),
                attempt: 1,
            }),
        )
        .unwrap();
        log.end(RunEnded {
            ending: Ending::FailedPermanently,
            retry_offered: true,
            error_code: None,
            reason: None,
        })
        .unwrap();
    }

    fn pinned() -> Expectation {
        Expectation {
            verdict: VerdictKind::StartupRejected,
            reason: Some("userns blocked".into()),
            signature: Some("bwrap-namespace-no-permission".into()),
            declarations: None,
        }
    }

    fn rejected(signature: Option<&str>) -> Verdict {
        let v = Verdict::new(VerdictKind::StartupRejected, "rejected", vec![]);
        match signature {
            Some(s) => v.with_signature(s),
            None => v,
        }
    }

    const RACE: &str = "error creating thread: failed to load AGENTS.md instructions for environment `local`: Broken pipe (os error 32)";
    const BWRAP: &str = "fs sandbox helper failed: bwrap: No permissions to create new namespace";

    /// Run the retry loop over attempts whose n-th (1-based) run writes `script(n)`'s message
    /// and returns a rejection with its signature; returns the verdict and the attempt count.
    async fn attempts(
        root: &Path,
        script: impl Fn(usize) -> (&'static str, Option<&'static str>),
    ) -> (Verdict, usize) {
        let runs = Cell::new(0);
        let verdict = run_retrying_pipe_race(&pinned(), root, || {
            runs.set(runs.get() + 1);
            let (message, signature) = script(runs.get());
            let root = root.to_path_buf();
            async move {
                write_run(&root, message);
                Ok(rejected(signature))
            }
        })
        .await
        .unwrap();
        (verdict, runs.get())
    }

    #[tokio::test]
    async fn the_race_is_retried_recorded_and_named() {
        let out = tempfile::tempdir().unwrap();
        let root = out.path().join("cell");
        let (verdict, runs) = attempts(&root, |n| match n {
            1 => (RACE, None),
            _ => (BWRAP, Some("bwrap-namespace-no-permission")),
        })
        .await;
        assert_eq!(runs, 2);
        assert!(pinned().judge_verdict(&verdict).is_ok());
        assert!(verdict.reason.contains("pipe race"), "{}", verdict.reason);
        assert!(root.join("retries/attempt-1/events.jsonl").is_file());
        let records = std::fs::read_to_string(root.join("retries.json")).unwrap();
        assert!(records.contains(HELPER_PIPE_RACE), "{records}");
        assert!(verdict
            .evidence
            .iter()
            .any(|e| e.excerpt.contains("retries/attempt-1")));
    }

    #[tokio::test]
    async fn retries_are_bounded_and_other_differences_are_not_retried() {
        let out = tempfile::tempdir().unwrap();
        let root = out.path().join("cell");
        let (verdict, runs) = attempts(&root, |_| (RACE, None)).await;
        assert_eq!(runs, MAX_ATTEMPTS);
        assert!(!pinned().judge_verdict(&verdict).is_ok());
        assert!(root
            .join(format!("retries/attempt-{}", MAX_ATTEMPTS - 1))
            .is_dir());

        let other = out.path().join("other");
        let (_, runs) = attempts(&other, |_| ("some other failure", None)).await;
        assert_eq!(
            runs, 1,
            "a difference that is not the race is never retried"
        );
        assert!(!other.join("retries.json").exists());
    }
}
