//! The explorer's regression corpus (`harness/explore-corpus/`), replayed: every scenario on
//! the fake alone must say what the real Codex said when it was recorded (its messages
//! normalised and compared as `harness explore` compares), and on both sides the fake must
//! say what the pinned real Codex says now. Each scenario is a divergence `harness explore`
//! found (or a hand-written session of the same space, `--replay … --corpus`), so a trial fails
//! on the fake's old behaviour.
//!
//! The fake-alone trials need bubblewrap (the fake sandboxes the scenarios' commands); the
//! both-sides trials the pinned Codex too: without it they are reported as ignored with the
//! reason, and under `CI=true` they fail instead.

use crate::common;

use common::prereq;
use harness::explore::{corpus, sides::Players};
use libtest_mimic::Failed;
use std::path::PathBuf;

fn players(real: bool) -> Players {
    Players {
        harness_binary: PathBuf::from(env!("CARGO_BIN_EXE_harness")),
        codex: real
            .then(|| codex::provision::resolve(codex::provision::PINNED).ok())
            .flatten(),
    }
}

/// Outside `/tmp`: the real Codex's sandbox makes `/tmp` (a default writable root) hold empty
/// `.git`, `.codex` and `.agents` mount points once a session's command runs sandboxed, and the
/// real Codex then takes `/tmp` for the git root of every workspace below it, so its
/// `turn/diff/updated` paths grow a prefix the fake's do not (measured: three file-change
/// scenarios parted in a rehearsal after the untrusted-commands scenarios had run). `/var/tmp`
/// is no writable root of Codex's.
fn scratch_base() -> PathBuf {
    let var_tmp = PathBuf::from("/var/tmp");
    if var_tmp.is_dir() {
        var_tmp
    } else {
        std::env::temp_dir()
    }
}

/// A folder of its own for one replay, removed with everything below it when dropped (also when
/// the replay fails): a shared per-process folder left empty skeletons behind after each run.
fn scratch() -> Result<tempfile::TempDir, Failed> {
    tempfile::Builder::new()
        .prefix("explore-corpus-")
        .tempdir_in(scratch_base())
        .map_err(|e| {
            Failed::from(format!(
                "a scratch folder in {}: {e}",
                scratch_base().display()
            ))
        })
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let scenarios = corpus::read_all(&corpus::repository_corpus()).expect("the corpus reads");
    assert!(!scenarios.is_empty(), "the corpus is empty");
    let mut trials = Vec::new();
    for (name, scenario) in scenarios {
        let stem = name.trim_end_matches(".json").to_string();
        let on_fake = scenario.clone();
        let fake_name = stem.clone();
        trials.push(prereq::trial(
            format!("corpus_replays_on_the_fake::{stem}"),
            None,
            move || {
                let scratch = scratch()?;
                let root = scratch.path().join("fake").join(&fake_name);
                let found = corpus::replay_on_fake(&players(false), &on_fake, &root)
                    .map_err(|e| Failed::from(format!("{e:#}")))?;
                match found {
                    None => Ok(()),
                    Some(divergence) => Err(format!(
                        "the fake parts from the recorded real Codex: {} (found first as: {})",
                        divergence.describe(),
                        on_fake.found
                    )
                    .into()),
                }
            },
        ));
        trials.push(prereq::trial(
            format!("corpus_replays_on_both_sides_needs_real_codex::{stem}"),
            prereq::codex_missing(),
            move || {
                // The fake plays one course; the real Codex, on a loaded machine, now and then
                // another (explore-open.toml lists the one seen: an interrupted dynamic tool
                // call's item/completed missing once in ten runs under a parallel build). A
                // divergence counts when a second replay shows it again, as `harness mutate`
                // confirms a kill; a first one that does not repeat is printed, not hidden.
                let mut first = None;
                for attempt in ["first", "second"] {
                    let scratch = scratch()?;
                    let root = scratch.path().join(format!("both-{attempt}")).join(&stem);
                    let found = corpus::replay_on_both(&players(true), &scenario, &root)
                        .map_err(|e| Failed::from(format!("{e:#}")))?;
                    match (found, &first) {
                        (None, None) => return Ok(()),
                        (None, Some(earlier)) => {
                            eprintln!(
                                "{stem}: the first replay parted ({earlier}), the second agreed: the real Codex's course varied"
                            );
                            return Ok(());
                        }
                        (Some(divergence), _) => first = Some(divergence.describe()),
                    }
                }
                Err(format!(
                    "the fake parts from the real Codex, in two replays: {}",
                    first.unwrap_or_default()
                )
                .into())
            },
        ));
    }
    trials
}
