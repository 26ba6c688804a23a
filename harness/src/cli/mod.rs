//! One module per `harness` subcommand; each exposes `Args` (clap) and `main`.

pub mod bench;
pub mod coverage;
pub mod drift;
pub mod env;
pub mod fidelity;
pub mod grade;
pub mod launch;
pub mod mutate;
pub mod provision;
pub mod report;
pub mod repro;
pub mod run;

/// `-j N`: how many cells (or pairs) run at once, at least one; `0` would run nothing.
pub fn jobs(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (how many run at once)".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("not a whole number: {e}")),
    }
}

/// A Codex version (`MAJOR.MINOR.PATCH[-PRERELEASE]`), checked before anything is created or
/// installed for it: it becomes a folder name.
pub fn codex_version(text: &str) -> Result<String, String> {
    suites::generate::check_version(text).map(|()| text.to_string())
}

/// A command line the user names (`--driver-cmd`): it must have a program.
pub fn command_line(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("is empty: give the driver's command line".into());
    }
    Ok(text.to_string())
}
