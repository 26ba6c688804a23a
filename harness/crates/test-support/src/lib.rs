//! What the workspace's test binaries share (a dev-dependency only, never a library's).
//!
//! The one rule for a test that needs something this machine may not have (root, runc,
//! bubblewrap, a real Codex): runnability is decided before the test runs. A missing
//! prerequisite makes the trial *ignored*, with the reason on stderr; under `CI=true` it makes
//! the trial *fail*, naming what is missing. Never a test that returns early and passes.
//!
//! The test binaries using it are libtest-mimic harnesses (`harness = false` in their
//! Cargo.toml); each decides only which prerequisites its trials need.

use libtest_mimic::{Failed, Trial};

/// Whether this is a CI run (`CI=true`), where nothing may be ignored for want of a
/// prerequisite.
pub fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// A trial running `body` when nothing is `missing`. Otherwise ignored with the reason on
/// stderr, or failing under `CI=true`; run anyway (`--include-ignored`), it fails with the
/// reason rather than pass without testing anything.
pub fn trial(
    name: impl Into<String>,
    missing: Option<String>,
    body: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    trial_where(ci(), name.into(), missing, body)
}

/// [`trial`], with whether this is a CI run given.
fn trial_where(
    ci: bool,
    name: String,
    missing: Option<String>,
    body: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    match missing {
        None => Trial::test(name, body),
        Some(reason) if ci => Trial::test(name, move || {
            Err(format!("CI=true and a prerequisite is missing: {reason}").into())
        }),
        Some(reason) => {
            eprintln!("ignored: {name}: {reason}");
            Trial::test(name, move || {
                Err(format!("cannot run here: {reason}").into())
            })
            .with_ignored_flag(true)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libtest_mimic::{Arguments, Conclusion};

    /// Run `trial` as `cargo test -- --include-ignored` would, its report discarded (an inner
    /// "FAILED" would read as this test's).
    fn run_including_ignored(trial: Trial) -> Conclusion {
        let arguments =
            Arguments::from_iter(["test", "--include-ignored", "--logfile", "/dev/null"]);
        libtest_mimic::run(&arguments, vec![trial])
    }

    #[test]
    fn a_missing_prerequisite_ignores_the_trial_and_fails_it_when_run_anyway() {
        let trial = trial_where(false, "t".into(), Some("no runc".into()), || Ok(()));
        assert!(trial.has_ignored_flag());
        let ran = run_including_ignored(trial);
        assert_eq!((ran.num_passed, ran.num_failed), (0, 1));
    }

    #[test]
    fn under_ci_a_missing_prerequisite_fails_the_trial() {
        let trial = trial_where(true, "t".into(), Some("no runc".into()), || Ok(()));
        assert!(!trial.has_ignored_flag());
        assert_eq!(run_including_ignored(trial).num_failed, 1);
    }

    #[test]
    fn nothing_missing_runs_the_body() {
        let trial = trial_where(true, "t".into(), None, || Ok(()));
        assert_eq!(run_including_ignored(trial).num_passed, 1);
    }
}
